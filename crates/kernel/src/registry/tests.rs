//! The registry's decisions: which agents may be registered (names, backends,
//! models, prompts, folders, powers), names unique ignoring case, what an unknown
//! instance or agent is told, and the scope a caller acts in. Tokens are in
//! `tokens_tests.rs`, organisations in `orgs_tests.rs`.

use super::{MAX_STEPS, MAX_SYSTEM_PROMPT, NewAgent, config::AgentConfig, validate};
use crate::Caller;
use crate::testing::{Rooms, expect, names, said};
use domain::names::WorkflowRef;

fn agent(name: &str, backend: &str) -> NewAgent {
    NewAgent {
        name: name.into(),
        backend: backend.into(),
        ..Default::default()
    }
}

/// `a` is accepted (`ok`) or refused with an error that starts with `want`.
#[track_caller]
fn check(a: NewAgent, want: &str) {
    expect(&said(&validate(&a)), want, &[]);
}

#[test]
fn a_name_can_be_mentioned_and_is_no_reserved_word() {
    check(agent("coder-2", "mock"), "ok");
    check(agent("a_b", "mock"), "ok");
    check(agent("1abc", "mock"), "invalid");
    check(agent("a b", "mock"), "invalid");
    check(agent("a.b", "mock"), "invalid");
    check(agent("", "mock"), "invalid");
    check(agent(&"x".repeat(65), "mock"), "invalid");
    check(agent(&"x".repeat(64), "mock"), "ok");
    for reserved in ["user", "all", "ALL", "system", "kernel"] {
        check(agent(reserved, "mock"), "invalid: agent name");
    }
}

#[test]
fn a_backend_is_one_of_the_known_ones() {
    check(
        agent("a", "gpt"),
        "invalid: unknown backend \"gpt\": use one of",
    );
    check(agent("a", ""), "invalid: unknown backend");
    for b in ["mock", "external", "human", "claude", "codex", "sdk"] {
        check(agent("a", b), "ok");
    }
}

#[test]
fn a_model_is_named_in_one_to_two_hundred_characters() {
    let with = |m: &str| NewAgent {
        model: Some(m.into()),
        ..agent("a", "mock")
    };
    check(with("sonnet"), "ok");
    check(with(""), "invalid: model must be 1..=200");
    check(with("   "), "invalid: model must be 1..=200");
    check(with(&"m".repeat(200)), "ok");
    check(with(&"m".repeat(201)), "invalid: model must be 1..=200");
}

#[test]
fn a_system_prompt_past_the_limit_is_refused_with_where_to_put_it() {
    let with = |n: usize| NewAgent {
        system: Some("s".repeat(n)),
        ..agent("a", "mock")
    };
    check(with(MAX_SYSTEM_PROMPT), "ok");
    let got = said(&validate(&with(MAX_SYSTEM_PROMPT + 1)));
    expect(
        &got,
        "invalid: system prompt is",
        &["Put long instructions"],
    );
}

#[test]
fn a_cwd_is_an_absolute_existing_folder() {
    let dir = tempfile::tempdir().unwrap();
    let with = |p: &str| NewAgent {
        cwd: Some(p.into()),
        ..agent("a", "mock")
    };
    check(with(dir.path().to_str().unwrap()), "ok");
    check(
        with("relative/dir"),
        "invalid: cwd \"relative/dir\" must be an absolute",
    );
    let missing = dir.path().join("nope");
    check(with(missing.to_str().unwrap()), "invalid: cwd");
    let file = dir.path().join("f.txt");
    std::fs::write(&file, "x").unwrap();
    let got = said(&validate(&with(file.to_str().unwrap())));
    expect(&got, "invalid", &["not an existing directory"]);
}

#[test]
fn mock_rules_are_for_the_mock_backend_only() {
    let rules = |backend: &str| NewAgent {
        config: AgentConfig {
            mock: vec![serde_json::from_value(serde_json::json!({"send": "@user hi"})).unwrap()],
            ..Default::default()
        },
        ..agent("a", backend)
    };
    check(rules("mock"), "ok");
    check(
        rules("claude"),
        "invalid: mock rules are for the mock backend",
    );
}

