//! A guided tour of agent-worker over real MCP: a kernel on SQLite in a temp dir,
//! two mock agents, and the lead talking to them.
//!
//! ```text
//! cargo run --release --example demo
//! ```
//!
//! The demo is the lead (admin token) and also plays the two agents through their
//! own `agent_join` tokens, exactly as an external MCP client acting as an agent
//! would. Every step below is an MCP tool call over loopback HTTP.

mod common;

use common::{Client, call, connect, start_kernel};
use serde_json::{Value, json};

fn step(title: &str) {
    println!("\n== {title}");
}

fn show_channel(v: &Value) {
    for m in v["messages"].as_array().unwrap() {
        let to = m["to"]
            .as_str()
            .map(|t| format!(" (DM to {t})"))
            .unwrap_or_default();
        println!(
            "  [{}] {}{}: {}",
            &m["created_at"].as_str().unwrap()[11..19],
            m["from"].as_str().unwrap(),
            to,
            m["content"].as_str().unwrap()
        );
    }
}

async fn show_inbox(who: &str, c: &Client) -> Value {
    let inbox = call(c, "my_inbox", json!({})).await;
    println!(
        "  {who}'s inbox ({} waiting):",
        inbox["messages"].as_array().unwrap().len()
    );
    for m in inbox["messages"].as_array().unwrap() {
        println!(
            "    - from {} [{}{}]: {}",
            m["from"].as_str().unwrap(),
            m["priority"].as_str().unwrap(),
            if m["dm"].as_bool().unwrap() {
                ", DM"
            } else {
                ""
            },
            m["content"].as_str().unwrap()
        );
    }
    inbox
}

/// Calls a tool that is expected to refuse, and returns its error text.
async fn refused(c: &Client, tool: &str, args: Value) -> String {
    let Value::Object(args) = args else {
        unreachable!("arguments are an object")
    };
    let r = c
        .call_tool(rmcp::model::CallToolRequestParams::new(tool.to_owned()).with_arguments(args))
        .await
        .unwrap();
    assert_eq!(r.is_error, Some(true), "{tool} should have been refused");
    format!("refused: {}", r.content[0].as_text().unwrap().text)
}

