use super::*;
use serde_json::json;

fn c(v: serde_json::Value) -> Contract {
    parse(&v).unwrap()
}

fn shell(cmd: &str) -> Request {
    Request::Shell {
        command: cmd.into(),
    }
}

fn tool<'a>(agent: &'a str, r: &'a Request) -> Event<'a> {
    Event::Tool {
        agent,
        request: r,
        reached: Reached::AsGiven,
    }
}

#[test]
fn errors_name_the_field() {
    let cases = [
        (
            json!({"when": {"event": "message"}, "then": {"action": "deny"}}),
            "name:",
        ),
        (
            json!({"name": "x", "when": {"event": "tool"}, "then": {"action": "deny"}}),
            "when.event: unknown event",
        ),
        (
            json!({"name": "x", "when": {"event": "tool_request", "tool": "exec"}, "then": {"action": "deny"}}),
            "when.tool: unknown tool class",
        ),
        (
            json!({"name": "x", "when": {"event": "tool_request", "tol": "shell"}, "then": {"action": "deny"}}),
            "when.tol: unknown field",
        ),
        (
            json!({"name": "x", "when": {"event": "message", "text": "("}, "then": {"action": "deny"}}),
            "when.text: not a regular expression",
        ),
        (
            json!({"name": "x", "when": {"event": "spend"}, "then": {"action": "pause"}}),
            "when.usd",
        ),
        (
            json!({"name": "x", "when": {"event": "message"}, "then": {"action": "require_approval"}}),
            "route",
        ),
        (
            json!({"name": "x", "when": {"event": "tool_request"}, "then": {"action": "require_approval", "count": 2}}),
            "then.count",
        ),
        (
            json!({"name": "x", "when": {"event": "tool_request"}, "then": {"action": "require_approval", "timeout": "soon"}}),
            "then.timeout",
        ),
        (
            json!({"name": "x", "when": {"event": "message"}, "then": {"action": "route", "to": []}}),
            "then.to: name at least one member",
        ),
        (
            json!({"name": "x", "when": {"event": "run_end", "status": "ok"}, "then": {"action": "notify"}}),
            "when.status",
        ),
        (
            json!({"name": "x", "extra": 1, "when": {"event": "run_end"}, "then": {"action": "notify"}}),
            "extra: unknown field",
        ),
        (
            json!({"name": "x", "when": {"event": "message", "urgent": "yes"}, "then": {"action": "allow"}}),
            "when.urgent: true",
        ),
    ];
    for (v, want) in cases {
        let e = parse(&v).unwrap_err();
        assert!(e.contains(want), "{v}: {e:?} should mention {want:?}");
    }
}

#[test]
fn a_deny_on_rm_catches_it_inside_a_compound_command() {
    let k = c(
        json!({"name": "no-rm", "when": {"event": "tool_request", "tool": "shell", "match": "rm *"},
        "then": {"action": "deny", "reason": "nobody deletes files"}}),
    );
    for cmd in ["rm -f a.txt", "cd x && rm y", "echo $(rm z)"] {
        let r = shell(cmd);
        let v = decide([&k], &tool("alice", &r));
        let (name, reason, pause) = v.deny.expect(cmd);
        assert_eq!(name, "no-rm");
        assert!(reason.contains("nobody deletes files"), "{reason}");
        assert!(!pause);
    }
    let r = shell("ls -l");
    assert!(!decide([&k], &tool("alice", &r)).any());
}

