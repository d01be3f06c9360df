//! Changing an agent after it was made (agent_update), what backends the machine
//! has (backend_list), and the warning agent_new gives when an agent cannot run
//! yet: through the real MCP interface.

use crate::common;
use common::clis::cli_bin;
use common::*;
use serde_json::json;

#[tokio::test]
async fn agent_update_changes_what_it_is_given_and_keeps_the_rest() {
    let dir = tempfile::tempdir().unwrap();
    let s = InProcess::start(dir.path()).await;
    let lead = s.lead(Proto::Legacy).await;
    call(
        &lead,
        "agent_new",
        json!({"name": "coder", "backend": "sdk", "system": "You code.", "model": "m1"}),
    )
    .await
    .ok();
    let info = call(&lead, "agent_info", json!({"target": "coder"}))
        .await
        .ok();
    assert_eq!(info["agent"]["permissions"]["profile"], "edit", "{info}");

    let r = call(
        &lead,
        "agent_update",
        json!({"target": "coder",
               "permissions": {"profile": "full", "deny": ["shell:rm*"]},
               "mcp_servers": {"tracker": {"command": "tracker-mcp", "env": {"TRACKER_KEY": "tk-hidden-1"}}},
               "max_steps": 7}),
    )
    .await
    .ok();
    assert_eq!(r["agent"]["permissions"]["profile"], "full", "{r}");
    assert_eq!(
        r["agent"]["permissions"]["deny"],
        json!(["shell:rm*"]),
        "{r}"
    );
    let info = call(&lead, "agent_info", json!({"target": "coder"}))
        .await
        .ok();
    let a = &info["agent"];
    assert_eq!(a["max_steps"], 7, "{info}");
    assert_eq!(a["model"], "m1", "what was not given stays: {info}");
    assert_eq!(
        a["mcp_servers"]["tracker"]["env"],
        json!(["TRACKER_KEY"]),
        "{info}"
    );
    assert!(
        !info.to_string().contains("tk-hidden-1"),
        "a secret was shown: {info}"
    );

    // Bad input is refused with the field, and changes nothing.
    let e = call(
        &lead,
        "agent_update",
        json!({"target": "coder", "permissions": "admin"}),
    )
    .await
    .err();
    assert!(
        e.contains("admin") && e.contains("read, edit or full"),
        "{e}"
    );
    let e = call(&lead, "agent_update", json!({"target": "coder"}))
        .await
        .err();
    assert!(
        e.contains("permissions"),
        "an empty change says what can change: {e}"
    );
    let e = call(
        &lead,
        "agent_update",
        json!({"target": "coder", "colour": "blue"}),
    )
    .await
    .err();
    assert!(e.contains("colour"), "{e}");
    let e = call(
        &lead,
        "agent_update",
        json!({"target": "nobody", "model": "x"}),
    )
    .await
    .err();
    assert!(e.contains("nobody"), "{e}");
    let info = call(&lead, "agent_info", json!({"target": "coder"}))
        .await
        .ok();
    assert_eq!(info["agent"]["permissions"]["profile"], "full", "{info}");
    s.stop().await;
}

#[tokio::test]
async fn backend_list_reports_every_backend_and_its_profiles() {
    let dir = tempfile::tempdir().unwrap();
    let s = InProcess::start(dir.path()).await;
    let lead = s.lead(Proto::Legacy).await;
    let r = call(&lead, "backend_list", json!({})).await.ok();
    let list = r["backends"].as_array().unwrap();
    for b in [
        "claude", "codex", "cursor", "gemini", "opencode", "sdk", "mock",
    ] {
        let e = list
            .iter()
            .find(|e| e["backend"] == b)
            .unwrap_or_else(|| panic!("{b} missing: {r}"));
        for p in ["read", "edit", "full"] {
            let text = e["profiles"][p].as_str().unwrap_or_default();
            assert!(!text.is_empty(), "{b} {p}: {e}");
        }
        if e["ready"] == false {
            assert!(
                e["fix"].as_str().is_some_and(|f| !f.is_empty()),
                "{b} is not ready and says no fix: {e}"
            );
        }
    }
    assert_eq!(
        list.iter().find(|e| e["backend"] == "mock").unwrap()["ready"],
        true
    );
    let one = call(&lead, "backend_list", json!({"backends": ["mock"]}))
        .await
        .ok();
    assert_eq!(one["backends"].as_array().unwrap().len(), 1, "{one}");
    let e = call(&lead, "backend_list", json!({"backends": ["gpt"]}))
        .await
        .err();
    assert!(e.contains("gpt") && e.contains("claude"), "{e}");
    s.stop().await;
}