#[test]
fn max_steps_is_between_one_and_the_cap() {
    let with = |n: u32| NewAgent {
        config: AgentConfig {
            max_steps: Some(n),
            ..Default::default()
        },
        ..agent("a", "mock")
    };
    check(with(1), "ok");
    check(with(MAX_STEPS), "ok");
    check(with(0), "invalid: max_steps must be between 1");
    check(with(MAX_STEPS + 1), "invalid: max_steps must be between 1");
}

#[test]
fn a_human_has_no_skills_and_a_member_without_runs_no_worktree() {
    let skills = AgentConfig {
        skills: vec!["/tmp/skill".into()],
        ..Default::default()
    };
    let worktree = AgentConfig {
        workspace: domain::workspace::Workspace::Worktree(Default::default()),
        ..Default::default()
    };
    let with = |backend: &str, config: &AgentConfig| super::validate_powers(backend, config);
    expect(
        &said(&with("human", &skills)),
        "invalid: skills: a human",
        &[],
    );
    expect(
        &said(&with("external", &worktree)),
        "invalid: workspace",
        &["external"],
    );
    expect(
        &said(&with("human", &worktree)),
        "invalid: workspace",
        &["human"],
    );
    expect(&said(&with("mock", &worktree)), "ok", &[]);
}

/// Names are unique ignoring case within an instance, and the refusal names the
/// agent as it is spelled; another instance may use the name.
#[tokio::test]
async fn names_are_unique_ignoring_case_within_an_instance() {
    let r = Rooms::new().await;
    r.agents(&["Alice"]).await;
    let wf = WorkflowRef::global();
    for spelling in ["Alice", "alice", "ALICE"] {
        let (a, wf, now) = (agent(spelling, "mock"), wf.clone(), r.clock.now_ms());
        let got = r
            .store
            .write(move |c| super::insert_agent_tx(c, &a, &wf, None, now).map(|_| ()))
            .await;
        expect(
            &said(&got),
            "conflict: an agent named \"Alice\" already exists in @global:main",
            &[],
        );
    }
    r.agent_in("@review:pr-1", "alice", "mock").await;
    let listed = r.registry.agent_list(Some("@review:pr-1")).await.unwrap();
    let targets: Vec<&str> = listed.iter().map(|a| a.target.as_str()).collect();
    assert_eq!(targets, ["alice@review:pr-1"]);
}

#[tokio::test]
async fn an_unknown_agent_is_told_who_is_there() {
    let r = Rooms::new().await;
    let got = said(&r.registry.agent_get("ghost").await);
    expect(
        &got,
        "not found: no agent \"ghost\" in @global:main; agents there: (none)",
        &[],
    );
    r.agents(&["bob", "alice"]).await;
    let got = said(&r.registry.agent_get("ghost").await);
    expect(&got, "not found", &["agents there: alice, bob"]);
    // Any case finds the agent, in its own spelling.
    assert_eq!(r.registry.agent_get("BOB").await.unwrap().view.name, "bob");
}

#[tokio::test]
async fn an_unknown_instance_is_told_which_exist_and_how_to_make_one() {
    let r = Rooms::new().await;
    r.agent_in("@review:pr-1", "alice", "mock").await;
    let got = said(
        &r.registry
            .workflow_id(&WorkflowRef::parse("@review:pr-2").unwrap())
            .await,
    );
    expect(
        &got,
        "not found: no workflow instance @review:pr-2; known: @global:main, @review:pr-1.",
        &["agent_new with workflow"],
    );
    let got = said(&r.registry.agent_get("alice@review:pr-2").await);
    expect(&got, "not found: no workflow instance @review:pr-2", &[]);
}

#[tokio::test]
async fn agents_are_listed_by_instance_then_name() {
    let r = Rooms::new().await;
    r.agent_in("@review:b", "zed", "mock").await;
    r.agent_in("@review:a", "yan", "mock").await;
    r.agents(&["carol", "bob"]).await;
    let all: Vec<String> = r
        .registry
        .agent_list(None)
        .await
        .unwrap()
        .into_iter()
        .map(|a| a.target)
        .collect();
    assert_eq!(
        all,
        names(&["bob", "carol", "yan@review:a", "zed@review:b"])
    );
    let global = r.registry.agent_list(Some(" @global:main ")).await.unwrap();
    assert_eq!(global.len(), 2);
    expect(
        &said(&r.registry.agent_list(Some("@nope")).await),
        "not found",
        &[],
    );
}

