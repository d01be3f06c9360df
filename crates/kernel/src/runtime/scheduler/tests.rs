//! The scheduler's bookkeeping as tables: admission (start, queue, drop, look
//! again) and what a run's end means (retry with backoff, pause, fail for good),
//! on its state alone: no store, no worker, no clock.

use super::{Admission, Queued, State, Timer, Verdict};
use crate::runtime::runs::RunEnd;
use domain::protocol::ErrorClass;
use domain::states::Wake;
use std::time::Duration;

/// The state before an admission: agents starting, queued (id, wake, prompt),
/// waiting for a retry.
#[derive(Default)]
struct Given {
    running: usize,
    limit: usize,
    starting: &'static [i64],
    queued: &'static [(i64, Wake, Option<&'static str>)],
    retrying: &'static [i64],
}

impl Given {
    fn state(&self) -> State {
        let mut st = State::default();
        st.starting.extend(self.starting);
        for (agent_id, wake, prompt) in self.queued {
            st.queue.push_back(queued(*agent_id, *wake, *prompt));
        }
        for a in self.retrying {
            st.timers.insert(Timer::Retry(*a), 0);
        }
        st
    }
}

pub(super) fn queued(agent_id: i64, wake: Wake, prompt: Option<&str>) -> Queued {
    Queued {
        agent_id,
        wake,
        prompt: prompt.map(str::to_owned),
    }
}

