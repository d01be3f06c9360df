//! Bringing worktree agents' work back: branch_diff shows what a branch holds,
//! branch_merge fast-forwards, merges or squashes it into a branch, reports a
//! conflict file by file without writing anything, and syncs the base into an
//! agent's branch for the agent to resolve; a contract on `merge` holds a merge
//! for the lead's approval. Real git, sdk agents driven by the fake model.

use crate::common;
use common::repo::*;
use common::*;
use serde_json::json;

#[tokio::test]
async fn two_branches_one_fast_forward_one_conflict_then_a_resolved_merge() {
    let repo = repository();
    let (llm_a, llm_b) = (writer(42).await, steady_writer(43).await);
    let dir = tempfile::tempdir().unwrap();
    let s = InProcess::start(dir.path()).await;
    let lead = s.lead(Proto::Modern).await;
    coder(&lead, "ada", repo.path(), &llm_a.url).await;
    coder(&lead, "bob", repo.path(), &llm_b.url).await;
    let (a, b) = tokio::join!(
        ask(&lead, "ada", "make it 42", 45),
        ask(&lead, "bob", "make it 43", 45)
    );
    assert_eq!(a["status"], "succeeded", "{a}");
    assert_eq!(b["status"], "succeeded", "{b}");

    // The diff shows each branch's own work against main.
    let d = call(&lead, "branch_diff", json!({"agent": "ada"}))
        .await
        .ok();
    assert_eq!(d["against"], "main", "{d}");
    let patch = d["patch"].as_str().unwrap();
    assert!(patch.contains("-fn answer() -> u32 { 41 }"), "{patch}");
    let c = call(
        &lead,
        "branch_diff",
        json!({"agent": "bob", "file": "lib.rs", "content": true}),
    )
    .await
    .ok();
    assert_eq!(c["content"], "fn answer() -> u32 { 43 }\n", "{c}");
    // A teammate reads it too, read-only; another team's branch is not theirs.
    let bob = join(&s, &lead, "bob", Proto::Modern).await;
    let seen = call(
        &bob,
        "branch_diff",
        json!({"agent": "ada", "against": "@bob"}),
    )
    .await
    .ok();
    assert!(seen["patch"].as_str().unwrap().contains("{ 42 }"), "{seen}");
    let e = call(&bob, "branch_diff", json!({"agent": "ada@other:x"}))
        .await
        .err();
    assert!(e.contains("your own team"), "{e}");
    let e = try_call(&bob, "branch_merge", json!({"agent": "ada"}))
        .await
        .expect_err("the lead's tool");
    assert!(e.to_string().contains("tool not found"), "{e}");

    merge_back(&lead, repo.path(), ("ada", 42), ("bob", 43)).await;
    s.stop().await;
}

#[tokio::test]
async fn merges_into_main_wait_for_the_lead_s_approval() {
    let (repo, lead, s, _keep) = one_coder(Proto::Modern).await;
    let a = ask(&lead, "ada", "make it 42", 45).await;
    assert_eq!(a["status"], "succeeded", "{a}");
    call(
        &lead,
        "contract_set",
        json!({"name": "main-needs-me", "when": {"event": "merge", "into": "main"},
               "then": {"action": "require_approval", "approvers": ["user"]}}),
    )
    .await
    .ok();
    let before = main_head(repo.path());
    let m = merge(&lead, json!({"agent": "ada", "mode": "squash"})).await;
    assert_eq!(m["status"], "held", "{m}");
    let id = m["approval"].as_i64().unwrap();
    assert_eq!(main_head(repo.path()), before, "held: nothing merged yet");
    // Asking again finds the same approval.
    let again = merge(&lead, json!({"agent": "ada", "mode": "squash"})).await;
    assert_eq!(again["approval"], id, "{again}");
    call(
        &lead,
        "approval_decide",
        json!({"id": id, "decision": "approve"}),
    )
    .await
    .ok();
    main_moved_from(repo.path(), &before, "the approved merge did not happen").await;
    // A squash: one new commit on main, with main as its only parent.
    let head = main_head(repo.path());
    let parents = git(repo.path(), &["rev-list", "--parents", "-n", "1", &head]);
    assert_eq!(parents, format!("{head} {before}"), "a squash commit");
    let ch = call(&lead, "channel_read", json!({"limit": 20})).await.ok();
    let told = ch.to_string();
    assert!(
        told.contains(&format!(
            "approval {id}: aw/global-main/ada was merged into main"
        )),
        "{told}"
    );
    // A refusing contract: nothing is done, and the reason says why.
    call(
        &lead,
        "contract_set",
        json!({"name": "no-merges", "when": {"event": "merge"},
               "then": {"action": "deny", "reason": "frozen for the release"}}),
    )
    .await
    .ok();
    let e = call(
        &lead,
        "branch_merge",
        json!({"agent": "ada", "into": "side"}),
    )
    .await
    .err();
    assert!(e.contains("frozen for the release"), "{e}");
    s.stop().await;
}

