//! Who a bearer token is: the lead (admin or local token), an agent (a minted
//! token, until it expires or is revoked, or its agent is gone), or refused and
//! why; how long a token may live; what the cache keeps and forgets.

use super::tokens::{AGENT_TOKEN_PREFIX, AuthError, MAX_TOKEN_TTL, hash};
use crate::Caller;
use crate::testing::{ADMIN, Rooms, expect, said};
use std::time::Duration;

const HOUR: Duration = Duration::from_secs(3600);

/// What `bearer` authenticates as, short: `lead`, `agent <name> <run>` or the refusal.
async fn who(r: &Rooms, bearer: Option<&str>) -> String {
    match r.registry.authenticate(bearer).await {
        Ok(Caller::Lead) => "lead".into(),
        Ok(Caller::Agent(a)) => format!("agent {} {}", a.name, a.run_id.unwrap_or_default()),
        Err(AuthError::Missing) => "missing".into(),
        Err(AuthError::Unknown) => "unknown".into(),
        Err(AuthError::Expired) => "expired".into(),
        Err(AuthError::Revoked) => "revoked".into(),
        Err(AuthError::Internal(e)) => format!("internal {e}"),
    }
}

#[tokio::test]
async fn the_admin_and_the_local_token_are_the_lead_and_nothing_else_is() {
    let r = Rooms::new().await;
    let local = r.registry.local_token().to_owned();
    assert!(local.starts_with("awlocal_") && local != ADMIN);
    for (bearer, want) in [
        (None, "missing"),
        (Some(""), "missing"),
        (Some("   "), "missing"),
        (Some(ADMIN), "lead"),
        (Some(&format!(" {ADMIN} ")), "lead"),
        (Some(local.as_str()), "lead"),
        (Some("awadmin_test_token_012345678"), "unknown"),
        (Some("awt_0000"), "unknown"),
    ] {
        assert_eq!(who(&r, bearer).await, want, "{bearer:?}");
    }
}

#[tokio::test]
async fn a_minted_token_is_its_agent_and_its_run_and_only_its_hash_is_kept() {
    let r = Rooms::new().await;
    let id = r.agent_in("@global:main", "alice", "mock").await;
    let (secret, expires) = r
        .registry
        .mint_agent_token(id, HOUR, "run", Some("run-7".into()))
        .await
        .unwrap();
    assert!(secret.starts_with(AGENT_TOKEN_PREFIX));
    assert_eq!(expires, r.clock.now_ms() + HOUR.as_millis() as i64);
    assert_eq!(who(&r, Some(&secret)).await, "agent alice run-7");
    assert_eq!(
        r.count("SELECT count(*) FROM tokens WHERE hash = ?1", &secret)
            .await,
        0
    );
    assert_eq!(
        r.count(
            "SELECT count(*) FROM tokens WHERE hash = ?1",
            &hash(&secret)
        )
        .await,
        1
    );
}

#[tokio::test]
async fn a_token_lives_more_than_nothing_and_at_most_thirty_days() {
    let r = Rooms::new().await;
    let id = r.agent_in("@global:main", "alice", "mock").await;
    for (ttl, want) in [
        (
            Duration::ZERO,
            "invalid: ttl must be more than 0 and at most 30days",
        ),
        (
            MAX_TOKEN_TTL + Duration::from_millis(1),
            "invalid: ttl must be",
        ),
        (MAX_TOKEN_TTL, "ok"),
        (Duration::from_millis(1), "ok"),
    ] {
        let got = r.registry.mint_agent_token(id, ttl, "join", None).await;
        expect(&said(&got), want, &[]);
    }
}

#[tokio::test]
async fn an_expired_token_is_refused_as_expired() {
    let r = Rooms::new().await;
    let id = r.agent_in("@global:main", "alice", "mock").await;
    let (secret, _) = r
        .registry
        .mint_agent_token(id, HOUR, "join", None)
        .await
        .unwrap();
    r.execute(
        "UPDATE tokens SET expires_at = 1 WHERE hash = ?1",
        &hash(&secret),
    )
    .await;
    assert_eq!(who(&r, Some(&secret)).await, "expired");
}

/// Revocation wins over expiry; a token whose agent is gone is revoked.
#[tokio::test]
async fn a_revoked_token_or_one_whose_agent_is_gone_is_refused_as_revoked() {
    let r = Rooms::new().await;
    let id = r.agent_in("@global:main", "alice", "mock").await;
    let (revoked, _) = r
        .registry
        .mint_agent_token(id, HOUR, "join", None)
        .await
        .unwrap();
    r.execute(
        "UPDATE tokens SET revoked_at = 1, expires_at = 1 WHERE hash = ?1",
        &hash(&revoked),
    )
    .await;
    assert_eq!(who(&r, Some(&revoked)).await, "revoked");
    let (orphan, _) = r
        .registry
        .mint_agent_token(id, HOUR, "join", None)
        .await
        .unwrap();
    r.execute("DELETE FROM agents WHERE name = ?1", "alice")
        .await;
    assert_eq!(who(&r, Some(&orphan)).await, "revoked");
}

/// A valid token is answered from memory until its agent is forgotten: then the
/// store's word (revoked) holds.
#[tokio::test]
async fn the_cache_answers_until_its_agent_is_forgotten() {
    let r = Rooms::new().await;
    let id = r.agent_in("@global:main", "alice", "mock").await;
    let (secret, _) = r
        .registry
        .mint_agent_token(id, HOUR, "join", None)
        .await
        .unwrap();
    assert_eq!(who(&r, Some(&secret)).await, "agent alice ");
    r.execute(
        "UPDATE tokens SET revoked_at = 1 WHERE hash = ?1",
        &hash(&secret),
    )
    .await;
    assert_eq!(who(&r, Some(&secret)).await, "agent alice ", "cached");
    r.registry.tokens.forget_agent(id + 1);
    assert_eq!(
        who(&r, Some(&secret)).await,
        "agent alice ",
        "another agent forgotten"
    );
    r.registry.tokens.forget_agent(id);
    assert_eq!(who(&r, Some(&secret)).await, "revoked");
}

/// Forgetting by name (a deletion through another kernel) ignores case and stays
/// within the instance; forgetting all forgets every agent.
#[tokio::test]
async fn forgetting_by_name_ignores_case_within_one_instance() {
    let r = Rooms::new().await;
    let here = r.agent_in("@global:main", "alice", "mock").await;
    let there = r.agent_in("@review:pr-1", "alice", "mock").await;
    let mint = |id| r.registry.mint_agent_token(id, HOUR, "join", None);
    let (a, _) = mint(here).await.unwrap();
    let (b, _) = mint(there).await.unwrap();
    assert_eq!(who(&r, Some(&a)).await, "agent alice ");
    assert_eq!(who(&r, Some(&b)).await, "agent alice ");
    r.execute("UPDATE tokens SET revoked_at = 1 WHERE purpose <> ?1", "")
        .await;
    let global = r.identity("alice").await.workflow_id;
    r.registry.tokens.forget_named(global, "ALICE");
    assert_eq!(who(&r, Some(&a)).await, "revoked");
    assert_eq!(
        who(&r, Some(&b)).await,
        "agent alice ",
        "the other instance's stays cached"
    );
    r.registry.tokens.forget_all();
    assert_eq!(who(&r, Some(&b)).await, "revoked");
}