/// An agent whose CLI is missing still registers, and agent_new says what to do;
/// with the CLI on its PATH and a key in its env it is ready and says nothing.
#[tokio::test]
async fn agent_new_warns_when_the_backend_cannot_run_yet() {
    let dir = tempfile::tempdir().unwrap();
    let s = InProcess::start(dir.path()).await;
    let lead = s.lead(Proto::Legacy).await;
    let r = call(
        &lead,
        "agent_new",
        json!({"name": "k1", "backend": "claude", "env": {"PATH": "/nonexistent", "HOME": "/nonexistent"}}),
    )
    .await
    .ok();
    assert_eq!(r["agent"]["name"], "k1", "{r}");
    let w = r["warning"].as_str().unwrap_or_default();
    assert!(
        w.contains("not ready") && w.contains("claude"),
        "no readiness warning: {r}"
    );
    if let Some(bin) = cli_bin() {
        let r = call(
            &lead,
            "agent_new",
            json!({"name": "k2", "backend": "claude", "permissions": "edit",
                   "env": {"PATH": format!("{}:/usr/bin:/bin", bin.display()),
                           "ANTHROPIC_API_KEY": "sk-ant-test"}}),
        )
        .await
        .ok();
        assert!(r.get("warning").is_none(), "a ready agent was warned: {r}");
    }
    s.stop().await;
}

/// Changes made at once each stay: agent_update reads the configuration, changes
/// what it was given and writes it back, one change at a time per agent.
#[tokio::test]
async fn updates_at_once_lose_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let s = InProcess::start(dir.path()).await;
    let lead = s.lead(Proto::Legacy).await;
    call(
        &lead,
        "agent_new",
        json!({"name": "coder", "backend": "sdk"}),
    )
    .await
    .ok();
    for round in 0..5 {
        let steps = 10 + round;
        let (a, b) = tokio::join!(
            call(
                &lead,
                "agent_update",
                json!({"target": "coder", "max_steps": steps})
            ),
            call(
                &lead,
                "agent_update",
                json!({"target": "coder", "budget": {"max_tokens": 1000 + round}})
            ),
        );
        let (_, _) = (a.ok(), b.ok());
        let i = info(&lead, "coder").await;
        assert_eq!(
            i["agent"]["max_steps"], steps,
            "round {round}: {}",
            i["agent"]
        );
        assert_eq!(
            i["agent"]["budget"]["max_tokens"],
            1000 + round,
            "round {round}: {}",
            i["agent"]
        );
    }
    s.stop().await;
}

/// Every size an agent's definition carries is bounded where it is set, and an
/// agent accepted can start: its run's settings travel on the worker's stdin, so
/// mock rules past the 128 KiB one environment variable holds run (every run of
/// such an agent used to fail with "Argument list too long").
#[tokio::test]
async fn an_agent_accepted_can_start_whatever_its_definition_carries() {
    let dir = tempfile::tempdir().unwrap();
    let s = HttpServer::start(dir.path()).await;
    let lead = s.lead(Proto::Modern).await;
    let big = "x".repeat(200_000);
    let refused = [
        (
            json!({"name": "e", "backend": "mock", "env": {"BIG": big}}),
            "env.BIG: 200000 bytes",
        ),
        (
            json!({"name": "e", "backend": "mock", "env": {"A": "a".repeat(30_000), "B": "b".repeat(30_000), "C": "c".repeat(10_000)}}),
            "env: 70009 bytes in all; at most 65536",
        ),
        (
            json!({"name": "e", "backend": "mock", "mock": (0..3).map(|i| json!({"write": {"path": format!("f{i}"), "content": "y".repeat(750_000)}})).collect::<Vec<_>>()}),
            "mock: the rules take",
        ),
    ];
    for (args, want) in refused {
        let e = call(&lead, "agent_new", args).await.err();
        assert!(e.contains(want), "{e}");
    }
    // One rule of 200 KB, and fifty of 3 KB: both run.
    let work = tempfile::tempdir().unwrap();
    call(
        &lead,
        "agent_new",
        json!({"name": "one", "backend": "mock", "cwd": work.path(),
               "mock": [{"write": {"path": "big.txt", "content": big}, "reply": "wrote it"}]}),
    )
    .await
    .ok();
    let mut rules: Vec<_> = (0..49)
        .map(|i| json!({"when": format!("^never{i}$"), "reply": "z".repeat(3_000)}))
        .collect();
    rules.push(json!({"reply": "the last of fifty"}));
    new_mock(&lead, "fifty", json!(rules)).await;
    let r = ask(&lead, "one", "go", 30).await;
    assert_eq!(r["status"], "succeeded", "{r}");
    assert_eq!(r["reply"]["final_text"], "wrote it");
    let written = std::fs::read_to_string(work.path().join("big.txt")).unwrap();
    assert_eq!(written.len(), 200_000);
    let r = ask(&lead, "fifty", "go", 30).await;
    assert_eq!(r["status"], "succeeded", "{r}");
    assert_eq!(r["reply"]["final_text"], "the last of fifty");
    s.stop().await;
}
