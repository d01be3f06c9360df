//! Organisations end to end over MCP: `review-team` with a contract "edits under
//! src/ need the reviewer's approval" and members coder and reviewer (a person,
//! joined with agent_join); two instances run within it obey the contract without
//! restating it and the reviewer decides both; a message in the organisation's
//! channel is read by the coder of each instance; an agent outside it, or an agent
//! of an instance within it that is no member, reads it as unknown; a restart
//! keeps all of it.

use crate::common;
use common::*;
use serde_json::json;

/// A coder whose edit under src/ waits for an approval, in an instance of `review`.
fn review(org_in_yaml: bool) -> String {
    format!(
        "name: review\n{}agents:\n  coder:\n    backend: mock\n    permissions: edit\n    mock:\n      \
         - write: {{path: src/lib.rs, content: \"pub fn f() {{}}\\n\"}}\n        reply: written\n  \
         helper: {{ backend: external }}\nkickoff: \"@coder go\"\n",
        if org_in_yaml {
            "org: review-team\n"
        } else {
            ""
        }
    )
}

async fn set_up(lead: &Client) {
    let r = call(
        lead,
        "org_set",
        json!({"name": "review-team", "description": "reviews before merging",
               "members": [{"name": "coder", "role": "writes the code"},
                           {"name": "reviewer", "role": "reviews edits under src/", "human": true}]}),
    )
    .await
    .ok();
    assert_eq!(r["organisation"]["channel"], "@org.review-team:main", "{r}");
    let c = call(
        lead,
        "contract_set",
        json!({"name": "src-needs-review", "org": "review-team",
               "when": {"event": "tool_request", "tool": "edit", "match": "src/*"},
               "then": {"action": "require_approval", "approvers": ["reviewer"], "timeout": "10m"}}),
    )
    .await
    .ok();
    assert!(
        c["contract"]["says"]
            .as_str()
            .unwrap()
            .ends_with("(in every instance run within the organisation @review-team)."),
        "{c}"
    );
}

#[tokio::test]
async fn two_instances_within_an_organisation_obey_its_contract_and_share_its_channel() {
    let dir = tempfile::tempdir().unwrap();
    let s = HttpServer::start(dir.path()).await;
    let lead = s.lead(Proto::Modern).await;
    set_up(&lead).await;
    // One names the organisation in its YAML, the other at workflow_run.
    call(
        &lead,
        "workflow_run",
        json!({"yaml": review(true), "tag": "pr-1"}),
    )
    .await
    .ok();
    call(
        &lead,
        "workflow_run",
        json!({"yaml": review(false), "tag": "pr-2", "org": "review-team"}),
    )
    .await
    .ok();
    let in_force = call(&lead, "contract_list", json!({"workflow": "@review:pr-2"}))
        .await
        .ok();
    assert!(
        in_force.to_string().contains("src-needs-review"),
        "{in_force}"
    );

    // The reviewer, a person, joins the organisation and decides both.
    let reviewer = reviewer_decides_both(&s, &lead).await;

    // The organisation's channel: the reviewer posts, each instance's coder reads it.
    call(
        &reviewer,
        "channel_send",
        json!({"message": "standards: every public fn has a doc comment"}),
    )
    .await
    .ok();
    for tag in ["pr-1", "pr-2"] {
        let coder = join(&s, &lead, &format!("coder@review:{tag}"), Proto::Legacy).await;
        let read = call(
            &coder,
            "channel_read",
            json!({"workflow": "@org.review-team"}),
        )
        .await
        .ok();
        assert!(
            read.to_string().contains("every public fn"),
            "{tag}: {read}"
        );
    }
    // Anyone else reads it as unknown: an agent of another instance, and an agent of
    // an instance within the organisation that is no member of it.
    call(
        &lead,
        "agent_new",
        json!({"name": "outsider", "backend": "external"}),
    )
    .await
    .ok();
    for who in ["outsider", "helper@review:pr-1"] {
        let c = join(&s, &lead, who, Proto::Modern).await;
        let e = call(&c, "channel_read", json!({"workflow": "@org.review-team"}))
            .await
            .err();
        assert!(
            e.contains("no workflow instance @org.review-team"),
            "{who}: {e}"
        );
    }
    let e = call(
        &lead,
        "agent_new",
        json!({"name": "x", "backend": "external", "workflow": "@org.review-team"}),
    )
    .await
    .err();
    assert!(e.contains("org_set"), "{e}");

    // A restart keeps the organisation, its members, its contract and its channel.
    drop((reviewer, lead));
    s.stop().await;
    after_a_restart(dir.path()).await;
}

