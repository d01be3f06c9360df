//! MCP resources per identity, through rmcp's client over HTTP: the lead lists and
//! reads every instance's channel, status, documents, agents, inboxes and runs;
//! an agent sees its own instance and its own inbox only, and what it may not see
//! reads as unknown. Looking at an inbox does not mark it read.

use crate::common;
use common::*;
use rmcp::model::{ReadResourceRequestParams, ResourceContents};
use serde_json::{Value, json};

/// (mime type, text) of a resource, or the error text.
async fn read(c: &Client, uri: &str) -> Result<(String, String), String> {
    match c
        .peer()
        .read_resource(ReadResourceRequestParams::new(uri))
        .await
    {
        Ok(r) => match &r.contents[0] {
            ResourceContents::TextResourceContents {
                mime_type, text, ..
            } => Ok((mime_type.clone().unwrap_or_default(), text.clone())),
            other => Err(format!("not text: {other:?}")),
        },
        Err(e) => Err(e.to_string()),
    }
}

async fn uris(c: &Client) -> Vec<String> {
    c.peer()
        .list_all_resources()
        .await
        .unwrap()
        .into_iter()
        .map(|r| r.uri.clone())
        .collect()
}

/// Agents in @team and @other, a mention, a DM to bob, a document, and one run; returns its id.
async fn populate_team(lead: &Client) -> String {
    new_agents(lead, "@team", &["alice", "bob"]).await;
    new_agents(lead, "@other", &["carol"]).await;
    call(
        lead,
        "agent_new",
        json!({"name": "echo", "backend": "mock", "workflow": "@team"}),
    )
    .await
    .ok();
    call(
        lead,
        "channel_send",
        json!({"message": "@alice please look at plan.json", "workflow": "@team"}),
    )
    .await
    .ok();
    call(
        lead,
        "channel_send",
        json!({"message": "a secret for bob", "to": "bob", "workflow": "@team"}),
    )
    .await
    .ok();
    call(
        lead,
        "team_doc_create",
        json!({"file": "plan.json", "content": "{\"step\": 1}", "workflow": "@team"}),
    )
    .await
    .ok();
    let asked = ask(lead, "echo@team", "hello", 30).await;
    asked["run_id"].as_str().unwrap().to_owned()
}

/// The lead lists and reads every resource, and reading an inbox does not ack it.
async fn the_lead_sees_everything(lead: &Client, run_id: &str) {
    // The lead: everything, listed and readable.
    let listed = uris(lead).await;
    for u in [
        "agent-worker://workflows/team/main/channel",
        "agent-worker://workflows/team/main/status",
        "agent-worker://workflows/team/main/documents/plan.json",
        "agent-worker://workflows/team/main/agents/alice",
        "agent-worker://workflows/team/main/agents/alice/inbox",
        "agent-worker://workflows/other/main/channel",
        "agent-worker://backends",
        "agent-worker://nodes",
    ] {
        assert!(listed.iter().any(|l| l == u), "{u} not listed: {listed:?}");
    }
    let (mime, text) = read(lead, "agent-worker://workflows/team/main/channel")
        .await
        .unwrap();
    assert_eq!(mime, "text/markdown");
    assert!(
        text.contains("please look at plan.json") && text.contains("a secret for bob"),
        "{text}"
    );
    let (mime, text) = read(
        lead,
        "agent-worker://workflows/team/main/documents/plan.json",
    )
    .await
    .unwrap();
    assert_eq!(
        (mime.as_str(), text.as_str()),
        ("application/json", "{\"step\": 1}")
    );
    let (_, status) = read(lead, "agent-worker://workflows/team/main/status")
        .await
        .unwrap();
    let status: Value = serde_json::from_str(&status).unwrap();
    assert_eq!(status["workflow"], "@team:main", "{status}");
    let (_, run) = read(lead, &format!("agent-worker://runs/{run_id}"))
        .await
        .unwrap();
    let run: Value = serde_json::from_str(&run).unwrap();
    assert_eq!(run["status"], "succeeded", "{run}");
    assert_eq!(run["final_text"], "echo done", "{run}");
    let summary = run["prompt_summary"].as_str().unwrap_or_default();
    assert!(
        summary.contains("from user") && summary.contains("hello"),
        "{run}"
    );
    let (_, backends) = read(lead, "agent-worker://backends").await.unwrap();
    assert!(backends.contains("\"mock\""), "{backends}");

    // Looking at alice's inbox does not read it: her message stays pending.
    let (_, inbox) = read(
        lead,
        "agent-worker://workflows/team/main/agents/alice/inbox",
    )
    .await
    .unwrap();
    let inbox: Value = serde_json::from_str(&inbox).unwrap();
    assert_eq!(contents(&inbox), ["@alice please look at plan.json"]);
    let info = call(lead, "agent_info", json!({"target": "alice@team"}))
        .await
        .ok();
    assert_eq!(info["inbox"]["pending"], 1, "{info}");
}

