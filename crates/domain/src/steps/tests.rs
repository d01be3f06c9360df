use super::*;

fn w(id: Option<&str>, agent: &str, on: &[&str]) -> Written {
    Written {
        id: id.map(Into::into),
        agent: agent.into(),
        on: on
            .iter()
            .map(|s| On::from_json(&json!(s)).unwrap())
            .collect(),
        prompt: format!("{agent}'s turn"),
        result: None,
    }
}

/// The seed's code review: reviewer, coder on reviewer.complete, reviewer on
/// coder.complete.
fn review() -> Vec<StepDef> {
    resolve(vec![
        w(None, "reviewer", &["trigger"]),
        w(None, "coder", &["reviewer.complete"]),
        w(None, "reviewer", &["coder.complete"]),
    ])
    .unwrap()
}

#[test]
fn an_agent_named_means_its_nearest_step_above() {
    let s = review();
    let ids: Vec<&str> = s.iter().map(|s| s.id.as_str()).collect();
    assert_eq!(ids, ["reviewer-1", "coder", "reviewer-2"]);
    assert_eq!(s[1].on, [On::Complete("reviewer-1".into())]);
    assert_eq!(s[2].on, [On::Complete("coder".into())]);
}

#[test]
fn loops_and_impossible_steps_are_refused_with_where() {
    // A step id below makes a loop.
    let e = resolve(vec![
        w(Some("fix"), "coder", &["verify.complete"]),
        w(Some("verify"), "reviewer", &["fix.complete"]),
    ])
    .unwrap_err();
    assert_eq!((e.step, e.on), (1, Some(0)), "{e:?}");
    assert!(e.message.contains("fix -> verify -> fix"), "{}", e.message);
    // A step named by its id may be below (no loop)...
    let s = resolve(vec![
        w(None, "coder", &["reviewer.complete"]),
        w(None, "reviewer", &["trigger"]),
    ])
    .unwrap();
    assert_eq!(s[0].on, [On::Complete("reviewer".into())]);
    // ...but an agent's name means its nearest step above, and it has none.
    let e = resolve(vec![
        w(None, "coder", &["reviewer.complete"]),
        w(None, "reviewer", &["trigger"]),
        w(None, "reviewer", &["trigger"]),
    ])
    .unwrap_err();
    assert_eq!((e.step, e.on), (0, Some(0)));
    assert!(e.message.contains("\"reviewer\""), "{}", e.message);
    // Waiting for itself, and for a step to complete and fail.
    let e = resolve(vec![w(Some("a"), "x", &["a.complete"])]).unwrap_err();
    assert!(e.message.contains("itself"), "{}", e.message);
    let e = resolve(vec![
        w(Some("a"), "x", &["trigger"]),
        w(Some("b"), "y", &["a.complete", "a.failed"]),
        w(Some("c"), "z", &["b.complete"]),
    ])
    .unwrap_err();
    assert_eq!(e.step, 1);
    assert!(e.message.contains("complete and to fail"), "{}", e.message);
    // Two steps with one id.
    let e = resolve(vec![
        w(Some("a"), "x", &["trigger"]),
        w(Some("a"), "y", &["trigger"]),
    ])
    .unwrap_err();
    assert_eq!(e.step, 1);
}

#[test]
fn steps_start_in_order_and_a_failure_skips_what_waits_for_it() {
    use StepState::*;
    let s = review();
    let none = vec![Vec::new(); 3];
    assert_eq!(moves(&s, &[Waiting; 3], &none), [Move::Start(0)]);
    assert_eq!(moves(&s, &[Running, Waiting, Waiting], &none), []);
    assert_eq!(
        moves(&s, &[Done, Waiting, Waiting], &none),
        [Move::Start(1)]
    );
    assert_eq!(
        moves(&s, &[Failed, Waiting, Waiting], &none),
        [
            Move::Skip(1, "step reviewer-1 failed".into()),
            Move::Skip(2, "step coder skipped".into())
        ]
    );
    assert_eq!(unhandled_failures(&s, &[Failed, Skipped, Skipped]), [0]);
}

