//! The MCP Inspector CLI calls the tools that need no real model, over HTTP and
//! over stdio (the default launch: relayed to a background kernel), in both
//! protocol eras it can choose (`--protocol-era legacy`: 2025-11-25 with an
//! `initialize` that declares the tasks extension; `--protocol-era modern`:
//! 2026-07-28), and every answer carries its structured content. It used to get
//! a task for a plain agent_ask or workflow_run in a 2025-11-25 session ("declares
//! an output schema but returned no structured content"), and over stdio in
//! 2026-07-28 its tasks/get lost its Mcp-Name header in the relay.
//! With AGENT_WORKER_HEAVY=1 (scripts/test) a missing Inspector fails the test.

use crate::common;
use common::inspector::{http_args, inspector, inspector_cli};
use common::*;
use serde_json::{Value, json};
use std::path::Path;

/// One tool call through the Inspector: the result, checked to be a success
/// with structured content.
fn call_tool(target: &[String], era: &str, tool: &str, args: Value) -> Value {
    let args = args.to_string();
    let mut argv: Vec<&str> = vec!["--protocol-era", era, "--format", "json"];
    argv.extend(target.iter().map(String::as_str));
    argv.extend([
        "--method",
        "tools/call",
        "--tool-name",
        tool,
        "--tool-args-json",
        &args,
    ]);
    let (code, out, err) = inspector_cli(&argv).expect("the inspector is installed");
    let what = format!("{} {era} {tool}", target[0]);
    assert_eq!(code, 0, "{what}: exit {code}\n{out}\n{err}");
    let v: Value = serde_json::from_str(&out)
        .unwrap_or_else(|e| panic!("{what}: the answer is not JSON ({e}): {out}"));
    let result = &v["result"];
    assert_ne!(result["isError"], true, "{what}: {result}");
    assert!(
        result["structuredContent"].is_object(),
        "{what}: no structured content: {v}"
    );
    result["structuredContent"].clone()
}

/// Every tool of the list, in one era through one target.
fn every_tool(target: &[String], era: &str) {
    let call = |tool: &str, args: Value| call_tool(target, era, tool, args);
    let echo = format!("echo-{era}");
    let r = call("agent_new", json!({"name": echo, "backend": "mock"}));
    assert_eq!(r["agent"]["name"], echo.as_str(), "{r}");
    let r = call(
        "agent_ask",
        json!({"target": echo, "message": "hi", "wait_seconds": 30}),
    );
    assert_eq!(r["status"], "succeeded", "{r}");
    assert_eq!(r["reply"]["final_text"], format!("{echo} done"), "{r}");
    let example = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/workflows/review-loop.yaml");
    let r = call(
        "workflow_run",
        json!({"file": example.display().to_string(), "tag": era, "wait_seconds": 40}),
    );
    assert_eq!(r["status"], "completed", "{r}");
    let workflow = format!("@review-loop:{era}");
    let r = call("workflow_status", json!({ "workflow": workflow }));
    assert_eq!(r["status"], "completed", "{r}");
    let r = call("channel_send", json!({"message": format!("@{echo} hello")}));
    assert_eq!(r["recipients"], json!([echo]), "{r}");
    // urgent: a direct message from the lead that stops its addressee's turn.
    let r = call(
        "channel_send",
        json!({"to": echo, "message": "stop and read this", "urgent": true}),
    );
    assert_eq!(r["recipients"], json!([echo]), "{r}");
    let r = call("my_inbox", json!({}));
    assert!(r["messages"].is_array(), "{r}");
    let file = format!("inspector-{era}.md");
    call(
        "team_doc_write",
        json!({"file": file, "content": format!("written in the {era} era")}),
    );
    let r = call("team_doc_read", json!({ "file": file }));
    assert!(
        r.to_string().contains(&format!("written in the {era} era")),
        "{r}"
    );
    let r = call(
        "contract_set",
        json!({"name": format!("no-rm-{era}"),
               "when": {"event": "tool_request", "tool": "shell", "match": "rm *"},
               "then": {"action": "deny", "reason": "no rm"}}),
    );
    assert_eq!(r["contract"]["name"], format!("no-rm-{era}"), "{r}");
    let r = call(
        "my_feedback",
        json!({"kind": "suggestion", "about": "workflow_run", "text": format!("from the {era} era")}),
    );
    assert_eq!(r["feedback"]["member"], "user", "{r}");
    let r = call("approval_list", json!({}));
    assert!(r["approvals"].is_array(), "{r}");
    let org = format!("team-{era}");
    let r = call(
        "org_set",
        json!({"name": org, "members": [{"name": echo, "role": "echoes"}]}),
    );
    assert_eq!(
        r["organisation"]["channel"],
        format!("@org.{org}:main"),
        "{r}"
    );
    let r = call("workflow_list", json!({}));
    assert!(r.to_string().contains(&format!("@org.{org}:main")), "{r}");
    let r = call("agent_pause", json!({ "target": echo }));
    assert_eq!(r["agent"]["state"], "paused", "{r}");
    let r = call("agent_pause", json!({"target": echo, "resume": true}));
    assert_eq!(r["agent"]["state"], "idle", "{r}");
    let r = call("schedule_set", json!({"target": echo, "every": "1h"}));
    assert!(r["next_at"].is_string(), "{r}");
    let r = call("schedule_set", json!({"target": echo, "clear": true}));
    assert_eq!(r["cleared"], true, "{r}");
    // A coder in a worktree of its own: its branch read and merged (nothing yet).
    let repo = common::repo::repository();
    let coder = format!("coder-{era}");
    call(
        "agent_new",
        json!({"name": coder, "backend": "mock", "workspace": "worktree",
               "cwd": repo.path().display().to_string()}),
    );
    let r = call("branch_diff", json!({ "agent": coder }));
    assert_eq!(r["files"], json!([]), "{r}");
    let r = call("branch_merge", json!({ "agent": coder }));
    assert_eq!(r["status"], "up_to_date", "{r}");
    board_tools(&call, era);
    hooks(&call, era, &echo);
    results(target, era);
    delegation(target, era);
}