/// "Merges into main need two thirds of the team": the merge waits for a vote of
/// the other agents (ada's branch is hers; she does not vote), and is done once
/// two of the three vote for it on the proposal.
#[tokio::test]
async fn a_merge_into_main_waits_for_two_thirds_of_the_team() {
    let (repo, lead, s, _keep) = one_coder(Proto::Modern).await;
    let a = ask(&lead, "ada", "make it 42", 45).await;
    assert_eq!(a["status"], "succeeded", "{a}");
    let approve = json!([{"when": "prop-", "vote": {"proposal": "latest", "choice": "approve"}}]);
    let silent = json!([{"when": "^never$", "reply": "-"}]);
    for (name, rules) in [("m1", &approve), ("m2", &approve), ("m3", &silent)] {
        new_mock(&lead, name, rules.clone()).await;
    }
    call(
        &lead,
        "contract_set",
        json!({"name": "main-by-vote", "when": {"event": "merge", "into": "main"},
               "then": {"action": "require_votes", "votes": "2/3"}}),
    )
    .await
    .ok();
    let before = main_head(repo.path());
    let m = merge(&lead, json!({"agent": "ada", "mode": "squash"})).await;
    assert_eq!(m["status"], "held", "{m}");
    main_moved_from(
        repo.path(),
        &before,
        "the merge was not done after the vote",
    )
    .await;
    let approvals = call(&lead, "approval_list", json!({})).await.ok();
    let v = &approvals["approvals"][0];
    assert_eq!(
        (&v["state"], &v["vote"], &v["needed"]),
        (&json!("approved"), &json!("2/3"), &json!(2)),
        "{v}"
    );
    assert_eq!(v["approvers"], json!(["m1", "m2", "m3"]), "{v}");
    let p = call(&lead, "team_proposal_status", json!({})).await.ok();
    assert_eq!(p["proposals"][0]["winner"]["id"], "approve", "{p}");
    s.stop().await;
}

/// The mock's `write` is the sdk's write_file: its profile decides (a read-only
/// agent's write fails its run, nothing written), and it stays in its folder.
#[tokio::test]
async fn a_mock_writes_only_what_its_permissions_allow() {
    let work = tempfile::tempdir().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let s = InProcess::start(dir.path()).await;
    let lead = s.lead(Proto::Modern).await;
    let rule = |path: &str| json!([{"write": {"path": path, "content": "hello\n"}}]);
    for (name, permissions, path) in [
        ("writer", "edit", "a.txt"),
        ("reader", "read", "b.txt"),
        ("escaper", "edit", "../c.txt"),
    ] {
        call(
            &lead,
            "agent_new",
            json!({"name": name, "backend": "mock", "permissions": permissions,
                   "cwd": work.path().display().to_string(), "mock": rule(path)}),
        )
        .await
        .ok();
    }
    let ok = ask(&lead, "writer", "go", 30).await;
    assert_eq!(ok["status"], "succeeded", "{ok}");
    assert_eq!(
        std::fs::read_to_string(work.path().join("a.txt")).unwrap(),
        "hello\n"
    );
    let refused = ask(&lead, "reader", "go", 30).await;
    assert_eq!(refused["status"], "failed", "{refused}");
    assert!(
        refused["error"].as_str().unwrap().contains("write b.txt"),
        "{refused}"
    );
    assert!(!work.path().join("b.txt").exists());
    let out = ask(&lead, "escaper", "go", 30).await;
    assert_eq!(out["status"], "failed", "{out}");
    assert!(
        out["error"]
            .as_str()
            .unwrap()
            .contains("outside this agent's folder"),
        "{out}"
    );
    assert!(!work.path().parent().unwrap().join("c.txt").exists());
    s.stop().await;
}

/// A sync's conflict stays a conflict until the agent resolves it: a run that
/// leaves the markers ends without committing them (its error says why), so the
/// markers never reach the agent's branch, nor main through it.
#[tokio::test]
async fn unresolved_markers_are_never_committed() {
    let repo = repository();
    let dir = tempfile::tempdir().unwrap();
    let s = InProcess::start(dir.path()).await;
    let lead = s.lead(Proto::Modern).await;
    let rule = json!([{"when": "make it", "write": {"path": "lib.rs", "content": "fn answer() -> u32 { 43 }\n"}}]);
    call(
        &lead,
        "agent_new",
        json!({"name": "carl", "backend": "mock", "mock": rule, "workspace": "worktree",
               "cwd": repo.path().display().to_string()}),
    )
    .await
    .ok();
    let a = ask(&lead, "carl", "make it 43", 30).await;
    assert_eq!(a["status"], "succeeded", "{a}");
    std::fs::write(repo.path().join("lib.rs"), "fn answer() -> u32 { 42 }\n").unwrap();
    git(repo.path(), &["commit", "-q", "-am", "main says 42"]);
    let before = git(repo.path(), &["rev-parse", "aw/global-main/carl"]);
    let runs = info(&lead, "carl").await["runs"].as_array().unwrap().len();
    let sync = merge(&lead, json!({"agent": "carl", "from": "main"})).await;
    assert_eq!(sync["status"], "conflict", "{sync}");
    // carl is woken, does nothing about it, and its run ends.
    let i = wait_info(&lead, "carl", 30, |i| {
        i.get("running").is_none() && i["runs"].as_array().is_some_and(|r| r.len() > runs)
    })
    .await;
    let error = i["runs"][0]["error"].as_str().unwrap_or_default();
    assert!(
        error.contains("not resolved yet") && error.contains("lib.rs"),
        "{i}"
    );
    assert_eq!(
        git(repo.path(), &["rev-parse", "aw/global-main/carl"]),
        before
    );
    let e = call(
        &lead,
        "branch_merge",
        json!({"agent": "carl", "from": "main"}),
    )
    .await
    .err();
    assert!(e.contains("not resolved yet"), "{e}");
    s.stop().await;
}