#[test]
fn fan_out_join_and_failure_handlers() {
    use StepState::*;
    let s = resolve(vec![
        w(Some("plan"), "lead", &["trigger"]),
        w(Some("a"), "x", &["plan.complete"]),
        w(Some("b"), "y", &["plan.complete"]),
        w(Some("join"), "z", &["a.complete", "b.complete"]),
        w(Some("rescue"), "z", &["a.failed"]),
    ])
    .unwrap();
    let none = vec![Vec::new(); 5];
    assert_eq!(
        moves(&s, &[Done, Waiting, Waiting, Waiting, Waiting], &none),
        [Move::Start(1), Move::Start(2)]
    );
    assert_eq!(
        moves(&s, &[Done, Done, Running, Waiting, Waiting], &none),
        [Move::Skip(4, "step a done".into())]
    );
    assert_eq!(
        moves(&s, &[Done, Done, Done, Waiting, Skipped], &none),
        [Move::Start(3)]
    );
    // A failure some step waits for is handled.
    let failed = [Done, Failed, Done, Skipped, Done];
    assert!(unhandled_failures(&s, &failed).is_empty());
}

#[test]
fn messages_and_documents_are_events_once_seen() {
    let s = resolve(vec![Written {
        id: None,
        agent: "deployer".into(),
        on: vec![
            On::from_json(&json!({"message": "(?i)lgtm", "from": "rev*"})).unwrap(),
            On::from_json(&json!({"document": "reports/*.md"})).unwrap(),
        ],
        prompt: "ship it".into(),
        result: None,
    }])
    .unwrap();
    assert!(s[0].on[0].message_matches("Reviewer", "all LGTM"));
    assert!(!s[0].on[0].message_matches("coder", "LGTM"));
    assert!(s[0].on[1].document_matches("reports/a.md"));
    assert_eq!(moves(&s, &[StepState::Waiting], &[vec![0]]), []);
    assert_eq!(
        moves(&s, &[StepState::Waiting], &[vec![0, 1]]),
        [Move::Start(0)]
    );
    assert_eq!(
        on_words(&s[0].on),
        "a message from rev* matches /(?i)lgtm/ and a document matching reports/*.md is written"
    );
    for e in &s[0].on {
        assert_eq!(On::from_json(&e.to_json()).unwrap(), *e);
    }
}

#[test]
fn a_task_reaching_a_state_is_an_event_once_seen() {
    use crate::states::TaskState;
    let table = [
        (json!({"task": "Ship*"}), "Ship it", TaskState::Done, true),
        (json!({"task": "ship*"}), "SHIP it", TaskState::Done, true),
        (
            json!({"task": "Ship*"}),
            "Ship it",
            TaskState::Claimed,
            false,
        ),
        (
            json!({"task": "Ship*", "state": "failed"}),
            "Ship it",
            TaskState::Failed,
            true,
        ),
        (
            json!({"task": "Ship*"}),
            "Write docs",
            TaskState::Done,
            false,
        ),
    ];
    for (on, title, state, want) in table {
        let e = On::from_json(&on).unwrap();
        assert_eq!(e.task_matches(title, state), want, "{on} {title} {state}");
        assert!(e.is_seen());
        assert_eq!(On::from_json(&e.to_json()).unwrap(), e);
    }
    let e = On::from_json(&json!({"task": "Ship*", "state": "cancelled"})).unwrap();
    assert_eq!(e.words(), "a task matching Ship* is cancelled");
    for (bad, says) in [
        (json!({"task": ""}), "task: a glob of the task's title"),
        (
            json!({"task": "x", "state": "open"}),
            "state: \"open\"; use done, failed",
        ),
        (json!({"task": "x", "state": 3}), "state: use done"),
        (json!({"task": "x", "from": "bob"}), "unknown key \"from\""),
    ] {
        let e = On::from_json(&bad).unwrap_err();
        assert!(e.contains(says), "{bad}: {e}");
    }
}

