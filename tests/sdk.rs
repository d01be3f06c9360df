//! The `sdk` backend against fake providers inside the test: a fake Anthropic
//! Messages API and a fake OpenAI-compatible Chat Completions API script a tool call
//! (channel_send), and the message must appear in the channel, sent by the agent
//! over MCP with its run token.

use crate::common;
use common::fake_llm::{FakeLlm, Script};
use common::*;
use serde_json::{Value, json};

async fn sdk_agent(lead: &Client, name: &str, model: &str, env: Value) {
    call(
        lead,
        "agent_new",
        json!({"name": name, "backend": "sdk", "model": model, "env": env,
               "system": "You are the release manager. Keep answers short."}),
    )
    .await
    .ok();
}

/// The last channel message, as the lead sees it.
async fn last_message(lead: &Client) -> Value {
    let ch = call(lead, "channel_read", json!({"limit": 5})).await.ok();
    ch["messages"].as_array().unwrap().last().unwrap().clone()
}

#[tokio::test]
async fn anthropic_tool_loop_posts_through_mcp() {
    let llm = FakeLlm::start(Script::tool_then_text(
        "channel_send",
        json!({"message": "@user release notes are ready"}),
        "posted the notes",
    ))
    .await;
    let dir = tempfile::tempdir().unwrap();
    let s = InProcess::start(dir.path()).await;
    let lead = s.lead(Proto::Legacy).await;
    sdk_agent(
        &lead,
        "rm",
        "claude-sonnet-4-5",
        json!({"ANTHROPIC_BASE_URL": llm.url, "ANTHROPIC_API_KEY": "sk-test-anthropic"}),
    )
    .await;
    let r = ask(&lead, "rm", "Are the release notes done?", 30).await;
    assert_eq!(r["status"], "succeeded", "{r}");
    assert_eq!(r["reply"]["final_text"], "posted the notes");
    assert_eq!(
        r["reply"]["messages"],
        json!(["@user release notes are ready"])
    );
    let m = last_message(&lead).await;
    assert_eq!(m["from"], "rm");
    assert_eq!(m["content"], "@user release notes are ready");

    let calls = llm.model_calls();
    assert_eq!(calls.len(), 2, "one tool call, then the answer");
    let first = &calls[0];
    assert_eq!(first["headers"]["x-api-key"], "sk-test-anthropic");
    let body = &first["body"];
    assert!(
        body["system"]
            .as_str()
            .unwrap()
            .contains("You are the release manager"),
        "the system prompt reaches the model"
    );
    let tools: Vec<&str> = body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert!(tools.contains(&"channel_send") && tools.contains(&"team_doc_read"));
    assert!(
        !tools.contains(&"agent_new"),
        "agents never see management tools"
    );
    let task = body["messages"][0]["content"].as_str().unwrap();
    assert!(task.contains("Are the release notes done?"), "{task}");
    // The second call carries the tool result back.
    let second = &calls[1]["body"]["messages"];
    assert_eq!(second[2]["content"][0]["type"], "tool_result");

    let i = call(&lead, "agent_info", json!({"target": "rm"}))
        .await
        .ok();
    let usage = &i["runs"][0]["usage"];
    assert!(usage["input_tokens"].as_u64().unwrap() > 0, "{i}");
    assert!(usage["output_tokens"].as_u64().unwrap() > 0);
    assert!(
        usage["cost_usd"].as_f64().unwrap() > 0.0,
        "a known model is priced"
    );
    assert_eq!(i["inbox"]["acked"], 1);

    // An OAuth-style token goes as a bearer, not as an API key.
    sdk_agent(
        &lead,
        "oauth",
        "claude-sonnet-4-5",
        json!({"ANTHROPIC_BASE_URL": llm.url, "ANTHROPIC_AUTH_TOKEN": "tok-oauth"}),
    )
    .await;
    let r = ask(&lead, "oauth", "hello?", 30).await;
    assert_eq!(r["status"], "succeeded", "{r}");
    let last = llm.model_calls().last().unwrap().clone();
    assert_eq!(last["headers"]["authorization"], "Bearer tok-oauth");
    assert!(last["headers"].get("x-api-key").is_none(), "{last}");
    s.stop().await;
}