#[test]
fn deny_beats_allow_and_allow_exempts_from_approval() {
    let approve = c(
        json!({"name": "edits", "when": {"event": "tool_request", "tool": "edit"},
        "then": {"action": "require_approval", "approvers": ["user", "reviewer"], "count": 1, "timeout": "5m"}}),
    );
    let approve2 = c(
        json!({"name": "edits2", "when": {"event": "tool_request", "tool": "edit", "agent": "bob"},
        "then": {"action": "require_approval", "approvers": "reviewer", "timeout": "1m", "on_timeout": "allow"}}),
    );
    let notes = c(
        json!({"name": "notes", "when": {"event": "tool_request", "tool": "edit", "match": "notes/*"},
        "then": {"action": "allow"}}),
    );
    let secrets = c(
        json!({"name": "secrets", "when": {"event": "tool_request", "match": "*.env"},
        "then": {"action": "deny"}}),
    );
    let tell = c(
        json!({"name": "tell", "when": {"event": "tool_request"}, "then": {"action": "notify", "to": "@ops"}}),
    );
    let all = [&approve, &approve2, &notes, &secrets, &tell];
    let edit = |p: &str| Request::Edit { path: p.into() };

    let r = edit("src/main.rs");
    let v = decide(all, &tool("bob", &r));
    let a = v.approval.expect("approval");
    assert_eq!(a.contracts, ["edits", "edits2"]);
    assert_eq!(a.approvers, ["user", "reviewer"]);
    assert_eq!(a.timeout, Duration::from_secs(60));
    assert_eq!(
        a.on_timeout,
        OnTimeout::Deny,
        "deny on timeout if any says so"
    );
    assert_eq!(v.notify, [("tell".to_owned(), vec!["ops".to_owned()])]);

    let r = edit("notes/today.md");
    let v = decide(all, &tool("bob", &r));
    assert_eq!(v.allowed_by.as_deref(), Some("notes"));
    assert!(v.approval.is_none());

    let r = edit("notes/x.env");
    let v = decide(all, &tool("bob", &r));
    assert_eq!(v.deny.as_ref().map(|d| d.0.as_str()), Some("secrets"));
    assert_eq!(v.notify.len(), 1, "notify fires whatever the outcome");
}

#[test]
fn spend_compares_the_right_total() {
    let k = c(
        json!({"name": "budget", "when": {"event": "spend", "usd": 5},
        "then": {"action": "require_approval"}}),
    );
    let per_agent = c(
        json!({"name": "tokens", "when": {"event": "spend", "tokens": 1000, "per": "agent"},
        "then": {"action": "pause"}}),
    );
    let e = |wu: f64, at: u64| Event::Spend {
        agent: "a",
        agent_usd: 0.0,
        agent_tokens: at,
        workflow_usd: wu,
        workflow_tokens: 0,
    };
    assert!(decide([&k], &e(4.9, 0)).approval.is_none());
    assert!(decide([&k], &e(5.1, 0)).approval.is_some());
    let v = decide([&per_agent], &e(0.0, 1001));
    assert_eq!(v.pause.len(), 1);
    assert!(v.deny.is_none(), "after the fact: a pause, not a refusal");
}

#[test]
fn messages_route_and_scope() {
    let k = c(
        json!({"name": "via-review", "workflow": "@ship", "when": {"event": "message", "to": "deployer"},
        "then": {"action": "route", "to": "@reviewer"}}),
    );
    let to = vec!["deployer".to_owned()];
    let v = decide(
        [&k],
        &Event::Message {
            from: "alice",
            to: &to,
            text: "@deployer ship it",
            urgent: false,
        },
    );
    assert_eq!(v.routes, [("via-review".to_owned(), "reviewer".to_owned())]);
    assert!(k.in_scope("ship", "main") && k.in_scope("ship", "v2") && !k.in_scope("other", "main"));
}

#[test]
fn every_contract_reads_as_a_sentence() {
    let k = c(
        json!({"name": "no-rm", "when": {"event": "tool_request", "tool": "shell", "match": "rm *"},
        "then": {"action": "deny", "reason": "nobody deletes files"}}),
    );
    assert_eq!(
        sentence(&k),
        "When any agent asks to run a command matching \"rm *\", refuse it: \"nobody deletes files\"."
    );
    let k = c(
        json!({"name": "cost", "workflow": "review:pr-1", "when": {"event": "spend", "usd": 5},
        "then": {"action": "require_approval", "timeout": "1h"}}),
    );
    assert_eq!(
        sentence(&k),
        "When the workflow has spent more than $5, hold the agent's next runs until you (the lead) approve; \
         if nobody decides within 1h, refuse it (in @review:pr-1)."
    );
}

#[test]
fn a_path_whose_landing_is_unknown_is_denied_and_never_exempt() {
    let deny = c(
        json!({"name": "no-secrets", "when": {"event": "tool_request", "tool": "edit",
        "match": "secrets/*"}, "then": {"action": "deny"}}),
    );
    let allow = c(
        json!({"name": "docs", "when": {"event": "tool_request", "tool": "edit",
        "match": "docs/*"}, "then": {"action": "allow"}}),
    );
    let r = Request::Edit {
        path: "x/../alias/k".into(),
    };
    let ev = |reached| Event::Tool {
        agent: "a",
        request: &r,
        reached,
    };
    assert!(matches(&deny, &ev(Reached::Unknown)));
    assert!(!matches(&allow, &ev(Reached::Unknown)));
    assert!(!matches(&deny, &ev(Reached::AsGiven)));
    assert!(matches(&deny, &ev(Reached::At("secrets/k"))));
}