#[test]
fn events_that_are_not_events_are_refused() {
    for bad in [
        json!("review"),
        json!("review.started"),
        json!(".complete"),
        json!({"message": "("}),
        json!({"message": "a", "document": "b"}),
        json!({"doc": "b"}),
        json!(3),
    ] {
        assert!(On::from_json(&bad).is_err(), "{bad}");
    }
}

#[test]
fn a_step_that_needs_a_completion_and_a_failure_through_others_is_refused() {
    // h needs a to fail, and b, which needs a to complete.
    let e = resolve(vec![
        w(Some("a"), "x", &["trigger"]),
        w(Some("b"), "y", &["a.complete"]),
        w(Some("h"), "z", &["a.failed", "b.complete"]),
    ])
    .unwrap_err();
    assert_eq!(e.step, 2, "{e:?}");
    assert!(
        e.message.contains("step a to complete and to fail"),
        "{}",
        e.message
    );
}

#[test]
fn a_skipped_handler_handles_nothing() {
    use StepState::*;
    let s = resolve(vec![
        w(Some("a"), "x", &["trigger"]),
        w(Some("b"), "y", &["trigger"]),
        w(Some("h"), "z", &["a.failed", "b.complete"]),
    ])
    .unwrap();
    // b failed, so the handler of a's failure never ran: a's failure stands.
    assert_eq!(unhandled_failures(&s, &[Failed, Failed, Skipped]), [0, 1]);
    assert_eq!(
        unhandled_failures(&s, &[Failed, Done, Done]),
        Vec::<usize>::new()
    );
}

#[test]
fn a_result_event_waits_for_its_step_and_its_field() {
    use StepState::*;
    let schema = crate::result_schema::ResultSchema::parse(&json!({"type": "object",
        "properties": {"verdict": {"enum": ["approved", "changes_requested"]}}}))
    .unwrap();
    let on =
        |v: &str| On::from_json(&json!({"step": "reviewer", "result": {"verdict": v}})).unwrap();
    let mut review = w(None, "reviewer", &["trigger"]);
    review.result = Some(schema);
    let mut fix = w(None, "coder", &[]);
    fix.on = vec![on("changes_requested")];
    let mut merge = w(None, "merger", &[]);
    merge.on = vec![on("approved")];
    let s = resolve(vec![review, fix, merge]).unwrap();
    assert_eq!(s[1].on[0].step(), Some("reviewer"));
    // (states, seen, moves): a result event is seen when its step is done with
    // a result that meets it; done without, it never happens.
    type Case<'a> = ([StepState; 3], [&'a [usize]; 3], &'a [Move]);
    let cases: &[Case] = &[
        ([Running, Waiting, Waiting], [&[], &[], &[]], &[]),
        (
            [Done, Waiting, Waiting],
            [&[], &[0], &[]],
            &[Move::Start(1), Move::Skip(2, String::new())],
        ),
        (
            [Failed, Waiting, Waiting],
            [&[], &[], &[]],
            &[Move::Skip(1, String::new()), Move::Skip(2, String::new())],
        ),
    ];
    for (states, seen, expect) in cases {
        let seen: Vec<Vec<usize>> = seen.iter().map(|s| s.to_vec()).collect();
        let got: Vec<Move> = moves(&s, states, &seen)
            .into_iter()
            .map(|m| match m {
                Move::Skip(i, why) => {
                    assert!(why.starts_with("step reviewer "), "{why}");
                    Move::Skip(i, String::new())
                }
                m => m,
            })
            .collect();
        assert_eq!(&got, expect, "{states:?}");
    }
    let why = moves(&s, &[Done, Waiting, Waiting], &[vec![], vec![0], vec![]]);
    assert_eq!(
        why[1],
        Move::Skip(
            2,
            "step reviewer completed with a result that does not have verdict = \"approved\""
                .into()
        )
    );
    // A field the schema lacks, or a step that asks for no result, is refused.
    let mut bad = w(None, "coder", &[]);
    bad.on = vec![On::from_json(&json!({"step": "reviewer", "result": {"score": 3}})).unwrap()];
    let e = resolve(vec![w(None, "reviewer", &["trigger"]), bad]).unwrap_err();
    assert!(e.message.contains("asks for no result"), "{}", e.message);
}