#[tokio::test]
async fn openai_compatible_tool_loop_posts_through_mcp() {
    let llm = FakeLlm::start(Script::tool_then_text(
        "channel_send",
        json!({"message": "hello from a local model"}),
        "done",
    ))
    .await;
    let dir = tempfile::tempdir().unwrap();
    let s = InProcess::start(dir.path()).await;
    let lead = s.lead(Proto::Modern).await;
    // A local server (like Ollama or llama.cpp) needs no key.
    sdk_agent(
        &lead,
        "llama",
        "openai/qwen3-coder",
        json!({"OPENAI_BASE_URL": format!("{}/v1", llm.url)}),
    )
    .await;
    let r = ask(&lead, "llama", "say hello", 30).await;
    assert_eq!(r["status"], "succeeded", "{r}");
    assert_eq!(r["reply"]["final_text"], "done");
    let m = last_message(&lead).await;
    assert_eq!(
        (m["from"].as_str(), m["content"].as_str()),
        (Some("llama"), Some("hello from a local model"))
    );
    let calls = llm.model_calls();
    assert_eq!(calls.len(), 2);
    let body = &calls[0]["body"];
    assert_eq!(body["model"], "qwen3-coder");
    assert_eq!(body["messages"][0]["role"], "system");
    assert!(
        body["messages"][0]["content"]
            .as_str()
            .unwrap()
            .contains("release manager")
    );
    assert_eq!(body["tools"][0]["type"], "function");
    assert!(calls[0]["headers"].get("authorization").is_none());
    assert_eq!(
        calls[1]["body"]["messages"]
            .as_array()
            .unwrap()
            .last()
            .unwrap()["role"],
        "tool"
    );
    let i = call(&lead, "agent_info", json!({"target": "llama"}))
        .await
        .ok();
    assert!(
        i["runs"][0]["usage"].get("cost_usd").is_none(),
        "an unknown model has no price: {i}"
    );
    s.stop().await;
}

