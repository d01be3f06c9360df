//! The scheduler's timers as its state decides them: what comes due and the next
//! deadline, what is owed an agent, what keeps the kernel busy, what forgetting
//! an agent (or every agent) drops. No store, no worker, no clock.

use super::tests::{queue_of, queued};
use super::{State, Timer};
use domain::states::Wake;

/// A state with these timers armed, these agents queued and these starting.
fn armed(timers: &[(Timer, i64)], queued_ids: &[i64], starting: &[i64]) -> State {
    let mut st = State::default();
    st.timers.extend(timers.iter().copied());
    for a in queued_ids {
        st.queue.push_back(queued(*a, Wake::Message, None));
    }
    st.starting.extend(starting);
    st
}

/// The timers left, sorted, short: `retry(1)@100 settle(7)@50`.
fn timers_of(st: &State) -> String {
    let mut t: Vec<String> = st
        .timers
        .iter()
        .map(|(t, at)| format!("{t:?}@{at}").to_lowercase())
        .collect();
    t.sort();
    t.join(" ")
}

#[test]
fn timers_come_due_in_one_pass_and_the_next_deadline_is_said() {
    let mut st = armed(
        &[
            (Timer::Retry(1), 100),
            (Timer::Schedule(2), 200),
            (Timer::Resume(3), 300),
        ],
        &[],
        &[],
    );
    let (mut due, next) = st.due(200);
    due.sort_by_key(|t| format!("{t:?}"));
    assert_eq!(due, [Timer::Retry(1), Timer::Schedule(2)]);
    assert_eq!(next, Some(300));
    assert_eq!(timers_of(&st), "resume(3)@300");
}

#[test]
fn nothing_due_keeps_every_timer() {
    let mut st = armed(&[(Timer::Deferred(4), 500)], &[], &[]);
    assert_eq!(st.due(499), (Vec::new(), Some(500)));
    assert_eq!(st.due(500).0, [Timer::Deferred(4)]);
    assert_eq!(st.due(10_000), (Vec::new(), None));
}

#[test]
fn a_new_deadline_for_a_timer_replaces_the_old() {
    let mut st = armed(&[(Timer::Schedule(1), 100)], &[], &[]);
    st.timers.insert(Timer::Schedule(1), 900);
    assert_eq!(st.due(100).0, Vec::<Timer>::new());
    assert_eq!(timers_of(&st), "schedule(1)@900");
}

/// Whether the scheduler owes agent 1 a run in a state with `timers`, queued
/// agents and starting agents.
fn check_owes(timers: &[(Timer, i64)], queued_ids: &[i64], starting: &[i64], expect: bool) {
    let st = armed(timers, queued_ids, starting);
    assert_eq!(st.owes(&[1]), expect, "{}", timers_of(&st));
}

#[test]
fn a_retry_or_a_deferred_delivery_is_owed() {
    check_owes(&[(Timer::Retry(1), 1)], &[], &[], true);
    check_owes(&[(Timer::Deferred(1), 1)], &[], &[], true);
}

#[test]
fn a_queued_or_starting_agent_is_owed() {
    check_owes(&[], &[1], &[], true);
    check_owes(&[], &[], &[1], true);
}

#[test]
fn a_schedule_or_a_resume_is_not_owed_work() {
    check_owes(
        &[(Timer::Schedule(1), 1), (Timer::Resume(1), 1)],
        &[],
        &[],
        false,
    );
    check_owes(&[(Timer::Retry(2), 1)], &[2], &[2], false);
}

#[test]
fn a_settle_check_alone_keeps_nothing_busy() {
    assert!(!armed(&[(Timer::Settle(7), 1)], &[], &[]).busy());
    assert!(!State::default().busy());
}

#[test]
fn any_agent_timer_queue_or_start_is_busy() {
    assert!(armed(&[(Timer::Schedule(1), 1)], &[], &[]).busy());
    assert!(armed(&[], &[1], &[]).busy());
    assert!(armed(&[], &[], &[1]).busy());
}

#[test]
fn forgetting_an_agent_drops_its_work_and_timers_only() {
    let mut st = armed(
        &[
            (Timer::Retry(1), 1),
            (Timer::Resume(1), 1),
            (Timer::Schedule(1), 1),
            (Timer::Deferred(1), 1),
            (Timer::Retry(2), 5),
            (Timer::Settle(1), 9),
        ],
        &[1, 2],
        &[],
    );
    st.attempts.insert(1, 2);
    st.forget_agent(1);
    assert_eq!(timers_of(&st), "retry(2)@5 settle(1)@9");
    assert_eq!(queue_of(&st), "2:message");
    assert!(st.attempts.is_empty());
}

#[test]
fn forgetting_every_agent_keeps_the_settle_checks() {
    let mut st = armed(
        &[
            (Timer::Retry(1), 1),
            (Timer::Schedule(2), 1),
            (Timer::Settle(7), 9),
        ],
        &[1],
        &[],
    );
    st.attempts.insert(1, 1);
    st.forget_all_agents();
    assert_eq!(timers_of(&st), "settle(7)@9");
    assert_eq!(queue_of(&st), "");
    assert!(st.attempts.is_empty());
}