/// The lead acts in any existing instance (default `@global:main`); an agent only
/// in its own, whatever it names.
#[tokio::test]
async fn the_lead_names_its_instance_and_an_agent_is_fixed_to_its_own() {
    let r = Rooms::new().await;
    r.agent_in("@review:pr-1", "alice", "mock").await;
    let lead = Caller::Lead;
    let s = r.registry.scope(&lead, None).await.unwrap();
    assert_eq!(
        (s.workflow.to_string(), s.me.as_str(), s.lead),
        ("@global:main".into(), "user", true)
    );
    let s = r.registry.scope(&lead, Some("  ")).await.unwrap();
    assert!(s.workflow.is_global(), "a blank workflow is the default");
    let s = r.registry.scope(&lead, Some("review:pr-1")).await.unwrap();
    assert_eq!(s.workflow.to_string(), "@review:pr-1");
    expect(
        &said(&r.registry.scope(&lead, Some("@other")).await),
        "not found",
        &[],
    );

    let alice = r.caller("alice@review:pr-1").await;
    let s = r.registry.scope(&alice, None).await.unwrap();
    assert_eq!(
        (s.workflow.to_string(), s.me.as_str(), s.lead),
        ("@review:pr-1".into(), "alice", false)
    );
    let s = r
        .registry
        .scope(&alice, Some("@review:pr-1"))
        .await
        .unwrap();
    assert_eq!(s.me, "alice", "naming its own instance is allowed");
    let got = said(&r.registry.scope(&alice, Some("@global")).await);
    expect(
        &got,
        "forbidden: you are alice and act only in @review:pr-1",
        &[],
    );
}

#[tokio::test]
async fn a_token_s_caller_is_its_agent_with_its_run() {
    let r = Rooms::new().await;
    let id = r.agent_in("@review:pr-1", "alice", "mock").await;
    let Caller::Agent(a) = r
        .registry
        .agent_caller(id, Some("run-1".into()))
        .await
        .unwrap()
    else {
        panic!("an agent");
    };
    assert_eq!(
        (a.name.as_str(), a.workflow.to_string(), a.run_id.as_deref()),
        ("alice", "@review:pr-1".into(), Some("run-1"))
    );
    let wid = r.registry.workflow_id(&a.workflow).await.unwrap();
    assert_eq!(a.workflow_id, wid);
    assert_eq!(
        r.registry.workflow_ref(wid).await.unwrap(),
        Some(a.workflow)
    );
    let got = said(&r.registry.agent_caller(id + 100, None).await);
    expect(&got, "not found: the agent of this token was deleted", &[]);
}

/// An agent as tools show it: its environment's names without their values, the
/// default step cap, no workspace unless it has a worktree, its labels.
#[tokio::test]
async fn a_view_shows_the_environment_s_names_and_never_its_values() {
    let r = Rooms::new().await;
    let a = NewAgent {
        env: [("API_TOKEN", "s3cret"), ("MODE", "fast")]
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .into(),
        node: Some(domain::placement::Placement::Labels(names(&["gpu", "eu"]))),
        ..agent("alice", "mock")
    };
    let (wf, now) = (WorkflowRef::global(), r.clock.now_ms());
    let (_, _, view) = r
        .store
        .write(move |c| super::insert_agent_tx(c, &a, &wf, None, now))
        .await
        .unwrap();
    assert_eq!(view.env, names(&["API_TOKEN", "MODE"]));
    assert!(!serde_json::to_string(&view).unwrap().contains("s3cret"));
    assert_eq!(view.max_steps, super::config::DEFAULT_MAX_STEPS);
    assert!(view.workspace.is_none() && view.node.is_none());
    let mut labels = view.labels.clone();
    labels.sort();
    assert_eq!(labels, names(&["eu", "gpu"]));
}
