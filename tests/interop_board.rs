//! Claude Code as the lead (the real CLI from npm, against the fake model) with
//! this server as its MCP server over HTTP with the admin token: in one task_add
//! call it puts a plan of six tasks with dependencies on the board of
//! `@plan:main`, and three agents work it to the end through task_claim and
//! task_update, woken by the board's own announcements: two mocks (their `task`
//! rule) and an sdk agent (its fake model claims, then sets the task it got
//! done). Each task is done exactly once (its history), claimed only after every
//! task it waits for was done, by the agent that holds it, with a result.
//!
//! Needs scripts/interop-setup (Claude Code in `.interop/`); heavy, as the
//! other interop tests. The same plan, added by an rmcp client as the lead, is
//! worked the same way in the light suite.

use crate::common;
use common::clis::*;
use common::fake_llm::{FakeLlm, Script};
use common::*;
use serde_json::{Value, json};
use std::collections::HashMap;
use std::time::{Duration, Instant};

const WF: &str = "@plan:main";

/// The plan: (local name, title, deps by local name, assigned to).
const PLAN: [(&str, &str, &[&str], Option<&str>); 6] = [
    ("design", "Design the API", &[], None),
    ("api", "Build the API", &["design"], None),
    ("ui", "Build the UI", &["design"], Some("sam")),
    ("tests", "Write the tests", &["api"], None),
    ("docs", "Write the docs", &["api", "ui"], None),
    ("release", "Release it", &["tests", "docs"], None),
];

fn plan() -> Value {
    let tasks: Vec<Value> = PLAN
        .iter()
        .map(|(name, title, deps, assign)| {
            let mut t = json!({"name": name, "title": title, "deps": deps});
            if let Some(a) = assign {
                t["assign"] = json!(a);
            }
            t
        })
        .collect();
    json!({"workflow": WF, "plan": tasks})
}

/// The team: two mocks whose rule works the board, and sam on the sdk backend,
/// whose model claims a task and sets it done with its title as the summary.
async fn team(lead: &Client, sam_llm: &str) {
    for name in ["ann", "bob"] {
        let done = json!({"state": "done", "result": {"summary": format!("done by {name}")}});
        let rules = json!([{"task": done}]);
        call(
            lead,
            "agent_new",
            json!({"name": name, "backend": "mock", "workflow": WF, "mock": rules}),
        )
        .await
        .ok();
    }
    call(
        lead,
        "agent_new",
        json!({"name": "sam", "backend": "sdk", "model": "claude-sonnet-4-5", "workflow": WF,
               "env": {"ANTHROPIC_BASE_URL": sam_llm, "ANTHROPIC_API_KEY": "sk-test"}}),
    )
    .await
    .ok();
}

/// sam's model: in every run, claim a task, then set the one it got done with
/// its title as the summary (nothing got: the run ends).
fn sam_script() -> Script {
    Script::every_run(
        &[
            ("task_claim", json!({})),
            (
                "task_update",
                json!({"id": "{{/task/id}}", "state": "done",
                       "result": {"summary": "{{/task/title}}"}}),
            ),
        ],
        "worked the board",
    )
}

/// Runs Claude Code once in print mode as the lead: its MCP server is `s`.
async fn claude_lead(bin: &std::path::Path, s: &HttpServer, llm: &FakeLlm) -> Value {
    let home = tempfile::tempdir().unwrap();
    let config = home.path().join("mcp.json");
    let servers = json!({"mcpServers": {"aw": {"type": "http", "url": s.url, "alwaysLoad": true,
        "headers": {"Authorization": format!("Bearer {}", s.admin)}}}});
    std::fs::write(&config, servers.to_string()).unwrap();
    let mut cmd = tokio::process::Command::new(bin.join("claude"));
    cmd.env_clear()
        .envs(
            base_env(bin, home.path())
                .iter()
                .map(|(k, v)| (k.clone(), v.as_str().unwrap().to_owned())),
        )
        .envs(provider_env("claude", &llm.url, home.path()))
        .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
        .args(["-p", "Plan the release on the board, in one call."])
        .args([
            "--output-format",
            "json",
            "--strict-mcp-config",
            "--mcp-config",
        ])
        .arg(&config)
        .args([
            "--allowedTools",
            "mcp__aw__task_add",
            "--model",
            "claude-sonnet-4-5",
        ])
        .current_dir(home.path())
        .kill_on_drop(true);
    let out = tokio::time::timeout(Duration::from_secs(120), cmd.output())
        .await
        .expect("Claude Code did not finish in 120 s")
        .expect("run claude");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "claude: {}\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_str(stdout.trim()).unwrap_or_else(|_| panic!("not JSON: {stdout}"))
}

