//! tool-schemas/ holds one JSON file per tool, generated from the running server.
//! This test fails when a file is stale, missing or extra.
//! Regenerate with: UPDATE_TOOL_SCHEMAS=1 cargo test --test tool_schemas

mod common;
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
        "tool-schemas/ does not match the server: {problems:?}\nregenerate with UPDATE_TOOL_SCHEMAS=1 cargo test --test tool_schemas"
    );
}