#[tokio::test]
async fn resources_show_the_team_to_each_identity_as_far_as_it_may_see() {
    let dir = tempfile::tempdir().unwrap();
    let s = InProcess::start(dir.path()).await;
    let lead = s.lead(Proto::Legacy).await;
    let run_id = populate_team(&lead).await;

    the_lead_sees_everything(&lead, &run_id).await;

    // Alice: her instance and her own inbox; nothing else, not even that it exists.
    let alice = join(&s, &lead, "alice@team", Proto::Modern).await;
    let listed = uris(&alice).await;
    assert!(
        listed.iter().all(|u| !u.contains("/other/")
            && !u.contains("/bob")
            && !u.contains("backends")
            && !u.contains("nodes")
            && !u.contains("/echo")),
        "{listed:?}"
    );
    assert!(
        listed.iter().any(|u| u.ends_with("/agents/alice/inbox")),
        "{listed:?}"
    );
    let (_, text) = read(&alice, "agent-worker://workflows/team/main/channel")
        .await
        .unwrap();
    assert!(
        !text.contains("a secret for bob"),
        "a DM to bob leaked: {text}"
    );
    for u in [
        "agent-worker://workflows/other/main/channel",
        "agent-worker://workflows/team/main/agents/bob/inbox",
        "agent-worker://workflows/team/main/agents/bob",
        "agent-worker://backends",
        "agent-worker://nodes",
        &format!("agent-worker://runs/{run_id}"),
        "agent-worker://workflows/nope/main/status",
        "https://example.com/",
    ] {
        let e = read(&alice, u).await.unwrap_err();
        assert!(e.contains("unknown resource"), "{u}: {e}");
    }
    let templates = alice
        .peer()
        .list_resource_templates(None)
        .await
        .unwrap()
        .resource_templates;
    assert!(templates.iter().any(|t| t.uri_template.ends_with("/inbox")));
    assert!(templates.iter().all(|t| !t.uri_template.contains("runs/")));
    s.stop().await;
}

/// completion/complete offers prompt arguments and template variables as far as
/// the caller may see.
#[tokio::test]
async fn completion_offers_what_the_caller_may_see() {
    use rmcp::model::{ArgumentInfo, CompleteRequestParams, CompletionContext, Reference};
    let dir = tempfile::tempdir().unwrap();
    let s = InProcess::start(dir.path()).await;
    let lead = s.lead(Proto::Legacy).await;
    new_agents(&lead, "@team", &["alice", "albert"]).await;
    new_agents(&lead, "@other", &["carol"]).await;
    let complete = |c: &Client, r: Reference, name: &str, value: &str, ctx: &[(&str, &str)]| {
        let mut p = CompleteRequestParams::new(r, ArgumentInfo::new(name, value));
        if !ctx.is_empty() {
            let mut cc = CompletionContext::new();
            cc.arguments = Some(
                ctx.iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect(),
            );
            p.context = Some(cc);
        }
        let peer = c.peer().clone();
        async move { peer.complete(p).await.unwrap().completion.values }
    };
    let template =
        || Reference::for_resource("agent-worker://workflows/{name}/{tag}/agents/{agent}");
    assert_eq!(
        complete(
            &lead,
            Reference::for_prompt("start-team"),
            "backends",
            "c",
            &[]
        )
        .await,
        ["claude", "codex", "cursor"]
    );
    let names = complete(&lead, template(), "name", "", &[]).await;
    assert!(
        names.contains(&"team".to_owned()) && names.contains(&"other".to_owned()),
        "{names:?}"
    );
    assert_eq!(
        complete(
            &lead,
            template(),
            "agent",
            "al",
            &[("name", "team"), ("tag", "main")]
        )
        .await,
        ["albert", "alice"]
    );
    // An agent: its own instance and name only.
    let alice = join(&s, &lead, "alice@team", Proto::Legacy).await;
    assert_eq!(
        complete(&alice, template(), "name", "", &[]).await,
        ["team"]
    );
    assert_eq!(
        complete(&alice, template(), "agent", "", &[("name", "team")]).await,
        ["alice"]
    );
    assert!(
        complete(
            &alice,
            Reference::for_prompt("start-team"),
            "backends",
            "",
            &[]
        )
        .await
        .is_empty()
    );
    s.stop().await;
}