/// The board once every task is done (within 120 s).
async fn all_done(lead: &Client) -> Vec<Value> {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let l = call(lead, "task_list", json!({"workflow": WF})).await.ok();
        let tasks = l["tasks"].as_array().unwrap().clone();
        if tasks.len() == PLAN.len() && tasks.iter().all(|t| t["state"] == "done") {
            return tasks;
        }
        if Instant::now() > deadline {
            let st = call(lead, "workflow_status", json!({"workflow": WF}))
                .await
                .ok();
            panic!("the plan was not worked to the end in 120 s: {l}\n{st}");
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Each task's history: its one `done` (by its owner, with a result), and its
/// last claim after every task it waits for was done. Returns (title, owner).
async fn checked(lead: &Client, tasks: &[Value]) -> Vec<(String, String)> {
    let mut done_at: HashMap<i64, String> = HashMap::new();
    let mut claimed_at: HashMap<i64, String> = HashMap::new();
    let mut owners = Vec::new();
    for t in tasks {
        let id = t["id"].as_i64().unwrap();
        let one = call(lead, "task_list", json!({"workflow": WF, "id": id}))
            .await
            .ok();
        let history = one["tasks"][0]["history"].as_array().unwrap().clone();
        let at =
            |what: &str| -> Vec<&Value> { history.iter().filter(|h| h["what"] == what).collect() };
        let done = at("done");
        assert_eq!(done.len(), 1, "task {id} done once: {one}");
        assert_eq!(done[0]["who"], t["owner"], "done by its owner: {one}");
        assert!(t["result"]["summary"].is_string(), "with its result: {t}");
        let claim = *at("claimed")
            .last()
            .unwrap_or_else(|| panic!("never claimed: {one}"));
        done_at.insert(id, done[0]["at"].as_str().unwrap().to_owned());
        claimed_at.insert(id, claim["at"].as_str().unwrap().to_owned());
        owners.push((
            t["title"].as_str().unwrap().to_owned(),
            t["owner"].as_str().unwrap().to_owned(),
        ));
    }
    for t in tasks {
        let id = t["id"].as_i64().unwrap();
        for dep in t["deps"].as_array().into_iter().flatten() {
            let dep = dep.as_i64().unwrap();
            assert!(
                claimed_at[&id] >= done_at[&dep],
                "task {id} claimed at {} before task {dep} was done at {}",
                claimed_at[&id],
                done_at[&dep]
            );
        }
    }
    owners
}

#[tokio::test]
#[cfg_attr(
    not(heavy),
    ignore = "heavy: Claude Code from npm (AGENT_WORKER_HEAVY=1, scripts/interop-setup)"
)]
async fn claude_code_as_the_lead_plans_and_three_agents_work_the_board() {
    let Some(bin) = cli_bin() else { return };
    let lead_llm = FakeLlm::start(Script::tool_then_text("task_add", plan(), "plan added")).await;
    let sam_llm = FakeLlm::start(sam_script()).await;
    let dir = tempfile::tempdir().unwrap();
    let s = HttpServer::start(dir.path()).await;
    let lead = s.lead(Proto::Legacy).await;
    team(&lead, &sam_llm.url).await;

    let out = claude_lead(&bin, &s, &lead_llm).await;
    assert_eq!(out["result"], "plan added", "{out}");
    // One call: the model's last request holds the one task_add result.
    let last = lead_llm.model_calls().last().unwrap()["body"].to_string();
    assert_eq!(last.matches("\"tool_result\"").count(), 1, "{last}");
    let tasks = all_done(&lead).await;
    let by: Vec<&Value> = tasks.iter().map(|t| &t["created_by"]).collect();
    assert!(by.iter().all(|b| *b == by[0]), "one maker: {by:?}");
    let titles: Vec<&str> = tasks.iter().map(|t| t["title"].as_str().unwrap()).collect();
    let planned: Vec<&str> = PLAN.iter().map(|p| p.1).collect();
    assert_eq!(titles, planned);

    let owners = checked(&lead, &tasks).await;
    eprintln!("the plan, worked: {owners:?}");
    let ui = owners.iter().find(|(t, _)| t == "Build the UI").unwrap();
    assert_eq!(ui.1, "sam", "the sdk agent's task: {owners:?}");
    assert!(
        owners.iter().any(|(_, o)| o == "ann" || o == "bob"),
        "a mock worked some: {owners:?}"
    );
    let sams = tasks.iter().find(|t| t["owner"] == "sam").unwrap();
    assert_eq!(sams["result"]["summary"], sams["title"], "{sams}");
    s.stop().await;
}

/// The same team and plan without Claude Code: the lead is an rmcp client.
#[tokio::test]
async fn a_plan_the_lead_adds_is_worked_by_mock_and_sdk_agents() {
    let sam_llm = FakeLlm::start(sam_script()).await;
    let dir = tempfile::tempdir().unwrap();
    let s = InProcess::start(dir.path()).await;
    let lead = s.lead(Proto::Modern).await;
    team(&lead, &sam_llm.url).await;
    call(&lead, "task_add", plan()).await.ok();
    let tasks = all_done(&lead).await;
    let owners = checked(&lead, &tasks).await;
    assert!(
        owners
            .iter()
            .any(|(t, o)| t == "Build the UI" && o == "sam"),
        "{owners:?}"
    );
    assert!(
        owners.iter().any(|(_, o)| o == "ann" || o == "bob"),
        "{owners:?}"
    );
    s.stop().await;
}
