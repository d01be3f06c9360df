//! Step workflows: the seed's code review parses into its chain, and the graph's
//! mistakes are reported at the step and event at fault.

use super::inline;
use crate::steps::On;

const AGENTS: &str = "agents:\n  reviewer: { backend: mock }\n  coder: { backend: mock }\n";

#[test]
fn the_seeds_code_review_is_a_chain() {
    let yaml = format!(
        "name: code-review\n{AGENTS}params: [{{name: pr}}]\ntrigger: \"PR ${{{{ params.pr }}}} opened\"\nsteps:\n  \
         - agent: reviewer\n    on: trigger\n    action: \"review ${{{{ trigger }}}}\"\n  \
         - agent: coder\n    on: reviewer.complete\n    prompt: \"address ${{{{ previous.output }}}}\"\n  \
         - agent: reviewer\n    on: [coder.complete]\n    prompt: \"verify ${{{{ steps.coder }}}}\"\n"
    );
    let wf = inline(&yaml).unwrap();
    assert_eq!(wf.trigger.as_deref(), Some("PR ${{ params.pr }} opened"));
    let ids: Vec<&str> = wf.steps.iter().map(|s| s.id.as_str()).collect();
    assert_eq!(ids, ["reviewer-1", "coder", "reviewer-2"]);
    assert_eq!(wf.steps[1].on, [On::Complete("reviewer-1".into())]);
    assert_eq!(wf.steps[2].on, [On::Complete("coder".into())]);
    assert_eq!(wf.steps[0].prompt, "review ${{ trigger }}");
}

