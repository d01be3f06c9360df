//! Organisations: which names and members are accepted, members as agents
//! without a worker of `@org.<name>` (a change of kind revokes their tokens), who
//! is removed, when an organisation may go, and who acts and votes within it.

use super::orgs::{MAX_DESCRIPTION, MAX_MEMBERS, OrgMember, acts_in_tx, of_tx, voters_tx};
use crate::testing::{Rooms, expect, names, said};
use domain::names::WorkflowRef;

fn member(name: &str) -> OrgMember {
    OrgMember {
        name: name.into(),
        role: None,
        human: false,
    }
}

fn person(name: &str) -> OrgMember {
    OrgMember {
        human: true,
        ..member(name)
    }
}

/// `members` given to a new organisation are accepted (`ok`) or refused with `want`.
async fn check_members(r: &Rooms, members: Vec<OrgMember>, want: &str) {
    let got = r.registry.org_put("team", None, Some(members)).await;
    expect(&said(&got), want, &[]);
}

#[tokio::test]
async fn members_are_named_once_each_with_a_short_role() {
    let r = Rooms::new().await;
    check_members(
        &r,
        vec![member("a"), member("A")],
        "invalid: members[1].name: \"A\" is named twice",
    )
    .await;
    check_members(&r, vec![member("1x")], "invalid: members[0].name:").await;
    check_members(&r, vec![member("user")], "invalid: members[0].name:").await;
    let long_role = OrgMember {
        role: Some("r".repeat(201)),
        ..member("a")
    };
    check_members(&r, vec![long_role], "invalid: members[0].role: at most 200").await;
    let many = (0..=MAX_MEMBERS)
        .map(|i| member(&format!("m{i}")))
        .collect();
    check_members(&r, many, "invalid: members: at most 200").await;
    check_members(&r, vec![member("a"), person("b")], "ok").await;
}

#[tokio::test]
async fn an_organisation_is_named_by_the_one_rule_and_is_never_global() {
    let r = Rooms::new().await;
    for (name, want) in [
        ("global", "invalid: org: @global has no members"),
        ("@GLOBAL", "invalid: org: @global"),
        ("a.b", "invalid: invalid organisation name"),
        ("", "invalid: invalid organisation name"),
        ("Review-Team", "ok"),
    ] {
        expect(
            &said(&r.registry.org_put(name, None, None).await),
            want,
            &[],
        );
    }
    let long = "d".repeat(MAX_DESCRIPTION + 1);
    let got = r.registry.org_put("x", Some(long), None).await;
    expect(&said(&got), "invalid: description: 2001 characters", &[]);
    // Named in any case, stored in lower case, with its instance.
    let v = r.registry.org_view("@REVIEW-team").await.unwrap();
    assert_eq!(
        (v.name.as_str(), v.channel.as_deref()),
        ("review-team", Some("@org.review-team:main"))
    );
}

/// Members are agents of the organisation's instance without a worker; the ones
/// left out are returned for the façade to delete.
#[tokio::test]
async fn members_are_agents_of_the_organisation_s_instance() {
    let r = Rooms::new().await;
    let both = vec![member("bot"), person("ann")];
    let made = r
        .registry
        .org_put("team", Some("we review".into()), Some(both))
        .await
        .unwrap();
    assert!(made.removed.is_empty());
    let agents = r.registry.agent_list(Some("@org.team")).await.unwrap();
    let kinds: Vec<(String, String)> = agents.into_iter().map(|a| (a.name, a.backend)).collect();
    assert_eq!(
        kinds,
        [
            ("ann".into(), "human".into()),
            ("bot".into(), "external".into())
        ]
    );
    // The description stays when only the members change.
    let changed = r
        .registry
        .org_put("team", None, Some(vec![member("bot")]))
        .await
        .unwrap();
    assert_eq!(changed.removed, names(&["ann"]));
    assert_eq!(changed.view.description.as_deref(), Some("we review"));
    assert_eq!(changed.view.members, vec![member("bot")]);
}

/// A member that becomes a person (or the reverse) joins again: its tokens go.
#[tokio::test]
async fn a_member_whose_kind_changes_loses_its_tokens() {
    let r = Rooms::new().await;
    r.registry
        .org_put("team", None, Some(vec![member("bot"), member("eve")]))
        .await
        .unwrap();
    for name in ["bot", "eve"] {
        let id = r
            .registry
            .agent_get(&format!("{name}@org.team"))
            .await
            .unwrap()
            .id;
        r.registry
            .mint_agent_token(id, std::time::Duration::from_secs(60), "join", None)
            .await
            .unwrap();
    }
    let kept = vec![person("bot"), member("eve")];
    r.registry.org_put("team", None, Some(kept)).await.unwrap();
    let open = "SELECT count(*) FROM tokens t JOIN agents a ON a.id = t.agent_id
                WHERE t.revoked_at IS NULL AND a.name = ?1";
    assert_eq!(r.count(open, "bot").await, 0, "bot became a person");
    assert_eq!(r.count(open, "eve").await, 1, "eve stayed an agent member");
    let bot = r.registry.agent_get("bot@org.team").await.unwrap();
    assert_eq!(bot.view.backend, "human");
}