#[tokio::test]
async fn organisation_mistakes_name_the_field_and_the_fix() {
    let dir = tempfile::tempdir().unwrap();
    let s = HttpServer::start(dir.path()).await;
    let lead = s.lead(Proto::Legacy).await;
    let e = call(&lead, "workflow_run", json!({"yaml": review(true)}))
        .await
        .err();
    assert!(
        e.contains("org:") && e.contains("no organisation named \"review-team\""),
        "{e}"
    );
    let e = call(
        &lead,
        "contract_set",
        json!({"name": "x", "org": "nope", "when": {"event": "tool_request"}, "then": {"action": "deny"}}),
    )
    .await
    .err();
    assert!(
        e.contains("no organisation named \"nope\"") && e.contains("org_set"),
        "{e}"
    );
    let e = call(&lead, "org_set", json!({"name": "global", "members": []}))
        .await
        .err();
    assert!(e.contains("@global has no members"), "{e}");
    let e = call(
        &lead,
        "org_set",
        json!({"name": "t", "members": [{"name": "a"}, {"name": "A"}]}),
    )
    .await
    .err();
    assert!(e.contains("members[1].name"), "{e}");
    let e = call(
        &lead,
        "org_set",
        json!({"name": "t", "members": [{"name": "a", "rol": "x"}]}),
    )
    .await
    .err();
    assert!(e.contains("rol"), "{e}");
    // A description workflow_list would repeat into every answer is refused whole.
    let long = "d".repeat(2_001);
    let e = call(&lead, "org_set", json!({"name": "t", "description": long}))
        .await
        .err();
    assert!(
        e.contains("description: 2001 characters; at most 2000"),
        "{e}"
    );
    let list = call(&lead, "workflow_list", json!({}))
        .await
        .ok()
        .to_string();
    assert!(!list.contains("ddd"), "nothing of it was kept: {list}");
    s.stop().await;
}

/// From chaos to structure: the prompt that reads a workflow and proposes an
/// organisation, a drafted contract bound to it that the lead approves through the
/// proposal flow, and the organisation's resource.
#[tokio::test]
async fn a_drafted_contract_for_an_organisation_is_approved_by_the_lead() {
    use rmcp::model::{GetPromptRequestParams, ReadResourceRequestParams};
    let dir = tempfile::tempdir().unwrap();
    let s = HttpServer::start(dir.path()).await;
    let lead = s.lead(Proto::Modern).await;
    let mut args = serde_json::Map::new();
    args.insert("workflow".into(), json!("@review:pr-1"));
    let p = lead
        .get_prompt(GetPromptRequestParams::new("organise").with_arguments(args))
        .await
        .unwrap();
    let text = serde_json::to_string(&p.messages).unwrap();
    assert!(
        text.contains("@review:pr-1") && text.contains("org_set"),
        "{text}"
    );

    call(
        &lead,
        "agent_new",
        json!({"name": "alice", "backend": "external"}),
    )
    .await
    .ok();
    let alice = join(&s, &lead, "alice", Proto::Legacy).await;
    let draft = json!({"type": "approval", "title": "reviews for src/",
        "contract": {"name": "src-needs-review", "org": "review-team",
                     "when": {"event": "tool_request", "tool": "edit", "match": "src/*"},
                     "then": {"action": "require_approval", "approvers": ["reviewer"]}}});
    let p = call(&alice, "team_proposal_create", draft).await.ok();
    let id = p["proposal"]["id"].clone();
    // The organisation does not exist yet: the lead is told to make it first.
    let e = call(
        &lead,
        "team_vote",
        json!({"proposal": id, "choice": "approve"}),
    )
    .await
    .err();
    assert!(e.contains("org_set it first"), "{e}");
    call(
        &lead,
        "org_set",
        json!({"name": "review-team", "members": [{"name": "reviewer", "human": true}]}),
    )
    .await
    .ok();
    let v = call(
        &lead,
        "team_vote",
        json!({"proposal": id, "choice": "approve"}),
    )
    .await
    .ok();
    assert_eq!(v["resolved"], true, "{v}");
    let list = call(&lead, "contract_list", json!({"org": "review-team"}))
        .await
        .ok();
    assert_eq!(list["contracts"][0]["name"], "src-needs-review", "{list}");
    assert_eq!(list["contracts"][0]["source"], "proposal", "{list}");
    assert_eq!(list["contracts"][0]["org"], "review-team", "{list}");
    // Not in force in @global, where alice works.
    let global = call(&lead, "contract_list", json!({"workflow": "@global:main"}))
        .await
        .ok();
    assert_eq!(global["contracts"], json!([]), "{global}");

    let r = lead
        .read_resource(ReadResourceRequestParams::new(
            "agent-worker://orgs/review-team",
        ))
        .await
        .unwrap();
    let body = serde_json::to_string(&r.contents).unwrap();
    assert!(
        body.contains("src-needs-review")
            && body.contains("agent-worker://workflows/org.review-team/main/channel"),
        "{body}"
    );
    let e = alice
        .read_resource(ReadResourceRequestParams::new(
            "agent-worker://orgs/review-team",
        ))
        .await
        .unwrap_err();
    assert!(
        e.to_string().contains("not found") || e.to_string().contains("unknown"),
        "{e}"
    );
    s.stop().await;
}