#[test]
fn only_an_edit_deny_with_a_glob_holds_paths() {
    let rules = [("deny", "edit", "a/*"), ("require_approval", "edit", "b/*")];
    let more = [("deny", "shell", "rm *"), ("deny", "edit", "a/*")];
    let all: Vec<Contract> = (rules.iter().chain(&more))
        .map(|(then, tool, m)| {
            c(json!({"name": "r", "then": {"action": then},
            "when": {"event": "tool_request", "tool": tool, "match": m}}))
        })
        .collect();
    let any = json!({"name": "r", "then": {"action": "deny"}, "when": {"event": "tool_request", "match": "rm -r *"}}); // every tool's: commands too, no path glob
    assert_eq!(edit_path_denials(all.iter().chain([&c(any)]), "x"), ["a/*"]);
}

#[test]
fn merges_into_main_need_the_lead() {
    let k = c(
        json!({"name": "main-needs-me", "when": {"event": "merge", "into": "main"},
        "then": {"action": "require_approval", "approvers": ["user"]}}),
    );
    let ev = |agent, into, mode| Event::Merge { agent, into, mode };
    let v = decide([&k], &ev("bob", "main", "auto"));
    assert!(v.approval.is_some(), "{v:?}");
    assert!(!matches(&k, &ev("bob", "aw/team-t1/alice", "auto")));
    assert!(
        sentence(&k).contains("merged into a branch matching \"main\""),
        "{}",
        sentence(&k)
    );
    assert!(
        sentence(&k).contains("hold the merge until"),
        "{}",
        sentence(&k)
    );
    let squash = c(
        json!({"name": "no-squash", "when": {"event": "merge", "agent": "b*", "mode": "squash"},
        "then": {"action": "deny"}}),
    );
    assert!(matches(&squash, &ev("bob", "main", "squash")));
    assert!(!matches(&squash, &ev("bob", "main", "merge")));
    assert!(!matches(&squash, &ev("alice", "main", "squash")));
    let e = parse(
        &json!({"name": "x", "when": {"event": "merge", "mode": "rebase"},
        "then": {"action": "deny"}}),
    )
    .unwrap_err();
    assert!(e.contains("mode") && e.contains("squash"), "{e}");
    let e = parse(&json!({"name": "x", "when": {"event": "merge"},
        "then": {"action": "route", "to": "bob"}}))
    .unwrap_err();
    assert!(
        e.contains("a merge contract can allow, deny, require_approval, require_votes, notify"),
        "{e}"
    );
}

#[test]
fn agents_making_agents_are_governed_by_maker_and_backend() {
    let k = c(
        json!({"name": "subs-need-me", "when": {"event": "agent_new", "by": "lead*"},
        "then": {"action": "require_approval"}}),
    );
    let ev = |by, backend| Event::AgentNew {
        by,
        name: "scout",
        backend,
    };
    assert!(decide([&k], &ev("lead-dev", "sdk")).approval.is_some());
    assert!(!matches(&k, &ev("coder", "sdk")));
    assert_eq!(
        sentence(&k),
        "When agent lead* makes an agent of its own, hold the new agent until you (the lead) \
         approve; if nobody decides within 10m, refuse it.",
    );
    let no_claude = c(
        json!({"name": "no-claude", "when": {"event": "agent_new", "backend": "claude"},
        "then": {"action": "deny", "reason": "too dear"}}),
    );
    assert!(decide([&no_claude], &ev("anyone", "claude")).deny.is_some());
    assert!(!matches(&no_claude, &ev("anyone", "mock")));
    for (when, then, want) in [
        (
            json!({"event": "agent_new", "agent": "x"}),
            json!({"action": "deny"}),
            "agent: unknown field; the fields here are event, by, backend",
        ),
        (
            json!({"event": "agent_new"}),
            json!({"action": "pause"}),
            "an agent_new contract can allow, deny, require_approval, notify, not pause",
        ),
        (
            json!({"event": "agent_neww"}),
            json!({"action": "deny"}),
            "merge, agent_new, task or hook",
        ),
    ] {
        let e = parse(&json!({"name": "x", "when": when, "then": then})).unwrap_err();
        assert!(e.contains(want), "{when}: {e}");
    }
}