#[tokio::test]
async fn provider_errors_are_classified_and_leave_the_inbox_pending() {
    let dir = tempfile::tempdir().unwrap();
    let s = InProcess::start(dir.path()).await;
    let lead = s.lead(Proto::Legacy).await;
    let bad_key = FakeLlm::start(Script::error(401)).await;
    let no_quota = FakeLlm::start(Script::error(429)).await;
    sdk_agent(
        &lead,
        "a",
        "claude-haiku-4-5",
        json!({"ANTHROPIC_BASE_URL": bad_key.url, "ANTHROPIC_API_KEY": "bad"}),
    )
    .await;
    sdk_agent(
        &lead,
        "o",
        "openai/gpt-5",
        json!({"OPENAI_BASE_URL": format!("{}/v1", no_quota.url), "OPENAI_API_KEY": "k"}),
    )
    .await;
    // No key for a hosted API: refused before any request.
    sdk_agent(
        &lead,
        "n",
        "claude-sonnet-4-5",
        json!({"ANTHROPIC_BASE_URL": "https://api.anthropic.com"}),
    )
    .await;
    for (agent, class) in [("a", "auth"), ("o", "billing_quota"), ("n", "auth")] {
        let r = ask(&lead, agent, "hi", 30).await;
        assert_eq!(r["status"], "failed", "{r}");
        assert_eq!(r["error_class"], class, "{agent}: {r}");
        // Auth and billing errors pause the agent (it resumes by itself later) and
        // tell the lead in the channel. The pause follows the run's end, which is
        // what the ask answered: wait for it.
        let i = wait_info(&lead, agent, 10, |i| i["agent"]["state"] == "paused").await;
        assert_eq!(i["inbox"]["pending"], 1, "{agent}: {i}");
        assert!(i["agent"]["resume_at"].is_string(), "{agent}: {i}");
        assert!(
            i["agent"]["reason"].as_str().unwrap().starts_with(class),
            "{agent}: {i}"
        );
    }
    let read = call(&lead, "channel_read", json!({"limit": 50})).await.ok();
    let told: Vec<&str> = read["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["from"] == "system")
        .map(|m| m["content"].as_str().unwrap())
        .collect();
    assert_eq!(told.len(), 3, "{read}");
    assert!(
        told.iter()
            .all(|t| t.starts_with("@user ") && t.contains("is paused")),
        "{told:?}"
    );
    assert!(told[2].contains("ANTHROPIC_API_KEY"), "{told:?}");
    s.stop().await;
}

#[tokio::test]
async fn a_token_budget_pauses_the_agent_once_spent() {
    let llm = FakeLlm::start(Script::text("noted")).await;
    let dir = tempfile::tempdir().unwrap();
    let s = InProcess::start(dir.path()).await;
    let lead = s.lead(Proto::Legacy).await;
    call(
        &lead,
        "agent_new",
        json!({"name": "thrifty", "backend": "sdk", "model": "openai/qwen3-coder",
               "env": {"OPENAI_BASE_URL": format!("{}/v1", llm.url)},
               "budget": {"max_tokens": 100}}),
    )
    .await
    .ok();
    // The first run is allowed and reports its usage (more than 100 tokens).
    let r = ask(&lead, "thrifty", "hello", 30).await;
    assert_eq!(r["status"], "succeeded", "{r}");
    // The next wake finds the budget spent: paused before any run, and told why.
    call(
        &lead,
        "channel_send",
        json!({"message": "@thrifty one more"}),
    )
    .await
    .ok();
    let i = wait_info(&lead, "thrifty", 5, |i| i["agent"]["state"] == "paused").await;
    assert_eq!(i["agent"]["state"], "paused", "{i}");
    let reason = i["agent"]["reason"].as_str().unwrap();
    assert!(
        reason.starts_with("guard: thrifty used ")
            && reason.contains("its budget is 100 (max_tokens)"),
        "{reason}"
    );
    assert_eq!(
        i["runs"].as_array().unwrap().len(),
        1,
        "no run past the budget: {i}"
    );
    assert_eq!(i["inbox"]["pending"], 1, "the message waits: {i}");
    assert!(
        i["agent"].get("resume_at").is_none(),
        "a guard never resumes by itself"
    );
    s.stop().await;
}

/// A hostile pass: an sdk agent deleted and created again under its name got the
/// old agent's conversation (its private messages) in its first model request, and
/// a mock's `times` counters carried over. agent_delete now takes the agent's own
/// folder with it, and a run claims that folder for its agent's id.
#[tokio::test]
async fn an_agent_made_again_under_a_deleted_name_starts_clean() {
    let llm = FakeLlm::start(Script::text("noted")).await;
    let dir = tempfile::tempdir().unwrap();
    let s = InProcess::start(dir.path()).await;
    let lead = s.lead(Proto::Legacy).await;
    let env = json!({"ANTHROPIC_BASE_URL": llm.url, "ANTHROPIC_API_KEY": "sk-test"});
    sdk_agent(&lead, "keeper", "claude-sonnet-4-5", env.clone()).await;
    let r = ask(&lead, "keeper", "the vault code is 4711", 30).await;
    assert_eq!(r["status"], "succeeded", "{r}");
    let folder = s.data_dir.join("workspaces/global/main/keeper");
    assert!(
        folder.join("sdk-conversation.json").exists(),
        "the conversation is kept between runs"
    );
    call(&lead, "agent_delete", json!({"target": "keeper"}))
        .await
        .ok();
    assert!(
        !folder.exists(),
        "agent_delete leaves {} behind",
        folder.display()
    );

    sdk_agent(&lead, "keeper", "claude-sonnet-4-5", env).await;
    let r = ask(&lead, "keeper", "what do you know?", 30).await;
    assert_eq!(r["status"], "succeeded", "{r}");
    let last = llm.model_calls().last().unwrap()["body"].to_string();
    assert!(last.contains("what do you know?"), "{last}");
    assert!(
        !last.contains("4711"),
        "the new agent got the old one's conversation: {last}"
    );

    // A mock's `times` counter is the agent's, not its name's.
    let once = json!([{"reply": "first", "times": 1}, {"reply": "later"}]);
    new_mock(&lead, "counter", once.clone()).await;
    assert_eq!(
        ask(&lead, "counter", "go", 30).await["reply"]["final_text"],
        "first"
    );
    assert_eq!(
        ask(&lead, "counter", "go", 30).await["reply"]["final_text"],
        "later"
    );
    call(&lead, "agent_delete", json!({"target": "counter"}))
        .await
        .ok();
    new_mock(&lead, "counter", once).await;
    assert_eq!(
        ask(&lead, "counter", "go", 30).await["reply"]["final_text"],
        "first"
    );

    // A folder left by an earlier agent of the name (on a node that could not
    // remove it) is emptied by the new agent's first run.
    let stale = s.data_dir.join("workspaces/global/main/counter");
    std::fs::write(stale.with_file_name(".counter.agent-id"), "999999").unwrap();
    std::fs::write(stale.join(".mock-rule-1.count"), "1").unwrap();
    assert_eq!(
        ask(&lead, "counter", "go", 30).await["reply"]["final_text"],
        "first"
    );
    s.stop().await;
}

/// A hostile pass: a 5 MiB write_file got no result and no log line; the run sat
/// until the silence limit (600 s). A call past the limit is refused at once,
/// naming its size and the limit, and the model is told so.
#[tokio::test]
async fn an_oversized_local_tool_call_is_refused_at_once() {
    let big = "x".repeat(5 * 1024 * 1024);
    let llm = FakeLlm::start(Script::tool_then_text(
        "write_file",
        json!({"path": "big.txt", "content": big}),
        "tried",
    ))
    .await;
    let dir = tempfile::tempdir().unwrap();
    let s = InProcess::start(dir.path()).await;
    let lead = s.lead(Proto::Legacy).await;
    let env = json!({"ANTHROPIC_BASE_URL": llm.url, "ANTHROPIC_API_KEY": "sk-test"});
    call(
        &lead,
        "agent_new",
        json!({"name": "writer", "backend": "sdk", "model": "claude-sonnet-4-5", "env": env,
               "permissions": "edit"}),
    )
    .await
    .ok();
    let t = std::time::Instant::now();
    let r = ask(&lead, "writer", "write it", 45).await;
    let took = t.elapsed();
    assert_eq!(r["status"], "succeeded", "{r}");
    let calls = llm.model_calls();
    let result = calls.last().unwrap()["body"]["messages"][2]["content"][0].clone();
    assert_eq!(result["is_error"], true, "{result}");
    let text = result["content"].to_string();
    assert!(
        text.contains("5242") && text.contains("at most"),
        "the refusal names the size and the limit: {text}"
    );
    println!("refused in {took:?}: {text}");
    assert!(took < std::time::Duration::from_secs(10), "took {took:?}");
    assert!(
        !s.data_dir
            .join("workspaces/global/main/writer/big.txt")
            .exists()
    );
    s.stop().await;
}

/// An MCP server that completes `initialize` and then never answers (stdin is read
/// and ignored), written with Python's standard library only.
const SILENT_SERVER: &str = r#"
import json, sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("method") == "initialize":
        v = m["params"]["protocolVersion"]
        print(json.dumps({"jsonrpc": "2.0", "id": m["id"], "result": {
            "protocolVersion": v, "capabilities": {"tools": {}},
            "serverInfo": {"name": "silent", "version": "1"}}}), flush=True)
"#;

/// A hostile pass: an agent's MCP server that answers initialize but never
/// tools/list held the run until the silence limit (over 239 s seen). Every request
/// to a server is now bounded inside the run's limit and fails the run naming it.
#[tokio::test]
async fn a_silent_mcp_server_fails_the_run_naming_it() {
    let llm = FakeLlm::start(Script::text("never asked")).await;
    let dir = tempfile::tempdir().unwrap();
    let s = InProcess::start(dir.path()).await;
    let lead = s.lead(Proto::Legacy).await;
    // A workflow, for the agent's `timeout` (its silence limit: 5 s).
    let yaml = json!({
        "name": "silent",
        "agents": {"tooled": {
            "backend": "sdk", "model": "claude-sonnet-4-5", "timeout": "5s",
            "env": {"ANTHROPIC_BASE_URL": llm.url, "ANTHROPIC_API_KEY": "sk-test"},
            "mcp_servers": {"mute": {"command": "python3", "args": ["-c", SILENT_SERVER]}}}},
        "kickoff": "@tooled list your tools"});
    let t = std::time::Instant::now();
    call(&lead, "workflow_run", json!({"yaml": yaml.to_string()}))
        .await
        .ok();
    let i = wait_info(&lead, "tooled@silent", 30, |i| {
        i["runs"]
            .as_array()
            .is_some_and(|r| r.iter().any(|r| r["status"] == "failed"))
    })
    .await;
    let took = t.elapsed();
    let run = i["runs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["status"] == "failed")
        .unwrap();
    println!("failed after {took:?}: {run}");
    let e = run["error"].as_str().unwrap();
    assert!(
        e.contains("MCP server mute did not answer tools/list within 4s"),
        "{e}"
    );
    assert_eq!(run["error_class"], "timeout", "{run}");
    assert!(took < std::time::Duration::from_secs(15), "took {took:?}");
    assert!(
        llm.model_calls().is_empty(),
        "the model was asked before the tools were known"
    );
    s.stop().await;
}