/// The queue, short: `1:message 2:schedule(p)`.
pub(super) fn queue_of(st: &State) -> String {
    st.queue
        .iter()
        .map(|q| match &q.prompt {
            Some(p) => format!("{}:{}({p})", q.agent_id, q.wake),
            None => format!("{}:{}", q.agent_id, q.wake),
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// Admits agent `agent_id`'s wake in the state `given` and checks the decision
/// (`start`, `start(prompt)`, `queued`, `dropped`, `recheck`) and the queue after.
fn check(given: Given, wake: (i64, Wake, Option<&str>), expect: &str, queue: &str) {
    let limit = if given.limit == 0 { 2 } else { given.limit };
    let mut st = given.state();
    let got = match st.admit(queued(wake.0, wake.1, wake.2), given.running, limit) {
        Admission::Start(None) => "start".to_owned(),
        Admission::Start(Some(p)) => format!("start({p})"),
        Admission::Queued => "queued".to_owned(),
        Admission::Dropped => "dropped".to_owned(),
        Admission::Recheck => "recheck".to_owned(),
    };
    assert_eq!(got, expect, "the decision");
    assert_eq!(queue_of(&st), queue, "the queue after");
    if got.starts_with("start") {
        assert!(st.starting.contains(&wake.0), "a start is marked starting");
    }
}

#[test]
fn an_idle_agent_with_room_starts() {
    check(Given::default(), (1, Wake::Message, None), "start", "");
}

#[test]
fn a_schedule_starts_with_its_prompt() {
    let wake = (1, Wake::Schedule, Some("digest"));
    check(Given::default(), wake, "start(digest)", "");
}

#[test]
fn at_the_limit_a_wake_waits_in_the_queue() {
    let given = Given {
        running: 2,
        ..Given::default()
    };
    check(given, (1, Wake::Message, None), "queued", "1:message");
}

#[test]
fn starting_agents_count_toward_the_limit() {
    let given = Given {
        running: 1,
        starting: &[7],
        ..Given::default()
    };
    check(given, (1, Wake::Message, None), "queued", "1:message");
}

#[test]
fn a_limit_of_one_with_one_running_queues() {
    let given = Given {
        running: 1,
        limit: 1,
        ..Given::default()
    };
    check(given, (3, Wake::Resume, None), "queued", "3:resume");
}

#[test]
fn an_agent_has_one_place_in_the_queue() {
    let given = Given {
        running: 2,
        queued: &[(1, Wake::Message, None), (2, Wake::Message, None)],
        ..Given::default()
    };
    check(
        given,
        (1, Wake::Message, None),
        "queued",
        "1:message 2:message",
    );
}

#[test]
fn a_prompt_fills_a_queued_wake_without_one() {
    let given = Given {
        running: 2,
        queued: &[(1, Wake::Message, None)],
        ..Given::default()
    };
    let wake = (1, Wake::Schedule, Some("digest"));
    check(given, wake, "queued", "1:schedule(digest)");
}

#[test]
fn a_queued_prompt_is_not_replaced() {
    let given = Given {
        running: 2,
        queued: &[(1, Wake::Schedule, Some("first"))],
        ..Given::default()
    };
    let wake = (1, Wake::Schedule, Some("second"));
    check(given, wake, "queued", "1:schedule(first)");
}

#[test]
fn a_prompt_less_wake_leaves_a_queued_prompt() {
    let given = Given {
        running: 2,
        queued: &[(1, Wake::Schedule, Some("digest"))],
        ..Given::default()
    };
    check(
        given,
        (1, Wake::Message, None),
        "queued",
        "1:schedule(digest)",
    );
}

#[test]
fn a_message_during_a_retry_wait_adds_nothing() {
    let given = Given {
        retrying: &[1],
        ..Given::default()
    };
    check(given, (1, Wake::Message, None), "dropped", "");
}

#[test]
fn the_retry_itself_starts_during_its_wait() {
    let given = Given {
        retrying: &[1],
        ..Given::default()
    };
    check(given, (1, Wake::Retry, None), "start", "");
}

#[test]
fn another_agents_retry_does_not_drop_a_message() {
    let given = Given {
        retrying: &[2],
        ..Given::default()
    };
    check(given, (1, Wake::Message, None), "start", "");
}

#[test]
fn a_message_while_starting_is_looked_at_again() {
    let given = Given {
        starting: &[1],
        ..Given::default()
    };
    check(given, (1, Wake::Message, None), "recheck", "");
}

#[test]
fn a_schedule_while_starting_is_not_a_recheck() {
    let given = Given {
        starting: &[1],
        ..Given::default()
    };
    check(given, (1, Wake::Schedule, None), "start", "");
}

#[test]
fn a_retry_wait_drops_a_message_before_a_full_queue_takes_it() {
    let given = Given {
        running: 2,
        retrying: &[1],
        ..Given::default()
    };
    check(given, (1, Wake::Message, None), "dropped", "");
}

#[test]
fn a_start_done_says_whether_a_message_came_meanwhile() {
    let mut st = Given::default().state();
    assert_eq!(
        st.admit(queued(1, Wake::Message, None), 0, 2),
        Admission::Start(None)
    );
    assert_eq!(
        st.admit(queued(1, Wake::Message, None), 0, 2),
        Admission::Recheck
    );
    assert!(st.started(1), "a message came while it started");
    assert!(!st.started(1), "and only once");
    assert!(st.starting.is_empty());
}

#[test]
fn the_queue_is_first_in_first_out_while_there_is_room() {
    let given = Given {
        queued: &[
            (3, Wake::Message, None),
            (1, Wake::Poll, None),
            (2, Wake::Retry, None),
        ],
        ..Given::default()
    };
    let mut st = given.state();
    let mut order = Vec::new();
    while let Some(q) = st.next(0, 5) {
        order.push(q.agent_id);
    }
    assert_eq!(order, [3, 1, 2]);
}

#[test]
fn a_full_house_takes_nothing_from_the_queue() {
    let given = Given {
        starting: &[9],
        queued: &[(1, Wake::Message, None)],
        ..Given::default()
    };
    let mut st = given.state();
    assert!(
        st.next(1, 2).is_none(),
        "one running and one starting fill two"
    );
    assert_eq!(queue_of(&st), "1:message", "nothing taken");
    assert_eq!(st.next(0, 2).map(|q| q.agent_id), Some(1));
}

/// How a run ended, by a word: `ok`, `stopped`, or an error class (`crash`, `auth`…).
fn end(word: &str) -> RunEnd {
    let class = |c| RunEnd {
        error_class: Some(c),
        ..RunEnd::default()
    };
    match word {
        "ok" => RunEnd {
            ok: true,
            ..RunEnd::default()
        },
        "stopped" => class(ErrorClass::Stopped),
        "auth" => class(ErrorClass::Auth),
        "billing" => class(ErrorClass::BillingQuota),
        "timeout" => class(ErrorClass::Timeout),
        "rate" => class(ErrorClass::RateLimit),
        "crash" => class(ErrorClass::Crash),
        "none" => RunEnd::default(),
        w => panic!("no such end: {w}"),
    }
}

/// What each end of agent 1's runs, in order, means with `delays` between retries:
/// `retry N after Ms`, `ok`, `paused (class)`, `failed after N`, `-`.
fn check_retries(ends: &str, delays_ms: &[u64], expect: &str) {
    let delays: Vec<Duration> = delays_ms
        .iter()
        .map(|d| Duration::from_millis(*d))
        .collect();
    let mut st = State::default();
    let got: Vec<String> = ends
        .split_whitespace()
        .map(|w| match st.settle(1, &end(w), &delays) {
            Verdict::Nothing => "-".to_owned(),
            Verdict::Succeeded => "ok".to_owned(),
            Verdict::Pause(c) => format!("paused ({})", c.as_str()),
            Verdict::Retry(n, d) => format!("retry {n} after {}ms", d.as_millis()),
            Verdict::Failed(n) => format!("failed after {n}"),
        })
        .collect();
    assert_eq!(got.join(", "), expect, "{ends}");
}

const BACKOFF: &[u64] = &[1000, 2000, 4000];

#[test]
fn a_success_is_a_success() {
    check_retries("ok", BACKOFF, "ok");
}

#[test]
fn a_stopped_run_means_nothing() {
    check_retries("stopped", BACKOFF, "-");
}

#[test]
fn a_failure_is_retried_after_the_first_delay() {
    check_retries("crash", BACKOFF, "retry 1 after 1000ms");
}

#[test]
fn failures_in_a_row_back_off() {
    check_retries(
        "crash timeout rate",
        BACKOFF,
        "retry 1 after 1000ms, retry 2 after 2000ms, retry 3 after 4000ms",
    );
}

#[test]
fn the_fourth_failure_in_a_row_fails_for_good() {
    check_retries(
        "crash crash crash crash",
        BACKOFF,
        "retry 1 after 1000ms, retry 2 after 2000ms, retry 3 after 4000ms, failed after 4",
    );
}

#[test]
fn after_failing_for_good_the_count_starts_over() {
    check_retries(
        "crash crash crash crash crash",
        BACKOFF,
        "retry 1 after 1000ms, retry 2 after 2000ms, retry 3 after 4000ms, failed after 4, \
         retry 1 after 1000ms",
    );
}

#[test]
fn a_success_clears_the_count() {
    check_retries(
        "crash crash ok crash",
        BACKOFF,
        "retry 1 after 1000ms, retry 2 after 2000ms, ok, retry 1 after 1000ms",
    );
}

#[test]
fn a_stop_between_failures_leaves_the_count() {
    check_retries(
        "crash stopped crash",
        BACKOFF,
        "retry 1 after 1000ms, -, retry 2 after 2000ms",
    );
}

#[test]
fn an_auth_error_pauses_instead_of_retrying() {
    check_retries("auth", BACKOFF, "paused (auth)");
}

#[test]
fn a_billing_error_pauses_too() {
    check_retries("billing", BACKOFF, "paused (billing_quota)");
}

#[test]
fn a_pause_clears_the_count() {
    check_retries(
        "crash crash auth crash",
        BACKOFF,
        "retry 1 after 1000ms, retry 2 after 2000ms, paused (auth), retry 1 after 1000ms",
    );
}

#[test]
fn a_failure_without_a_class_is_retried() {
    check_retries("none", BACKOFF, "retry 1 after 1000ms");
}

#[test]
fn without_retries_the_first_failure_is_final() {
    check_retries("crash crash", &[], "failed after 1, failed after 1");
}

#[test]
fn the_test_delays_are_kept_as_given() {
    check_retries(
        "crash crash",
        &[100, 200],
        "retry 1 after 100ms, retry 2 after 200ms",
    );
}

#[test]
fn each_agent_counts_its_own_failures() {
    let delays = [Duration::from_secs(1), Duration::from_secs(2)];
    let mut st = State::default();
    assert_eq!(
        st.settle(1, &end("crash"), &delays),
        Verdict::Retry(1, delays[0])
    );
    assert_eq!(
        st.settle(2, &end("crash"), &delays),
        Verdict::Retry(1, delays[0])
    );
    assert_eq!(
        st.settle(1, &end("crash"), &delays),
        Verdict::Retry(2, delays[1])
    );
    assert_eq!(st.settle(2, &end("ok"), &delays), Verdict::Succeeded);
    assert_eq!(st.settle(1, &end("crash"), &delays), Verdict::Failed(3));
}

/// The wait of the automatic pause after `pauses` in a row, 5 min doubling to 1 h.
fn check_pause(pauses: i64, expect_min: u64) {
    let (first, max) = (Duration::from_secs(300), Duration::from_secs(3600));
    let got = crate::runtime::base::resume_after(first, max, pauses);
    assert_eq!(
        got,
        Duration::from_secs(expect_min * 60),
        "after {pauses} pauses"
    );
}

#[test]
fn the_first_automatic_pause_waits_five_minutes() {
    check_pause(0, 5);
}

#[test]
fn automatic_pauses_in_a_row_double_their_wait() {
    check_pause(1, 10);
    check_pause(2, 20);
    check_pause(3, 40);
}

#[test]
fn the_automatic_pause_stops_doubling_at_an_hour() {
    check_pause(4, 60);
    check_pause(16, 60);
    check_pause(1_000, 60);
}

#[test]
fn a_negative_count_of_pauses_waits_the_first_time() {
    check_pause(-3, 5);
}