#[test]
fn a_rate_needs_both_halves_and_fits_its_event() {
    let cases = [
        (
            json!({"name": "x", "when": {"event": "message", "more_than": 10}, "then": {"action": "deny"}}),
            "when.within: a rate needs its window too",
        ),
        (
            json!({"name": "x", "when": {"event": "message", "within": "1h"}, "then": {"action": "deny"}}),
            "when.more_than: a rate needs its count too",
        ),
        (
            json!({"name": "x", "when": {"event": "message", "more_than": -1, "within": "1h"}, "then": {"action": "deny"}}),
            "when.more_than: a whole number",
        ),
        (
            json!({"name": "x", "when": {"event": "message", "more_than": 10, "within": "soon"}, "then": {"action": "deny"}}),
            "when.within: \"soon\" is not a duration",
        ),
        (
            json!({"name": "x", "when": {"event": "message", "more_than": 10, "within": "30d"}, "then": {"action": "deny"}}),
            "when.within: between 1s and 7d",
        ),
        (
            json!({"name": "x", "when": {"event": "run_end", "more_than": 10, "within": "1h"}, "then": {"action": "pause"}}),
            "when.more_than: unknown field",
        ),
        (
            json!({"name": "x", "when": {"event": "message", "more_than": 10, "within": "1h"}, "then": {"action": "route", "to": "bob"}}),
            "a message contract with a rate can deny, notify, not route",
        ),
        (
            json!({"name": "x", "when": {"event": "tool_request", "more_than": 3, "within": "1h"}, "then": {"action": "allow"}}),
            "can deny, pause, require_approval, require_votes, notify, not allow",
        ),
    ];
    for (spec, want) in cases {
        let e = parse(&spec).unwrap_err();
        assert!(e.contains(want), "{spec}: {e}");
    }
    let ok = c(
        json!({"name": "ten-an-hour", "when": {"event": "message", "from": "coder",
                      "more_than": 10, "within": "1h"}, "then": {"action": "deny"}}),
    );
    assert_eq!(
        ok.rate,
        Some(Rate {
            more_than: 10,
            within: Duration::from_secs(3600)
        })
    );
    assert_eq!(
        sentence(&ok),
        "When @coder sends a message more than 10 times within 1h, refuse it."
    );
}

#[test]
fn a_rated_contract_acts_only_past_its_rate() {
    let rated = c(
        json!({"name": "three-commands", "when": {"event": "tool_request", "tool": "shell",
                         "more_than": 3, "within": "1h"}, "then": {"action": "deny"}}),
    );
    let plain = c(
        json!({"name": "tell", "when": {"event": "tool_request", "tool": "shell"},
                         "then": {"action": "notify"}}),
    );
    let ls = shell("ls");
    let e = tool("coder", &ls);
    let all = [rated.clone(), plain.clone()];
    assert_eq!(
        rated_names(&all, &e),
        ["three-commands"],
        "only rated contracts are counted"
    );
    let under = decide_rated(&all, &e, |_| false);
    assert!(under.deny.is_none() && under.notify.len() == 1, "{under:?}");
    let past = decide_rated(&all, &e, |k| k.name == "three-commands");
    assert_eq!(
        past.deny.as_ref().map(|d| d.0.as_str()),
        Some("three-commands")
    );
    assert!(
        decide(&all, &e).deny.is_none(),
        "without counts a rate never acts"
    );
    let read = Request::Read { path: "a".into() };
    assert!(rated_names(&all, &tool("coder", &read)).is_empty());
}

fn rated_names<'c>(all: &'c [Contract], e: &Event<'_>) -> Vec<&'c str> {
    rated(all, e).into_iter().map(|c| c.name.as_str()).collect()
}