/// Results with a shape: agent_ask's `result_schema` (a mock agent submits), and
/// result_submit called by the Inspector as an agent joined to a step workflow.
fn results(target: &[String], era: &str) {
    let call = |tool: &str, args: Value| call_tool(target, era, tool, args);
    let schema = json!({"type": "object", "required": ["verdict"],
                        "properties": {"verdict": {"enum": ["approved", "changes_requested"]}}});
    let judge = format!("judge-{era}");
    call(
        "agent_new",
        json!({"name": judge, "backend": "mock", "mock": [{"result": {"verdict": "approved"}}]}),
    );
    let r = call(
        "agent_ask",
        json!({"target": judge, "message": "verdict?", "wait_seconds": 30, "result_schema": schema}),
    );
    assert_eq!(r["result"], json!({"verdict": "approved"}), "{r}");
    let yaml = format!(
        "name: outside\nagents: {{ext: {{backend: external}}}}\nsteps:\n  \
         - {{id: verdict, agent: ext, on: trigger, prompt: judge, result: {schema}}}\n"
    );
    call(
        "workflow_run",
        json!({"yaml": yaml, "tag": era, "wait_seconds": 0}),
    );
    let j = call(
        "agent_join",
        json!({"target": format!("ext@outside:{era}")}),
    );
    let (url, token) = (j["url"].as_str().unwrap(), j["token"].as_str().unwrap());
    let agent: Vec<String> = [
        "--transport",
        "http",
        "--server-url",
        url,
        "--header",
        &format!("Authorization: Bearer {token}"),
    ]
    .map(String::from)
    .to_vec();
    let inbox = call_tool(&agent, era, "my_inbox", json!({"wait_seconds": 20}));
    assert_eq!(inbox["messages"][0]["result_schema"], schema, "{inbox}");
    let r = call_tool(
        &agent,
        era,
        "result_submit",
        json!({"step": "verdict", "result": {"verdict": "changes_requested"}}),
    );
    assert_eq!(r["result"]["verdict"], "changes_requested", "{r}");
}

