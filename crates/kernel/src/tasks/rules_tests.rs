//! The board's pure rules, table-driven: moves by standing, who a task admits,
//! plans resolved with their names and cycles.

use super::rules::{Assign, Dep, Standing, resolve, transition};
use domain::states::TaskState;

#[track_caller]
fn check(got: Result<(), String>, want: &str) {
    match got {
        Ok(()) => assert_eq!(want, "ok"),
        Err(e) => assert!(
            want != "ok" && e.contains(want),
            "got {e:?}, want it to say {want:?}"
        ),
    }
}

#[test]
fn moves_by_standing() {
    use Standing::*;
    use TaskState::*;
    let table: &[(TaskState, TaskState, Standing, &str)] = &[
        (Open, Claimed, Lead, "take task 1 with task_claim"),
        (Open, Open, Owner, "is open already"),
        (Open, Done, Lead, "ok"),
        (Open, Done, Other, "claim it with task_claim"),
        (Open, Failed, Lead, "ok"),
        (Open, Cancelled, Lead, "ok"),
        (Open, Cancelled, Other, "only the lead cancels"),
        (Claimed, Done, Owner, "ok"),
        (Claimed, Failed, Owner, "ok"),
        (Claimed, Open, Owner, "ok"),
        (Claimed, Open, Lead, "ok"),
        (Claimed, Done, Other, "only its owner or the lead"),
        (Claimed, Open, Other, "only its owner or the lead"),
        (Claimed, Cancelled, Owner, "only the lead cancels"),
        (Claimed, Cancelled, Lead, "ok"),
        (Done, Done, Owner, "task 1 is done already"),
        (Done, Open, Lead, "final"),
        (Failed, Open, Lead, "task 1 is failed already"),
        (Cancelled, Done, Lead, "cancelled already"),
    ];
    for &(from, to, by, want) in table {
        check(transition(1, from, to, by), want);
    }
}

#[test]
fn who_a_task_admits() {
    type Row<'a> = (
        Option<&'a str>,
        &'a str,
        Option<&'a str>,
        Result<bool, &'a str>,
    );
    let table: &[Row] = &[
        (None, "ann", None, Ok(true)),
        (Some("any"), "ann", None, Ok(true)),
        (Some("ann"), "ann", None, Ok(true)),
        (Some("@Ann"), "ann", None, Ok(true)),
        (Some("ann"), "bob", None, Ok(false)),
        (Some("role:reviewer"), "bob", Some("Reviewer"), Ok(true)),
        (Some("role:reviewer"), "bob", Some("coder"), Ok(false)),
        (Some("role:reviewer"), "bob", None, Ok(false)),
        (Some("role:"), "bob", None, Err("names no role")),
        (Some("no spaces"), "bob", None, Err("assign:")),
    ];
    for (rule, who, role, want) in table {
        match (Assign::parse(*rule), want) {
            (Ok(a), Ok(w)) => assert_eq!(a.admits(who, *role), *w, "{rule:?} {who}"),
            (Err(e), Err(w)) => assert!(e.contains(w), "{e}"),
            (got, want) => panic!("{rule:?}: got {got:?}, want {want:?}"),
        }
    }
    assert_eq!(
        Assign::parse(Some("role:qa")).unwrap().stored().as_deref(),
        Some("role:qa")
    );
    assert_eq!(Assign::parse(Some("any")).unwrap().stored(), None);
}

fn name(n: &str) -> Dep {
    Dep::Name(n.into())
}

#[test]
fn plans_resolve_their_names_and_refuse_cycles() {
    let names = |v: &[&str]| -> Vec<Option<String>> {
        v.iter()
            .map(|n| (!n.is_empty()).then(|| (*n).to_owned()))
            .collect()
    };
    // a <- b, a <- c, (b, c) <- d; d also waits for an existing task 7.
    let got = resolve(
        &names(&["a", "b", "c", "d"]),
        &[
            vec![],
            vec![name("a")],
            vec![name("a"), name("a")],
            vec![name("c"), name("b"), Dep::Id(7), name("#7")],
        ],
    )
    .unwrap();
    assert_eq!(got.local, vec![vec![], vec![0], vec![0], vec![1, 2]]);
    assert_eq!(got.existing, vec![vec![], vec![], vec![], vec![7]]);
    type Row<'a> = (&'a [&'a str], Vec<Vec<Dep>>, &'a str);
    let table: &[Row] = &[
        (
            &["a"],
            vec![vec![name("a")]],
            "plan[0].deps: the task waits for itself",
        ),
        (
            &["a", "a"],
            vec![vec![], vec![]],
            "plan[1].name: \"a\" is used twice",
        ),
        (
            &["a"],
            vec![vec![name("zz")]],
            "plan[0].deps: \"zz\" is no task of this plan",
        ),
        (
            &["a", "b", "c"],
            vec![vec![name("c")], vec![name("a")], vec![name("b")]],
            "cycle (a -> c -> b -> a)",
        ),
        (&["", "b"], vec![vec![name("b")], vec![]], "ok"),
    ];
    for (ns, deps, want) in table {
        let got = resolve(&names(ns), deps).map(|_| ());
        check(got, want);
    }
}

#[test]
fn results_are_checked_against_their_schema() {
    let review = serde_json::json!({"type": "object", "required": ["verdict"],
        "properties": {"verdict": {"enum": ["approved", "changes_requested"]}}});
    let table = [
        (serde_json::json!({"verdict": "approved"}), "ok"),
        (serde_json::json!({}), "result.verdict"),
        (
            serde_json::json!({"verdict": "maybe"}),
            "expected one of approved, changes_requested",
        ),
    ];
    for (result, want) in table {
        check(super::rules::check_result(&review, &result), want);
    }
    check(
        super::rules::check_schema(&serde_json::json!({"type": "object", "minimum": 1})),
        "result_schema: `minimum` is not supported",
    );
    check(super::rules::check_schema(&review), "ok");
}
