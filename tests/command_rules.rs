//! Command and path rules that mean what they say, through real runs: an sdk agent
//! driven by a fake model asks its profile and the kernel's contracts before each
//! local tool. The README's first contract (and the same rule as a profile's deny)
//! refuses every way of deleting a file; an allowed `find *` does not run what
//! `-exec` names; an edit deny holds through a symlink in the agent's folder.

use crate::common;
use common::fake_llm::{FakeLlm, Script};
use common::*;
use serde_json::{Value, json};

/// Every model call's body, as text (the tool results the model read).
fn conversation(llm: &FakeLlm) -> String {
    llm.model_calls()
        .iter()
        .map(|c| c["body"].to_string())
        .collect()
}

/// One agent_ask (the model's script runs); the run's denials.
async fn run(lead: &Client, name: &str) -> Vec<Value> {
    let r = ask(lead, name, "go", 45).await;
    assert_eq!(r["status"], "succeeded", "{r}");
    // The run that answered: a wake of the same message may have run the agent
    // once more since, with nothing left to do.
    let i = info(lead, name).await;
    let answered = i["runs"]
        .as_array()
        .and_then(|runs| runs.iter().find(|x| x["id"] == r["run_id"]))
        .unwrap_or_else(|| panic!("the answering run is not among the recent ones: {i}"));
    answered["denials"].as_array().cloned().unwrap_or_default()
}

/// The nine ways of deleting a file a `rm *` rule must refuse, each on its own file.
fn deletions() -> Vec<(String, String)> {
    let forms = [
        "rm {}",
        "/bin/rm {}",
        "command rm {}",
        "\\rm {}",
        "'rm' {}",
        "env rm {}",
        "sh -c 'rm {}'",
        "find . -name {} -delete",
        "unlink {}",
    ];
    forms
        .iter()
        .enumerate()
        .map(|(i, f)| (format!("f{i}.txt"), f.replace("{}", &format!("f{i}.txt"))))
        .collect()
}

#[tokio::test]
async fn the_readmes_rm_rule_refuses_every_way_of_deleting_a_file() {
    let dir = tempfile::tempdir().unwrap();
    let s = InProcess::start(dir.path()).await;
    let lead = s.lead(Proto::Legacy).await;
    call(
        &lead,
        "contract_set",
        json!({"name": "no-rm",
               "when": {"event": "tool_request", "tool": "shell", "match": "rm *", "agent": "by-contract"},
               "then": {"action": "deny", "reason": "nobody deletes files; move them to trash/ instead"}}),
    )
    .await
    .ok();
    let ways = [
        ("by-contract", json!("full"), "nobody deletes files"),
        (
            "by-profile",
            json!({"profile": "full", "deny": ["shell:rm *"]}),
            "deny shell:rm *",
        ),
    ];
    for (name, permissions, why) in ways {
        let work = tempfile::tempdir().unwrap();
        let cases = deletions();
        for (file, _) in &cases {
            std::fs::write(work.path().join(file), "keep me").unwrap();
        }
        let mut steps: Vec<(&str, Value)> = cases
            .iter()
            .map(|(_, c)| ("run_command", json!({"command": c})))
            .collect();
        // Commands that delete nothing still run.
        steps.push(("run_command", json!({"command": "ls > listed.txt"})));
        let llm = FakeLlm::start(Script::steps(&steps, "done")).await;
        new_sdk_in(&lead, name, work.path(), &llm.url, permissions).await;
        let denials = run(&lead, name).await;
        for (file, command) in &cases {
            assert!(
                work.path().join(file).exists(),
                "{name}: `{command}` deleted {file}"
            );
        }
        assert!(
            work.path().join("listed.txt").exists(),
            "{name}: ls did not run"
        );
        assert_eq!(denials.len(), cases.len(), "{name}: {denials:?}");
        assert!(
            denials
                .iter()
                .all(|d| d["reason"].as_str().unwrap().contains(why)),
            "{name}: {denials:?}"
        );
        assert!(
            conversation(&llm).contains(why),
            "{name}: the model was not told why"
        );
    }
    s.stop().await;
}

#[tokio::test]
async fn an_allowed_find_does_not_run_what_exec_names_or_delete() {
    let work = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(work.path().join("x"), "here").unwrap();
    let touched = outside.path().join("touched");
    let steps = [
        ("run_command", json!({"command": "find . -name x"})),
        (
            "run_command",
            json!({"command": format!("find . -exec touch {} {{}} +", touched.display())}),
        ),
        ("run_command", json!({"command": "find . -name x -delete"})),
    ];
    let llm = FakeLlm::start(Script::steps(&steps, "done")).await;
    let dir = tempfile::tempdir().unwrap();
    let s = InProcess::start(dir.path()).await;
    let lead = s.lead(Proto::Legacy).await;
    new_sdk_in(
        &lead,
        "reader",
        work.path(),
        &llm.url,
        json!({"profile": "read", "allow": ["shell:find *"]}),
    )
    .await;
    let denials = run(&lead, "reader").await;
    assert!(conversation(&llm).contains("./x"), "find . -name x ran");
    assert!(!touched.exists(), "find -exec ran touch");
    assert!(work.path().join("x").exists(), "find -delete deleted");
    assert_eq!(denials.len(), 2, "{denials:?}");
    s.stop().await;
}

#[tokio::test]
async fn an_edit_deny_holds_through_a_symlink_in_the_agents_folder() {
    let work = tempfile::tempdir().unwrap();
    std::fs::create_dir(work.path().join("secrets")).unwrap();
    std::os::unix::fs::symlink(work.path().join("secrets"), work.path().join("alias")).unwrap();
    let write = |p: &str| ("write_file", json!({"path": p, "content": "x"}));
    let steps = [
        write("alias/e.txt"),
        write("secrets/f.txt"),
        write("ok.txt"),
    ];
    let llm = FakeLlm::start(Script::steps(&steps, "done")).await;
    let dir = tempfile::tempdir().unwrap();
    let s = InProcess::start(dir.path()).await;
    let lead = s.lead(Proto::Legacy).await;
    new_sdk_in(&lead, "writer", work.path(), &llm.url, json!("edit")).await;
    call(
        &lead,
        "contract_set",
        json!({"name": "no-secrets", "when": {"event": "tool_request", "tool": "edit", "match": "secrets/*"},
               "then": {"action": "deny", "reason": "secrets are not ours to change"}}),
    )
    .await
    .ok();
    let denials = run(&lead, "writer").await;
    assert!(
        !work.path().join("secrets/e.txt").exists(),
        "written through the link"
    );
    assert!(!work.path().join("secrets/f.txt").exists());
    assert!(work.path().join("ok.txt").exists());
    assert_eq!(denials.len(), 2, "{denials:?}");
    s.stop().await;
}
