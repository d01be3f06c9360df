//! The demo: a kernel on SQLite in a temp dir, one example workflow run by mock
//! agents, the channel streamed to the terminal as it happens, then the summary and
//! the final document. No API key, no network beyond loopback.
//!
//! ```text
//! cargo run --release --example demo                 # the review loop
//! cargo run --release --example demo -- debate-vote  # or any file in examples/workflows/
//! ```
//!
//! Everything is an MCP tool call over loopback HTTP, as your assistant would make
//! them: workflow_run starts it, channel_read follows it, workflow_status waits
//! for it. The kernel starts each agent's run as a worker subprocess; here that
//! worker is this same program (the kernel runs `<this program> __worker`).

mod common;

use common::{Client, call, connect, start_kernel};
use serde_json::{Value, json};
use std::path::PathBuf;
use std::time::Duration;

#[tokio::main]
async fn main() {
    common::serve_worker_mode().await;
    let name = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "review-loop".into());
    let file = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("examples/workflows")
        .join(format!("{}.yaml", name.trim_end_matches(".yaml")));
    if !file.exists() {
        eprintln!(
            "no example {}; pick one of review-loop, debate-vote, scheduled-digest",
            file.display()
        );
        std::process::exit(2);
    }
    let dir = tempfile::tempdir().expect("temp dir");
    let (_kernel, url) = start_kernel(dir.path(), "demo-admin-token").await;
    let lead = connect(&url, "demo-admin-token", true).await;
    println!(
        "agent-worker demo: kernel on {} (SQLite), MCP at {url}",
        dir.path().display()
    );
    println!("running {}\n", file.display());

    let started = call(
        &lead,
        "workflow_run",
        json!({"file": file.display().to_string(), "tag": "demo"}),
    )
    .await;
    let workflow = started["workflow"].as_str().unwrap().to_owned();
    let agents: Vec<String> = started["agents"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| {
            format!(
                "{} ({})",
                a["name"].as_str().unwrap(),
                a["backend"].as_str().unwrap()
            )
        })
        .collect();
    println!("== {workflow}: {}", agents.join(", "));
    println!("== channel, as it happens");

    let status = follow(&lead, &workflow).await;

    summarise(&workflow, &status);
    let _ = call(&lead, "workflow_stop", json!({"workflow": workflow})).await;
    // A workflow with schedules is `scheduled` when idle: runs will come (stopped above).
    if !matches!(status["status"].as_str(), Some("completed" | "scheduled")) {
        std::process::exit(1);
    }
}

fn show(m: &Value) {
    let to = m["to"]
        .as_str()
        .map(|t| format!(" (DM to {t})"))
        .unwrap_or_default();
    println!(
        "  [{}] {:>10}{}: {}",
        &m["created_at"].as_str().unwrap()[11..23],
        m["from"].as_str().unwrap(),
        to,
        m["content"]
            .as_str()
            .unwrap()
            .trim_end()
            .replace('\n', "\n                            ")
    );
}

/// Prints the channel as it happens until the workflow is no longer running: its
/// last status.
async fn follow(lead: &Client, workflow: &str) -> Value {
    // Follow the channel until the workflow is no longer running.
    let mut since: Option<String> = None;
    loop {
        let mut args = json!({"workflow": workflow, "limit": 200});
        if let Some(s) = &since {
            args["since"] = json!(s);
        }
        let read = call(lead, "channel_read", args).await;
        for m in read["messages"].as_array().unwrap() {
            show(m);
            since = Some(m["id"].as_str().unwrap().to_owned());
        }
        let s = call(lead, "workflow_status", json!({"workflow": workflow})).await;
        if s["status"] != "running" {
            // One last read: what was posted between the two calls.
            let mut args = json!({"workflow": workflow, "limit": 200});
            if let Some(s) = &since {
                args["since"] = json!(s);
            }
            for m in call(lead, "channel_read", args).await["messages"]
                .as_array()
                .unwrap()
            {
                show(m);
            }
            break s;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The workflow's summary: its status, each agent, the final document.
fn summarise(workflow: &str, status: &Value) {
    println!(
        "\n== summary: {} {}",
        workflow,
        status["status"].as_str().unwrap()
    );
    if let Some(r) = status["reason"].as_str() {
        println!("   reason: {r}");
    }
    println!(
        "   {} messages, {} runs, {} tokens in / {} out",
        status["messages"],
        status["runs"],
        status["usage"]["input_tokens"],
        status["usage"]["output_tokens"]
    );
    for a in status["agents"].as_array().unwrap() {
        println!(
            "   {:<12} {:<8} {} run(s), {} failed, state {}{}",
            a["name"].as_str().unwrap(),
            a["backend"].as_str().unwrap(),
            a["runs"],
            a["failed_runs"],
            a["state"].as_str().unwrap(),
            a["next_wake"]
                .as_str()
                .map(|n| format!(", next scheduled run {n}"))
                .unwrap_or_default()
        );
    }
    match status["document"].as_object() {
        Some(d) => {
            println!("\n== final document {}", d["file"].as_str().unwrap());
            println!("{}", d["content"].as_str().unwrap().trim_end());
        }
        None => println!("\n(no document was written)"),
    }
}