#[tokio::main]
async fn main() {
    let dir = tempfile::tempdir().unwrap();
    let admin = agent_worker::kernel::tokens::new_secret("awadmin_");
    let (_kernel, url) = start_kernel(dir.path(), &admin).await;
    println!(
        "agent-worker demo: kernel on SQLite in {}, MCP at {url}",
        dir.path().display()
    );

    let lead = connect(&url, &admin, false).await;
    step("The lead registers two mock agents in the workflow instance @demo:main");
    for (name, role) in [
        ("reviewer", "You review code."),
        ("coder", "You fix what the reviewer finds."),
    ] {
        let a = call(
            &lead,
            "agent_new",
            json!({"name": name, "backend": "mock", "system": role, "workflow": "@demo:main"}),
        )
        .await;
        println!(
            "  agent_new -> {} ({})",
            a["agent"]["target"], a["agent"]["backend"]
        );
    }

    step("Each agent gets its own token (agent_join) and connects as itself");
    let mut agents = Vec::new();
    for name in ["reviewer", "coder"] {
        let j = call(
            &lead,
            "agent_join",
            json!({"target": format!("{name}@demo:main"), "ttl": "1h"}),
        )
        .await;
        println!(
            "  {name}: token valid until {}; Claude Code would run: {}",
            j["expires_at"],
            j["configs"]["claude_code"]
                .as_str()
                .unwrap()
                .replace(j["token"].as_str().unwrap(), "<token>")
        );
        agents.push(connect(&url, j["token"].as_str().unwrap(), true).await);
    }
    let (reviewer, coder) = (&agents[0], &agents[1]);
    let tools: Vec<String> = reviewer
        .list_all_tools()
        .await
        .unwrap()
        .into_iter()
        .map(|t| t.name.to_string())
        .collect();
    println!(
        "  an agent sees only the context tools: {}",
        tools.join(", ")
    );

    step(
        "The lead addresses the reviewer; the coder is only mentioned, so only the reviewer's inbox gets it",
    );
    let r = call(&lead, "channel_send", json!({"workflow": "@demo:main", "message": "@reviewer please review PR #7 (the coder @coder is standing by)"})).await;
    println!(
        "  channel_send -> id {}, recipients {}",
        r["id"], r["recipients"]
    );

    step("The reviewer works through its inbox");
    let inbox = show_inbox("reviewer", reviewer).await;
    call(
        reviewer,
        "my_status_set",
        json!({"state": "busy", "task": "reviewing PR #7"}),
    )
    .await;
    let r = call(reviewer, "channel_send", json!({"message": "@coder two findings: the retry loop never sleeps, and the error is swallowed in parse()"})).await;
    println!(
        "  reviewer -> coder: id {}, recipients {}",
        r["id"], r["recipients"]
    );
    let id = inbox["messages"][0]["id"].clone();
    println!(
        "  my_inbox_ack -> {}",
        call(reviewer, "my_inbox_ack", json!({"message_id": id})).await
    );

    step("The coder answers, with a private note to the reviewer");
    let inbox = show_inbox("coder", coder).await;
    call(
        coder,
        "channel_send",
        json!({"message": "I pushed a fix that keeps @user out of it", "to": "reviewer"}),
    )
    .await;
    let r = call(
        coder,
        "channel_send",
        json!({"message": "@reviewer @user both findings fixed in 3f2c1a"}),
    )
    .await;
    println!("  coder -> reviewer, user: recipients {}", r["recipients"]);
    let last = inbox["messages"].as_array().unwrap().last().unwrap()["id"].clone();
    call(
        coder,
        "my_inbox_ack",
        json!({"message_id": last, "through": true}),
    )
    .await;

    step("Limits are explicit: an agent's over-long message is refused with what to do instead");
    let long = "x".repeat(4001);
    println!(
        "  {}",
        refused(coder, "channel_send", json!({"message": long})).await
    );
    let r = call(
        coder,
        "resource_create",
        json!({"content": format!("# Full test log\n{long}"), "type": "markdown"}),
    )
    .await;
    let id = r["id"].as_str().unwrap();
    let r = call(
        coder,
        "channel_send",
        json!({"message": format!("@reviewer the full test log is resource {id}")}),
    )
    .await;
    println!(
        "  so the coder stores it (resource_create -> {id}) and sends the id to {}",
        r["recipients"]
    );
    let got = call(reviewer, "resource_read", json!({"id": id})).await;
    println!(
        "  the reviewer reads it back with resource_read: {} bytes of {}",
        got["size"], got["type"]
    );

    step("Shared documents: the lead makes the reviewer the document owner");
    let ctx = call(
        &lead,
        "workflow_context_set",
        json!({"workflow": "@demo:main", "document_owner": "reviewer"}),
    )
    .await;
    println!(
        "  documents are real files in {} (owner: {})",
        ctx["documents_dir"], ctx["document_owner"]
    );
    let w = call(
        reviewer,
        "team_doc_write",
        json!({"content": "# PR #7 review\n- retry loop never sleeps: fixed\n"}),
    )
    .await;
    println!(
        "  reviewer team_doc_write notes.md -> version {}",
        w["version"]
    );
    println!(
        "  coder team_doc_append -> {}",
        refused(
            coder,
            "team_doc_append",
            json!({"content": "- parse() error: fixed"})
        )
        .await
    );
    let sug = call(
        coder,
        "document_suggest",
        json!({"suggestion": "add: parse() error no longer swallowed"}),
    )
    .await;
    println!(
        "  so the coder suggests it instead: message {} to @{}",
        sug["message_id"], sug["owner"]
    );
    let stale = call(
        reviewer,
        "team_doc_append",
        json!({"content": "- parse() error: fixed (suggested by coder)"}),
    )
    .await;
    println!(
        "  the reviewer appends it; a write still holding the old version {} is refused:",
        w["version"]
    );
    println!(
        "  {}",
        refused(
            reviewer,
            "team_doc_write",
            json!({"content": "oops", "expected_version": w["version"]})
        )
        .await
    );
    println!("  (the current version is {})", stale["version"]);

    step("A proposal: the reviewer asks for approval to merge, both vote");
    let p = call(
        reviewer,
        "team_proposal_create",
        json!({"type": "approval", "title": "Merge PR #7", "timeout": "10m"}),
    )
    .await;
    println!(
        "  {} {:?}: options approve/reject, quorum {}, expires {}",
        p["proposal"]["id"].as_str().unwrap(),
        p["proposal"]["title"].as_str().unwrap(),
        p["proposal"]["quorum"],
        p["proposal"]["expires_at"].as_str().unwrap()
    );
    for (who, c, reason) in [
        ("coder", coder, "tests pass"),
        ("reviewer", reviewer, "findings addressed"),
    ] {
        let v = call(
            c,
            "team_vote",
            json!({"proposal": "latest", "choice": "approve", "reason": reason}),
        )
        .await;
        println!(
            "  {who} votes approve -> resolved: {}{}",
            v["resolved"],
            v["winner"]["label"]
                .as_str()
                .map(|w| format!(", winner: {w}"))
                .unwrap_or_default()
        );
    }

    step("The channel as the lead sees it (the DM between the agents is not shown)");
    show_channel(&call(&lead, "channel_read", json!({"workflow": "@demo:main"})).await);

    step("The channel as the reviewer sees it (including the DM to it)");
    show_channel(&call(reviewer, "channel_read", json!({})).await);

    step("Team status and inbox state");
    let m = call(
        &lead,
        "team_members",
        json!({"workflow": "@demo:main", "include_status": true}),
    )
    .await;
    for m in m["members"].as_array().unwrap() {
        println!(
            "  {:<9} {:<6} {:<5} {}",
            m["name"].as_str().unwrap(),
            m["backend"].as_str().unwrap(),
            m["state"].as_str().unwrap(),
            m["task"].as_str().unwrap_or("")
        );
    }
    for name in ["reviewer", "coder"] {
        let i = call(
            &lead,
            "agent_info",
            json!({"target": format!("{name}@demo:main")}),
        )
        .await;
        println!("  {name}: inbox {}", i["inbox"]);
    }
    println!(
        "\nDone. State lived in {} and is removed now.",
        dir.path().join("agent-worker.db").display()
    );
}