/// One page of resources/list: its URIs and names, and the next cursor.
async fn page(c: &Client, cursor: Option<String>) -> (Vec<(String, String)>, Option<String>) {
    let r = c
        .peer()
        .list_resources(Some(
            rmcp::model::PaginatedRequestParams::default().with_cursor(cursor),
        ))
        .await
        .unwrap();
    let items = r
        .resources
        .iter()
        .map(|r| (r.uri.clone(), r.name.clone()))
        .collect();
    (items, r.next_cursor)
}

/// resources/list comes a page at a time (`nextCursor`), in URI order: paging
/// through gives every resource once, even when one is added between pages.
/// Names join an agent and its instance with one `@`. A cursor that is not one
/// is an invalid-params error that names it.
#[tokio::test]
async fn resources_list_pages_through_every_resource_once() {
    let dir = tempfile::tempdir().unwrap();
    let s = InProcess::start(dir.path()).await;
    let lead = s.lead(Proto::Legacy).await;
    // 30 instances of channel, status, agent info and inbox, the global instance's
    // channel and status, the lead's three, and its skill (skill:// sorts last).
    for i in 0..30 {
        new_agents(&lead, &format!("@w{i:02}"), &["coder"]).await;
    }
    let (first, cursor) = page(&lead, None).await;
    assert_eq!(first.len(), 100);
    let cursor = cursor.expect("a second page");
    // Added between pages, sorting before the cursor: the rest neither shifts
    // nor repeats.
    new_agents(&lead, "@a00", &["late"]).await;
    let (second, last) = page(&lead, Some(cursor)).await;
    assert_eq!(last, None);
    let all: Vec<(String, String)> = first.into_iter().chain(second).collect();
    assert_eq!(all.len(), 6 + 30 * 4, "{all:?}");
    assert_eq!(all.last().unwrap().0, "skill://agent-worker-teams/SKILL.md");
    let paged: Vec<&str> = all.iter().map(|(u, _)| u.as_str()).collect();
    let mut sorted = paged.clone();
    sorted.sort();
    sorted.dedup();
    assert_eq!(paged, sorted, "in URI order, each once");
    assert!(paged.contains(&"agent-worker://workflows/w29/main/agents/coder/inbox"));
    let names: Vec<&str> = all.iter().map(|(_, n)| n.as_str()).collect();
    assert!(names.iter().all(|n| !n.contains("@@")), "{names:?}");
    for n in [
        "coder@w07:main info",
        "coder@w07:main inbox",
        "@w07:main channel",
    ] {
        assert!(names.contains(&n), "{n} not in {names:?}");
    }
    // Listing again from the start shows the late one.
    let listed = uris(&lead).await;
    assert_eq!(listed.len(), 6 + 31 * 4);

    for bad in ["bogus", "after:https://example.com/"] {
        let e = lead
            .peer()
            .list_resources(Some(
                rmcp::model::PaginatedRequestParams::default().with_cursor(Some(bad.into())),
            ))
            .await
            .expect_err("an invalid cursor")
            .to_string();
        assert!(
            e.contains(&format!("invalid cursor {bad:?}")) && e.contains("-32602"),
            "{e}"
        );
    }
}