#[test]
fn a_vote_reads_its_share_and_joins_the_approval() {
    for (bad, want) in [
        (json!("3/2"), "then.votes: \"3/2\": a number of members"),
        (json!(0), "then.votes: \"0\""),
        (json!(null), "then.votes: how many of the members"),
    ] {
        let spec = json!({"name": "x", "when": {"event": "tool_request"},
                          "then": {"action": "require_votes", "votes": bad}});
        let e = parse(&spec).unwrap_err();
        assert!(e.contains(want), "{spec}: {e}");
    }
    let e = parse(&json!({"name": "x", "when": {"event": "message"},
                          "then": {"action": "require_votes", "votes": 2}}))
    .unwrap_err();
    assert!(e.contains("a message contract can"), "{e}");
    let deploys = c(
        json!({"name": "deploys", "when": {"event": "tool_request", "tool": "shell",
                           "match": "deploy*"},
                           "then": {"action": "require_votes", "votes": "2/3", "timeout": "1h"}}),
    );
    assert_eq!(
        sentence(&deploys),
        "When any agent asks to run a command matching \"deploy*\", wait until 2/3 of the members \
         vote for it (a proposal, team_vote); if they have not decided within 1h, refuse it."
    );
    let shares = [(1, 1), (2, 2), (3, 2), (4, 3), (6, 4)];
    for (members, needed) in shares {
        assert_eq!(
            Votes::Share { num: 2, den: 3 }.needed(members),
            needed,
            "2/3 of {members}"
        );
    }
    let cmd = shell("deploy prod");
    let v = decide(std::slice::from_ref(&deploys), &tool("coder", &cmd));
    let a = v.approval.expect("a vote holds the request");
    assert_eq!(a.votes, [Votes::Share { num: 2, den: 3 }]);
    let three = c(json!({"name": "three", "when": {"event": "tool_request"},
                         "then": {"action": "require_votes", "votes": 3}}));
    let half = c(json!({"name": "half", "when": {"event": "tool_request"},
                        "then": {"action": "require_votes", "votes": "1/2"}}));
    let both = decide(&[half, three], &tool("coder", &cmd))
        .approval
        .unwrap();
    assert_eq!(
        both.votes_needed(3),
        Some(3),
        "the most either needs of three"
    );
    assert_eq!(
        both.votes_needed(10),
        Some(5),
        "the most either needs of ten"
    );
    assert_eq!(both.votes_text().as_deref(), Some("1/2 and 3"));
    assert!(a.approvers.is_empty() && a.count == 0, "{a:?}");
}

/// Seed 001's `route(@reviewer, @coder)`: a message goes to the reviewer first,
/// what the reviewer forwards to the coder, what the coder forwards is delivered.
#[test]
fn a_route_of_several_members_is_a_chain() {
    let k = c(
        json!({"name": "pr-review", "when": {"event": "message", "to": "deployer"},
        "then": {"action": "route", "to": ["@reviewer", "coder"]}}),
    );
    let to = vec!["deployer".to_owned()];
    let check = |from: &str, expect: Option<&str>| {
        let v = decide(
            [&k],
            &Event::Message {
                from,
                to: &to,
                text: "@deployer ship it",
                urgent: false,
            },
        );
        let got: Vec<&str> = v.routes.iter().map(|(_, m)| m.as_str()).collect();
        assert_eq!(got, expect.into_iter().collect::<Vec<_>>(), "from {from}");
    };
    check("alice", Some("reviewer"));
    check("Reviewer", Some("coder"));
    check("coder", None);
    assert!(
        sentence(&k).contains("@reviewer, then @coder in turn"),
        "{}",
        sentence(&k)
    );
}

/// The design's field names are refused with the name to write instead.
#[test]
fn the_designs_field_names_are_refused_naming_the_new_one() {
    let check = |v: serde_json::Value, expect: &str| {
        let e = parse(&v).unwrap_err();
        assert!(e.starts_with(expect), "{v}: {e}");
    };
    check(
        json!({"name": "x", "condition": "bash_tool_call", "then": {"action": "deny"}}),
        "condition: the design's `condition` is written `when`",
    );
    check(
        json!({"name": "x", "when": {"event": "message"}, "action": "route(@reviewer, @coder)"}),
        "action: the design's `action` is written `then`",
    );
    check(
        json!({"name": "x", "when": {"event": "message"}, "then": {"action": "notify"}, "scope": "global"}),
        "scope: the design's `scope` is written `org`",
    );
    // `action` inside `then` is the action itself.
    parse(&json!({"name": "x", "when": {"event": "message"}, "then": {"action": "notify"}}))
        .unwrap();
}