/// The tools of an agent allowed to delegate, called as that agent (its joined
/// token: a bearer header over HTTP, the stdio launch's `--token-env` otherwise).
fn delegation(target: &[String], era: &str) {
    let boss = format!("boss-{era}");
    call_tool(
        target,
        era,
        "agent_new",
        json!({"name": boss, "backend": "external", "delegate": {"agents": 1, "backends": ["mock"]}}),
    );
    let token = call_tool(target, era, "agent_join", json!({ "target": boss }))["token"]
        .as_str()
        .unwrap()
        .to_owned();
    let agent: Vec<String> = if target[0] == "--transport" {
        let mut t = target.to_vec();
        *t.last_mut().unwrap() = format!("Authorization: Bearer {token}");
        t
    } else {
        let var = "AGENT_WORKER_AGENT_TOKEN";
        let env = format!("{var}={token}");
        [
            "-e",
            &env,
            &target[0],
            &target[1],
            &target[2],
            "--token-env",
            var,
        ]
        .map(String::from)
        .to_vec()
    };
    let call = |tool: &str, args: Value| call_tool(&agent, era, tool, args);
    let aide = format!("aide-{era}");
    let r = call("team_agent_new", json!({"name": aide, "backend": "mock"}));
    assert_eq!(r["agent"]["parent"], boss.as_str(), "{r}");
    let r = call(
        "team_agent_ask",
        json!({"name": aide, "message": "hi", "wait_seconds": 30}),
    );
    assert_eq!(r["reply"]["final_text"], format!("{aide} done"), "{r}");
    let r = call("team_agent_delete", json!({ "name": aide }));
    assert_eq!(r["deleted"], aide.as_str(), "{r}");
}

/// The task board's tools: a plan added, its first task claimed, done, listed.
/// hook_set: a hook declared (its secret never shown), listed, and deleted.
fn hooks(call: &dyn Fn(&str, Value) -> Value, era: &str, agent: &str) {
    let hook = format!("hook-{era}");
    let secret = format!("a-secret-for-the-{era}-era");
    let r = call(
        "hook_set",
        json!({"name": hook, "secret": secret, "workflow": "@global:main", "to": agent,
               "params": {"pr": "$.pull_request.number"}}),
    );
    assert_eq!(r["hook"]["secret"], "set", "{r}");
    assert_eq!(r["path"], format!("/hooks/{hook}"), "{r}");
    let r = call("workflow_list", json!({}));
    assert!(r["hooks"].to_string().contains(&hook), "{r}");
    assert!(!r.to_string().contains(&secret), "{r}");
    let r = call("hook_set", json!({"name": hook, "delete": true}));
    assert_eq!(r["deleted"], true, "{r}");
}

fn board_tools(call: &dyn Fn(&str, Value) -> Value, era: &str) {
    let plan = json!({"plan": [{"name": "a", "title": format!("first {era}")},
                               {"name": "b", "title": format!("then {era}"), "deps": ["a"]}]});
    let r = call("task_add", plan);
    let (a, b) = (r["tasks"][0]["id"].clone(), r["tasks"][1]["id"].clone());
    assert_eq!(r["tasks"][1]["blocked_by"], json!([a]), "{r}");
    let r = call("task_claim", json!({ "id": a }));
    assert_eq!(r["task"]["state"], "claimed", "{r}");
    let r = call(
        "task_update",
        json!({"id": a, "state": "done", "result": {"era": era}}),
    );
    assert_eq!(r["task"]["state"], "done", "{r}");
    let r = call("task_list", json!({ "id": b }));
    assert_eq!(r["tasks"][0]["state"], "open", "{r}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    not(heavy),
    ignore = "heavy: the MCP Inspector (AGENT_WORKER_HEAVY=1, scripts/inspector-setup)"
)]
async fn the_inspector_calls_every_tool_in_both_eras_over_http_and_stdio() {
    if inspector().is_none() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let s = HttpServer::start(&dir.path().join("http")).await;
    let http = http_args(&s);
    let data = dir.path().join("stdio");
    let stdio: Vec<String> = [
        BIN,
        "--data-dir",
        data.to_str().unwrap(),
        // Long enough for an Inspector started as a joined agent to reach the
        // background kernel after the lead's stdio client exited (it starts in
        // seconds on a busy machine); the kernel stops with its data dir anyway.
        "--idle-exit",
        "30s",
    ]
    .map(String::from)
    .to_vec();
    let started = std::time::Instant::now();
    // One server per transport, both at once; each takes both eras in turn.
    let runs = [http, stdio].map(|target| {
        tokio::task::spawn_blocking(move || {
            for era in ["legacy", "modern"] {
                every_tool(&target, era);
            }
        })
    });
    for r in runs {
        r.await.unwrap();
    }
    eprintln!("the Inspector calls in {:.1?}", started.elapsed());
    s.stop().await;
}
