//! The tool lists the documentation gives, against the server's own: the lead's
//! tools and an agent's as an in-process kernel lists them. tool-schemas/ holds one
//! file per tool the lead lists and agent-view.json the tools an agent is shown
//! (`tool_schemas::` checks their contents); scripts/docs-tools writes the tools
//! reference and every count of tools in prose from them, and checks that the
//! tables of docs/src/tools.md name each tool. A new tool fails here until the
//! commands in the message have run.

use crate::common;
use common::*;
use std::collections::BTreeSet;
use std::path::Path;

const REGENERATE: &str = "UPDATE_TOOL_SCHEMAS=1 cargo test --test suite tool_schemas:: \
     && ./scripts/docs-tools";

/// The names the lead and an agent are listed, from a running kernel.
async fn listed() -> (BTreeSet<String>, BTreeSet<String>) {
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
    let names = (
        tool_names(&lead).await.into_iter().collect(),
        tool_names(&agent).await.into_iter().collect(),
    );
    s.stop().await;
    names
}

/// The names tool-schemas/ holds: a file per lead tool, and agent-view.json.
fn in_schemas() -> (BTreeSet<String>, BTreeSet<String>) {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tool-schemas");
    let lead = std::fs::read_dir(&dir)
        .unwrap()
        .filter_map(|e| {
            let name = e.unwrap().file_name().to_string_lossy().into_owned();
            let tool = name.strip_suffix(".json")?.to_owned();
            (!tool.starts_with("agent-view")).then_some(tool)
        })
        .collect();
    let view: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("agent-view.json")).unwrap())
            .unwrap();
    let agent = view
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_owned())
        .collect();
    (lead, agent)
}

#[tokio::test]
async fn the_documented_tool_lists_are_the_servers() {
    let (lead, agent) = listed().await;
    let (lead_files, agent_files) = in_schemas();
    assert_eq!(
        (&lead, &agent),
        (&lead_files, &agent_files),
        "tool-schemas/ names other tools than the server lists (lead, agent): run {REGENERATE}"
    );
    let out = std::process::Command::new(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/docs-tools"),
    )
    .arg("--check")
    .output()
    .expect("run scripts/docs-tools (python3)");
    assert!(
        out.status.success(),
        "the documentation's tool lists are not the server's:\n{}\nrun {REGENERATE} (rows of \
         docs/src/tools.md are written by hand)",
        String::from_utf8_lossy(&out.stderr)
    );
}
