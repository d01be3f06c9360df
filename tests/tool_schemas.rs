//! tool-schemas/ holds one JSON file per tool, generated from the running server.
//! This test fails when a file is stale, missing or extra.
//! Regenerate with: UPDATE_TOOL_SCHEMAS=1 cargo test --test suite tool_schemas::

use crate::common;
use common::*;
use std::collections::BTreeMap;
use std::path::PathBuf;

#[tokio::test]
async fn tool_schema_files_match_the_server() {
    let dir = tempfile::tempdir().unwrap();
    let lead = stdio_client(dir.path(), Proto::Legacy).await;
    let schema_dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tool-schemas");
    let update = std::env::var_os("UPDATE_TOOL_SCHEMAS").is_some();
    if update {
        std::fs::create_dir_all(&schema_dir).unwrap();
    }
    let mut expected = BTreeMap::new();
    for t in lead.list_all_tools().await.unwrap() {
        let v = serde_json::json!({
            "name": t.name,
            "title": t.title,
            "description": t.description,
            "inputSchema": t.input_schema,
            "outputSchema": t.output_schema,
            "annotations": t.annotations,
        });
        expected.insert(
            format!("{}.json", t.name),
            serde_json::to_string_pretty(&v).unwrap() + "\n",
        );
    }
    expected.insert(AGENT_VIEW.into(), agent_view().await);
    if update {
        for entry in std::fs::read_dir(&schema_dir).unwrap() {
            let p = entry.unwrap().path();
            if p.extension().is_some_and(|e| e == "json") {
                std::fs::remove_file(p).unwrap();
            }
        }
        for (file, body) in &expected {
            std::fs::write(schema_dir.join(file), body).unwrap();
        }
        return;
    }
    let mut problems = Vec::new();
    for (file, body) in &expected {
        match std::fs::read_to_string(schema_dir.join(file)) {
            Ok(on_disk) if &on_disk == body => {}
            Ok(_) => problems.push(format!("{file} is stale")),
            Err(_) => problems.push(format!("{file} is missing")),
        }
    }
    for entry in std::fs::read_dir(&schema_dir).unwrap() {
        let name = entry.unwrap().file_name().to_string_lossy().into_owned();
        if name.ends_with(".json") && !expected.contains_key(&name) {
            problems.push(format!("{name} is not a tool any more"));
        }
    }
    assert!(
        problems.is_empty(),
        "tool-schemas/ does not match the server: {problems:?}\nregenerate with UPDATE_TOOL_SCHEMAS=1 cargo test --test suite tool_schemas::"
    );
}

/// The tools an agent is shown (without the lead's `workflow` argument), as
/// `{name, description, inputSchema}`: what scripts/context-cost and
/// [`the_tool_lists_fit_their_token_budgets`] count for an agent. (A run's own
/// session also has `permission_request`, which no model is shown.)
const AGENT_VIEW: &str = "agent-view.json";

async fn agent_view() -> String {
    let dir = tempfile::tempdir().unwrap();
    let s = InProcess::start(dir.path()).await;
    let lead = s.lead(Proto::Modern).await;
    call(
        &lead,
        "agent_new",
        serde_json::json!({"name": "a", "backend": "external"}),
    )
    .await
    .ok();
    let agent = join(&s, &lead, "a", Proto::Modern).await;
    let tools: Vec<serde_json::Value> = agent
        .list_all_tools()
        .await
        .unwrap()
        .into_iter()
        .map(|t| shown(&serde_json::to_value(&t).unwrap()))
        .collect();
    s.stop().await;
    serde_json::to_string_pretty(&tools).unwrap() + "\n"
}

/// A tool as a model is shown it.
fn shown(t: &serde_json::Value) -> serde_json::Value {
    serde_json::json!({"name": t["name"], "description": t["description"], "inputSchema": t["inputSchema"]})
}

/// What a list of tools costs a model, as scripts/context-cost counts it: each as
/// `{name, description, inputSchema}` in compact JSON, characters / 4.
fn cost(tools: &[serde_json::Value]) -> usize {
    tools
        .iter()
        .map(|t| serde_json::to_string(&shown(t)).unwrap().chars().count())
        .sum::<usize>()
        / 4
}

fn read(path: &std::path::Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// The lead's tool list costs at most 6,500 tokens, an agent's at most 3,000
/// (how-to lives in the lead's skill, shapes in errors that name the field).
#[test]
fn the_tool_lists_fit_their_token_budgets() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tool-schemas");
    let lead: Vec<serde_json::Value> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| !p.ends_with(AGENT_VIEW))
        .map(|p| read(&p))
        .collect();
    let agent = read(&dir.join(AGENT_VIEW));
    let (lead, agent) = (cost(&lead), cost(agent.as_array().unwrap()));
    assert!(
        lead <= 6_500,
        "the lead's tools cost ~{lead} tokens; the budget is 6,500"
    );
    assert!(
        agent <= 3_000,
        "an agent's tools cost ~{agent} tokens; the budget is 3,000"
    );
}

/// Whether a parameter's schema is more than a plain scalar: an object, a list, a
/// choice of values or of shapes (what a model gets wrong without being told).
fn structured(s: &serde_json::Value) -> bool {
    let kind = s["type"].as_str().unwrap_or("");
    matches!(kind, "object" | "array")
        || s["type"].is_array()
        || ["enum", "anyOf", "oneOf", "allOf", "$ref"]
            .iter()
            .any(|k| s.get(k).is_some())
}

/// Some clients (Codex among them) send the model a tool's description and not its
/// parameters' descriptions: each tool's own description names, in backticks, every
/// parameter it requires and every one whose shape is more than a plain value, so a
/// model can call it right from the description alone.
#[test]
fn every_tool_description_stands_alone() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tool-schemas");
    let mut unnamed = Vec::new();
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.ends_with(AGENT_VIEW) {
            continue;
        }
        let text = std::fs::read_to_string(path).unwrap();
        let tool: serde_json::Value = serde_json::from_str(&text).unwrap();
        let (schema, description) = (&tool["inputSchema"], tool["description"].as_str().unwrap());
        let required: Vec<&str> = schema["required"]
            .as_array()
            .map(|r| r.iter().filter_map(|v| v.as_str()).collect())
            .unwrap_or_default();
        for (name, s) in schema["properties"].as_object().into_iter().flatten() {
            if (required.contains(&name.as_str()) || structured(s))
                && !description.contains(&format!("`{name}`"))
            {
                unnamed.push(format!("{}.{name}", tool["name"].as_str().unwrap()));
            }
        }
    }
    assert!(
        unnamed.is_empty(),
        "named in no tool description: {unnamed:?}"
    );
}