#[test]
fn step_mistakes_are_reported_where_they_are() {
    let cases: &[(&str, &str, &str)] = &[
        // A loop, at the event that closes it.
        (
            "steps:\n  - { id: fix, agent: coder, on: verify.complete, prompt: x }\n  - { id: verify, agent: reviewer, on: [fix.complete], prompt: y }\n",
            "3:41",
            "fix -> verify -> fix",
        ),
        (
            "steps:\n  - { agent: coderr, on: trigger, prompt: x }\n",
            "2:14",
            "did you mean \"coder\"",
        ),
        (
            "steps:\n  - { agent: coder, on: triger, prompt: x }\n",
            "2:25",
            "is not an event",
        ),
        (
            "steps:\n  - { agent: coder, on: trigger }\n",
            "2:5",
            "no `prompt`",
        ),
        (
            "steps:\n  - { agent: coder, on: trigger, prompt: \"${{ steps.nope }}\" }\n",
            "2:43",
            "no step has the id \"nope\"",
        ),
        (
            "kickoff: hi\nsteps:\n  - { agent: coder, on: trigger, prompt: x }\n",
            "1:1",
            "no kickoff",
        ),
        ("trigger: go\n", "1:1", "there are no `steps`"),
        (
            "steps:\n  - { agent: coder, on: trigger, prompt: x }\n  - { agent: reviewer, on: [coder.complete, coder.failed], prompt: y }\n",
            "3:45",
            "complete and to fail",
        ),
        (
            "steps:\n  - { agent: coder, on: {message: \"(\"}, prompt: x }\n",
            "2:25",
            "not a regular expression",
        ),
    ];
    let mut failures = Vec::new();
    for (tail, at, word) in cases {
        let yaml = format!("{AGENTS}{tail}");
        let shifted = |at: &str| {
            let (l, c) = at.split_once(':').unwrap();
            format!("{}:{c}", l.parse::<usize>().unwrap() + 3)
        };
        match inline(&yaml) {
            Ok(_) => failures.push(format!("{tail:?}: parsed")),
            Err(e) => {
                let got = format!("{}:{}", e.line, e.column);
                if got != shifted(at) || !e.to_string().contains(word) {
                    failures.push(format!(
                        "{tail:?}: expected {} {word:?}, got {e}",
                        shifted(at)
                    ));
                }
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn a_message_from_nobody_and_an_overlong_prompt_are_refused() {
    let yaml = format!(
        "{AGENTS}steps:\n  - {{ agent: coder, on: {{message: ok, from: reviwer}}, prompt: x }}\n"
    );
    let e = inline(&yaml).unwrap_err();
    assert!(
        e.message.contains("matches no member") && e.fix.contains("reviewer"),
        "{e}"
    );
    let yaml = format!(
        "{AGENTS}steps:\n  - {{ agent: coder, on: {{message: ok, from: \"rev*\"}}, prompt: x }}\n"
    );
    inline(&yaml).unwrap();
    let long = "x".repeat(crate::steps::MAX_PROMPT_CHARS + 1);
    let yaml = format!("{AGENTS}steps:\n  - {{ agent: coder, on: trigger, prompt: \"{long}\" }}\n");
    assert!(
        inline(&yaml)
            .unwrap_err()
            .message
            .contains("over 65536 characters")
    );
}

#[test]
fn contract_names_starting_with_step_are_the_steps_own() {
    let yaml = format!(
        "{AGENTS}contracts:\n  - {{ name: step-x, when: {{ event: message }}, then: {{ action: notify }} }}\n"
    );
    let e = inline(&yaml).map(|_| ()).unwrap_err();
    assert!(e.message.contains("the steps' own") && e.line == 5, "{e}");
}

/// Seed 001's workflow, exactly as the seed writes it: no `agents:` block.
const SEED_001: &str = "name: code-review
trigger: pr_opened
steps:
  - agent: reviewer
    on: trigger
    action: review PR, post findings to #review
  - agent: coder
    on: reviewer.complete
    action: address findings, push fixes
  - agent: reviewer
    on: coder.complete
    action: verify fixes, approve or request changes
";

#[test]
fn agents_named_only_in_steps_take_the_defaults_with_a_warning() {
    let wf = inline(SEED_001).unwrap();
    let names: Vec<&str> = wf.agents.iter().map(|a| a.name.as_str()).collect();
    assert_eq!(names, ["reviewer", "coder"]);
    let backend = wf.agents[0].backend.clone();
    assert!(
        wf.agents
            .iter()
            .all(|a| a.backend == backend && a.mock.is_empty())
    );
    let ids: Vec<&str> = wf.steps.iter().map(|s| s.id.as_str()).collect();
    assert_eq!(ids, ["reviewer-1", "coder", "reviewer-2"]);
    let [w] = wf.warnings.as_slice() else {
        panic!("one warning: {:?}", wf.warnings)
    };
    assert!(
        w.contains("agents reviewer, coder are named only in `steps:`")
            && w.contains(&format!("the default backend, {backend}"))
            && w.contains("add `agents:`"),
        "{w}"
    );
    // With an `agents:` block nothing is defaulted (a step's unknown agent is a typo).
    let declared = SEED_001.replacen("steps:", &format!("{AGENTS}steps:"), 1);
    assert!(inline(&declared).unwrap().warnings.is_empty());
}

#[test]
fn agents_from_steps_are_still_checked() {
    let cases: &[(&str, &str)] = &[
        ("name: x\n", "the workflow has no `agents`"),
        ("steps: []\n", "the workflow has no `agents`"),
        (
            "steps:\n  - { agent: all, on: trigger, prompt: x }\n",
            "reserved",
        ),
    ];
    for (yaml, says) in cases {
        let e = inline(yaml).map(|_| ()).unwrap_err();
        assert!(e.to_string().contains(says), "{yaml:?}: {e}");
    }
}

/// The seed's review loop as rounds: a reviewer's `verdict` sends the work back to
/// the coder or on to the merge.
pub(super) const REVIEW_LOOP: &str = "steps:
  - id: review-1
    agent: reviewer
    on: trigger
    prompt: review it
    result: {type: object, properties: {verdict: {type: string, enum: [approved, changes_requested]}}, required: [verdict]}
  - id: fix-1
    agent: coder
    on: {step: review-1, result: {verdict: changes_requested}}
    prompt: fix it
  - id: merge-1
    agent: coder
    on: {step: review-1, result: {verdict: approved}}
    prompt: merge it
";

#[test]
fn a_step_may_test_a_field_of_the_result_of_a_step_above() {
    let wf = inline(&format!("{AGENTS}{REVIEW_LOOP}")).unwrap();
    let schema = wf.steps[0].result.as_ref().unwrap();
    assert_eq!(schema.root().required, ["verdict"]);
    assert_eq!(
        wf.steps[1].on,
        [On::Result {
            step: "review-1".into(),
            fields: vec![("verdict".into(), "changes_requested".into())],
        }]
    );
    assert!(wf.steps[1].on[0].result_matches(&serde_json::json!({"verdict": "changes_requested"})));
    assert!(
        !wf.steps[2].on[0].result_matches(&serde_json::json!({"verdict": "changes_requested"}))
    );
    // Mistakes, refused where they are: a field the schema lacks, a value it
    // refuses, a step without a schema, a schema outside the subset.
    let cases: &[(&str, &str, &str, &str)] = &[
        (
            "{verdict: changes_requested}",
            "{verdikt: approved}",
            "12:9",
            "has no field \"verdikt\"",
        ),
        (
            "{verdict: changes_requested}",
            "{verdict: maybe}",
            "12:9",
            "is never \"maybe\"",
        ),
        (
            "result: {type: object, properties",
            "# result: {type: object, properties",
            "12:9",
            "asks for no result",
        ),
        (
            "required: [verdict]}",
            "required: [verdict], additionalProperties: false}",
            "9:13",
            "`additionalProperties` is not supported",
        ),
    ];
    for (from, to, at, word) in cases {
        let yaml = format!("{AGENTS}{}", REVIEW_LOOP.replacen(from, to, 1));
        let e = inline(&yaml).unwrap_err();
        assert_eq!(format!("{}:{}", e.line, e.column), *at, "{to}: {e}");
        assert!(e.to_string().contains(word), "{to}: {e}");
    }
}