/// The reviewer, a person, joins the organisation, is told in its channel, and
/// approves the edit of each instance, which then completes.
async fn reviewer_decides_both(s: &HttpServer, lead: &Client) -> Client {
    let reviewer = join(s, lead, "reviewer@org.review-team", Proto::Modern).await;
    let pending = approvals_in(&reviewer, "pending", 2, 30).await;
    let mut workflows: Vec<&str> = pending
        .iter()
        .map(|a| a["workflow"].as_str().unwrap())
        .collect();
    workflows.sort();
    assert_eq!(workflows, ["@review:pr-1", "@review:pr-2"], "{pending:?}");
    let told = call(&reviewer, "my_inbox", json!({})).await.ok();
    assert!(
        told.to_string().contains("(in @review:pr-1)"),
        "told in its channel: {told}"
    );
    for a in &pending {
        call(
            &reviewer,
            "approval_decide",
            json!({"id": a["id"], "decision": "approve"}),
        )
        .await
        .ok();
    }
    for tag in ["pr-1", "pr-2"] {
        let st = call(
            lead,
            "workflow_status",
            json!({"workflow": format!("@review:{tag}"), "wait_seconds": 30}),
        )
        .await
        .ok();
        assert_eq!(st["status"], "completed", "{st}");
    }

    reviewer
}

/// The organisation, its members, its contract and its channel after a restart;
/// then it is removed, and its contract with it.
async fn after_a_restart(dir: &std::path::Path) {
    let s = HttpServer::start(dir).await;
    let lead = s.lead(Proto::Legacy).await;
    let list = call(&lead, "workflow_list", json!({})).await.ok();
    let org = &list["organisations"][1];
    assert_eq!(list["organisations"][0]["name"], "global", "{list}");
    assert_eq!(org["name"], "review-team", "{list}");
    assert_eq!(org["members"].as_array().unwrap().len(), 2, "{list}");
    assert_eq!(
        org["instances"],
        json!(["@review:pr-1", "@review:pr-2"]),
        "{list}"
    );
    let of_org = call(&lead, "contract_list", json!({"org": "review-team"}))
        .await
        .ok();
    assert_eq!(of_org["contracts"].as_array().unwrap().len(), 1, "{of_org}");
    let read = call(
        &lead,
        "channel_read",
        json!({"workflow": "@org.review-team"}),
    )
    .await
    .ok();
    assert!(read.to_string().contains("every public fn"), "{read}");
    let res = call(
        &lead,
        "org_set",
        json!({"name": "review-team", "remove": true}),
    )
    .await
    .ok();
    assert_eq!(res["removed"], true);
    let after = call(&lead, "contract_list", json!({})).await.ok();
    assert_eq!(
        after["contracts"],
        json!([]),
        "its contract went with it: {after}"
    );
    s.stop().await;
}

/// "2/3 of the members": within an organisation, its members vote (here three
/// people, from the organisation's instance, with approval_decide); two of three
/// decide it, and the coder's edit goes on.
#[tokio::test]
async fn a_vote_of_the_organisations_members_decides_once_two_of_three_vote() {
    let dir = tempfile::tempdir().unwrap();
    let s = HttpServer::start(dir.path()).await;
    let lead = s.lead(Proto::Modern).await;
    let people = ["ana", "ben", "cy"];
    // tester is an agent member, but no agent of the instance: it cannot vote there.
    let mut members = vec![json!({"name": "coder"}), json!({"name": "tester"})];
    members.extend(people.iter().map(|p| json!({"name": p, "human": true})));
    call(
        &lead,
        "org_set",
        json!({"name": "voters", "members": members}),
    )
    .await
    .ok();
    call(
        &lead,
        "contract_set",
        json!({"name": "edits-by-vote", "org": "voters",
               "when": {"event": "tool_request", "tool": "edit"},
               "then": {"action": "require_votes", "votes": "2/3", "timeout": "10m"}}),
    )
    .await
    .ok();
    call(
        &lead,
        "workflow_run",
        json!({"yaml": review(false), "tag": "vote", "org": "voters"}),
    )
    .await
    .ok();
    let ana = join(&s, &lead, "ana@org.voters", Proto::Modern).await;
    let pending = approvals_in(&ana, "pending", 1, 30).await;
    assert_eq!(
        pending[0]["needed"], 2,
        "two of the three others: {pending:?}"
    );
    assert_eq!(
        pending[0]["approvers"],
        json!(["ana", "ben", "cy"]),
        "{pending:?}"
    );
    let told = call(&ana, "my_inbox", json!({})).await.ok();
    assert!(
        told.to_string().contains("waits for a vote of the members"),
        "{told}"
    );
    let id = pending[0]["id"].clone();
    let first = call(
        &ana,
        "approval_decide",
        json!({"id": id, "decision": "approve"}),
    )
    .await
    .ok();
    assert_eq!(first["state"], "pending", "one vote is not enough: {first}");
    let ben = join(&s, &lead, "ben@org.voters", Proto::Legacy).await;
    let second = call(
        &ben,
        "approval_decide",
        json!({"id": id, "decision": "approve"}),
    )
    .await
    .ok();
    assert_eq!(second["state"], "approved", "{second}");
    let st = call(
        &lead,
        "workflow_status",
        json!({"workflow": "@review:vote", "wait_seconds": 30}),
    )
    .await
    .ok();
    assert_eq!(st["status"], "completed", "{st}");
    s.stop().await;
}