/// An organisation goes only when nothing runs within it; its instances then run
/// within `@global`, and its members are returned.
#[tokio::test]
async fn an_organisation_with_a_live_instance_is_not_removed() {
    let r = Rooms::new().await;
    r.registry
        .org_put("team", None, Some(vec![member("bot")]))
        .await
        .unwrap();
    r.agent_in("@review:pr-1", "coder", "mock").await;
    r.execute(
        "UPDATE workflows SET org = ?1, state = 'running' WHERE name = 'review'",
        "team",
    )
    .await;
    let got = said(&r.registry.org_remove("team").await);
    expect(
        &got,
        "conflict: @review:pr-1 runs within team; workflow_stop it first",
        &[],
    );
    r.execute(
        "UPDATE workflows SET state = 'completed' WHERE org = ?1",
        "team",
    )
    .await;
    assert_eq!(
        r.registry.org_remove("team").await.unwrap(),
        names(&["bot"])
    );
    let global = &r.registry.org_list().await.unwrap()[0];
    assert_eq!(
        (global.name.as_str(), global.instances.clone()),
        ("global", names(&["@review:pr-1"]))
    );
    let got = said(&r.registry.org_remove("team").await);
    expect(
        &got,
        "not found: no organisation named \"team\"; org_set makes one. Organisations: global",
        &[],
    );
}

#[tokio::test]
async fn global_is_no_organisation_to_check_and_an_unknown_one_is_listed() {
    let r = Rooms::new().await;
    r.registry.org_put("alpha", None, None).await.unwrap();
    assert_eq!(r.registry.org_checked("@global").await.unwrap(), None);
    assert_eq!(
        r.registry.org_checked("Alpha").await.unwrap().as_deref(),
        Some("alpha")
    );
    let got = said(&r.registry.org_checked("beta").await);
    expect(&got, "not found", &["Organisations: global, alpha"]);
    let listed: Vec<String> = r
        .registry
        .org_list()
        .await
        .unwrap()
        .into_iter()
        .map(|o| o.name)
        .collect();
    assert_eq!(listed, names(&["global", "alpha"]));
}

/// A member acting from an instance run within its organisation reaches the
/// organisation's instance by naming it; anyone else reads it as unknown.
#[tokio::test]
async fn only_a_member_reaches_its_organisation_s_instance() {
    let r = Rooms::new().await;
    r.registry
        .org_put("team", None, Some(vec![member("coder")]))
        .await
        .unwrap();
    r.agent_in("@review:pr-1", "coder", "mock").await;
    r.agent_in("@review:pr-1", "tester", "mock").await;
    r.execute(
        "UPDATE workflows SET org = ?1 WHERE name = 'review'",
        "team",
    )
    .await;
    let coder = r.caller("coder@review:pr-1").await;
    let s = r.registry.scope(&coder, Some("@ORG.team")).await.unwrap();
    assert_eq!(
        (s.workflow.to_string(), s.me.as_str()),
        ("@org.team:main".into(), "coder")
    );
    assert_eq!(
        r.registry.member_org(&coder).await.unwrap().as_deref(),
        Some("@org.team:main")
    );
    let tester = r.caller("tester@review:pr-1").await;
    let got = said(&r.registry.scope(&tester, Some("@org.team")).await);
    expect(&got, "not found: no workflow instance @org.team", &[]);
    assert_eq!(r.registry.member_org(&tester).await.unwrap(), None);
    assert_eq!(
        r.registry.member_org(&crate::Caller::Lead).await.unwrap(),
        None
    );
    // Made by another agent, an agent of a member's name is not that member.
    made_by_tester(&r, "coder").await;
    let sub = r.caller("coder@review:pr-1").await;
    let got = said(&r.registry.scope(&sub, Some("@org.team")).await);
    expect(
        &got,
        "forbidden: you are coder, made by another agent",
        &["never acts as an organisation's member"],
    );
    assert_eq!(r.registry.member_org(&sub).await.unwrap(), None);
}

/// Agent `name` of `@review:pr-1` becomes one that `tester` made (a sub-agent).
async fn made_by_tester(r: &Rooms, name: &str) {
    r.execute(
        "UPDATE agents SET parent_id = (SELECT id FROM agents WHERE name = 'tester')
         WHERE name = ?1",
        name,
    )
    .await;
}

/// Who votes as the members in an instance run within an organisation: its
/// people, and its agent members that are agents of that instance.
#[tokio::test]
async fn members_vote_where_they_are_agents_and_people_everywhere() {
    let r = Rooms::new().await;
    let members = vec![member("coder"), member("absent"), person("ann")];
    r.registry
        .org_put("team", None, Some(members))
        .await
        .unwrap();
    r.agent_in("@review:pr-1", "coder", "mock").await;
    r.execute(
        "UPDATE workflows SET org = ?1 WHERE name = 'review'",
        "team",
    )
    .await;
    let review = r
        .registry
        .workflow_id(&WorkflowRef::parse("@review:pr-1").unwrap())
        .await
        .unwrap();
    let org = r
        .registry
        .workflow_id(&WorkflowRef::parse("@org.team").unwrap())
        .await
        .unwrap();
    let (voters, acts, of, none) = r
        .store
        .read(move |c| {
            Ok((
                voters_tx(c, review)?,
                acts_in_tx(c, org)?,
                of_tx(c, review)?,
                of_tx(c, org)?,
            ))
        })
        .await
        .unwrap();
    assert_eq!(voters, names(&["ann", "coder"]));
    r.agent_in("@review:pr-1", "tester", "mock").await;
    made_by_tester(&r, "coder").await;
    let voters = r.store.read(move |c| voters_tx(c, review)).await.unwrap();
    assert_eq!(
        voters,
        names(&["ann"]),
        "a sub-agent of a member's name votes not"
    );
    assert_eq!(
        acts,
        vec![org, review],
        "the organisation's instance acts in those run within it"
    );
    let (wid, wf, members) = of.expect("run within team");
    assert_eq!(
        (wid, wf.to_string(), members),
        (
            org,
            "@org.team:main".into(),
            names(&["absent", "ann", "coder"])
        )
    );
    assert!(
        none.is_none(),
        "the organisation's own instance runs within @global"
    );
}
