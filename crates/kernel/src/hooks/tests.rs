//! The hooks room's decisions on a manual clock: what a request is answered, in
//! order, and a hook's rate refilled as the clock moves.

use super::{Hooks, NewHook, Request, Taken};
use crate::testing::{NODE, T0, kernel_on, said};
use crate::timing::Clock;
use domain::hooks::{Action, Refusal, Signed, sign_generic, sign_github};
use std::collections::BTreeMap;
use std::sync::Arc;

const SECRET: &str = "sixteen-or-more-characters";

fn post() -> Action {
    Action::Post {
        workflow: "@global:main".into(),
        to: None,
        params: BTreeMap::new(),
    }
}

async fn set(hooks: &Hooks, name: &str, rate: Option<u32>) {
    let h = NewHook {
        name: name.into(),
        secret: SECRET.into(),
        action: post(),
        rate,
    };
    hooks.hook_set(h).await.unwrap();
}

/// A request to `name` signed as `how` says ("github", "generic@<unix secs>",
/// "forged", "none"), with `delivery` as the sender's id.
async fn send(
    hooks: &Arc<Hooks>,
    (name, how, delivery): (&str, &str, &str),
    body: &[u8],
) -> Result<&'static str, Refusal> {
    let github = sign_github(SECRET.as_bytes(), body);
    let forged = sign_github(b"someone-else-entirely", body);
    let generic = how
        .strip_prefix("generic@")
        .map(|t| sign_generic(SECRET.as_bytes(), t.parse().unwrap(), body));
    let headers = Signed {
        github: match how {
            "github" => Some(github.as_str()),
            "forged" => Some(forged.as_str()),
            _ => None,
        },
        generic: generic.as_deref(),
        delivery: Some(delivery),
        event: Some("ping"),
    };
    let req = Request {
        name,
        headers,
        body: Arc::from(body),
    };
    hooks.receive(req).await.map(|t| match t {
        Taken::New { .. } => "new",
        Taken::Retry { .. } => "retry",
    })
}

/// The hook, how it is signed, the delivery id, the body, and the answer.
type Case<'a> = (
    &'a str,
    &'a str,
    &'a str,
    &'a [u8],
    Result<&'a str, Refusal>,
);

#[tokio::test]
async fn requests_are_answered_in_order_on_the_kernel_s_clock() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Clock::manual(T0);
    let k = kernel_on(dir.path(), &clock).await;
    set(&k.hooks, "ci", None).await;
    let now = T0 / 1000;
    let (fresh, stale) = (
        format!("generic@{}", now - 60),
        format!("generic@{}", now - 301),
    );
    let deep = "[".repeat(65) + &"]".repeat(65);
    let cases: [Case; 8] = [
        ("ci", "github", "a", b"{}", Ok("new")),
        ("ci", "github", "a", b"{}", Ok("retry")),
        ("CI", fresh.as_str(), "b", b"[1]", Ok("new")),
        ("ci", stale.as_str(), "c", b"{}", Err(Refusal::Stale)),
        ("ci", "forged", "d", b"{}", Err(Refusal::BadSignature)),
        ("ci", "none", "e", b"{}", Err(Refusal::Unsigned)),
        ("ci", "github", "f", deep.as_bytes(), Err(Refusal::NotJson)),
        ("cd", "github", "g", b"{}", Err(Refusal::Unknown)),
    ];
    for (name, how, delivery, body, want) in cases {
        let got = send(&k.hooks, (name, how, delivery), body).await;
        assert_eq!(got, want, "{name} {how} {delivery}");
    }
    let kept = settled(&k.hooks, 2).await;
    assert_eq!(
        kept,
        [("b".into(), "posted".into()), ("a".into(), "posted".into())]
    );
}

/// The newest deliveries (id, the first word of the outcome) once `n` have
/// settled: each acts in a task of its own after its request was answered.
async fn settled(hooks: &Hooks, n: usize) -> Vec<(String, String)> {
    for _ in 0..500 {
        let d = hooks.deliveries(10).await.unwrap();
        let kept: Vec<(String, String)> = d
            .iter()
            .map(|d| {
                (
                    d.delivery.clone(),
                    d.outcome.split(' ').next().unwrap().to_owned(),
                )
            })
            .collect();
        if kept.iter().filter(|(_, o)| o != "received").count() >= n {
            return kept;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    panic!("{n} deliveries did not settle in 5 s");
}

#[tokio::test]
async fn a_hook_s_rate_refills_evenly_as_the_clock_moves() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Clock::manual(T0);
    let k = kernel_on(dir.path(), &clock).await;
    set(&k.hooks, "ci", Some(2)).await;
    // (seconds to move the clock first, taken?)
    let steps = [
        (0, true),
        (0, true),
        (0, false),
        (29, false),
        (1, true),
        (0, false),
        (300, true),
        (0, true),
        (0, false),
    ];
    for (i, (secs, taken)) in steps.into_iter().enumerate() {
        clock.advance(std::time::Duration::from_secs(secs));
        // Each its own body: a signed body is taken once, whatever its delivery id.
        let body = format!("[{i}]");
        let got = send(
            &k.hooks,
            ("ci", "github", &format!("d-{i}")),
            body.as_bytes(),
        )
        .await;
        let want = if taken { Ok("new") } else { Err(Refusal::Rate) };
        assert_eq!(got, want, "step {i}");
    }
}

#[tokio::test]
async fn a_hook_s_settings_are_checked_naming_the_field() {
    let dir = tempfile::tempdir().unwrap();
    let k = kernel_on(dir.path(), &Clock::manual(T0)).await;
    let hook = |name: &str, secret: &str, action: Action, rate| NewHook {
        name: name.into(),
        secret: secret.into(),
        action,
        rate,
    };
    let start = |file: &str| Action::Start {
        file: file.into(),
        params: BTreeMap::new(),
        tag: None,
        sha256: None,
    };
    let cases = [
        (hook("a b", SECRET, post(), None), "name \"a b\""),
        (hook("ci", "short", post(), None), "secret: 16 to 256"),
        (hook("ci", SECRET, post(), Some(0)), "rate:"),
        (
            hook("ci", SECRET, start("/nonexistent/x.yaml"), None),
            "file:",
        ),
        (
            hook(
                "ci",
                SECRET,
                Action::Post {
                    workflow: "@nowhere:main".into(),
                    to: None,
                    params: BTreeMap::new(),
                },
                None,
            ),
            "nowhere",
        ),
    ];
    for (h, want) in cases {
        let got = said(&k.hooks.hook_set(h).await);
        assert!(got.contains(want), "{got}");
    }
    assert!(k.hooks.hook_list().await.unwrap().is_empty());
}

#[test]
fn a_hook_s_secret_is_never_printed() {
    let h = NewHook {
        name: "ci".into(),
        secret: SECRET.into(),
        action: Action::Post {
            workflow: "@global:main".into(),
            to: None,
            params: BTreeMap::new(),
        },
        rate: None,
    };
    let shown = format!("{h:?}");
    assert!(
        shown.contains("\"ci\"") && !shown.contains(SECRET),
        "{shown}"
    );
    let decl = domain::workflow_yaml::HookDecl {
        name: "ci".into(),
        secret: SECRET.into(),
        to: None,
        params: BTreeMap::new(),
        rate: None,
    };
    assert!(!format!("{decl:?}").contains(SECRET));
}

/// A delivery kept as received by `node` at `at`, its action never run (its
/// kernel was killed first).
async fn left(hooks: &Hooks, (delivery, node, at): (&str, &str, i64)) {
    let (d, n) = (delivery.to_owned(), node.to_owned());
    hooks
        .store
        .write(move |c| {
            c.execute(
                "INSERT INTO hook_deliveries (hook, delivery, received_at, outcome, node, payload)
                 VALUES ('ci', ?1, ?2, 'received', ?3, '{\"n\":1}')",
                store::sql::params![d, at, n],
            )?;
            Ok(())
        })
        .await
        .unwrap();
}

#[tokio::test]
async fn a_delivery_left_received_by_a_gone_node_is_acted_on_again_once() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Clock::manual(T0);
    let k = kernel_on(dir.path(), &clock).await;
    set(&k.hooks, "ci", None).await;
    // A live node (heartbeat now by the store's clock, a long lease) beside this one.
    k.hooks
        .store
        .write(|c| {
            let now = c.now_ms()?;
            c.execute(
                "INSERT INTO nodes (name, pid, started_at, heartbeat_at, lease_ms, labels)
                 VALUES ('alive', 1, ?1, ?1, 3600000, '')",
                [now],
            )?;
            Ok(())
        })
        .await
        .unwrap();
    // (delivery, the node that kept it, when: before or after this life began)
    let cases = [
        ("gone-1", "gone", T0 - 5_000),
        ("live-1", "alive", T0 - 5_000),
        ("mine-before", NODE, T0 - 5_000),
        ("mine-now", NODE, T0 + 1),
    ];
    for c in cases {
        left(&k.hooks, c).await;
    }
    // At start: the gone node's and this node's previous life's; each claimed once.
    assert_eq!(k.hooks.recover(Some(T0)).await.unwrap(), 2);
    assert_eq!(k.hooks.recover(None).await.unwrap(), 0);
    settled(&k.hooks, 2).await;
    let mut got: Vec<(String, String)> = k
        .hooks
        .deliveries(10)
        .await
        .unwrap()
        .into_iter()
        .map(|d| {
            (
                d.delivery,
                d.outcome
                    .split_once(' ')
                    .map_or(d.outcome.clone(), |(w, rest)| {
                        format!("{w} …{}", rest.split_once(" (").map_or("", |(_, n)| n))
                    }),
            )
        })
        .collect();
    got.sort();
    let want = [
        (
            "gone-1",
            "posted …acted on again: node gone stopped before it had acted)",
        ),
        ("live-1", "received"),
        (
            "mine-before",
            "posted …acted on again: node local stopped before it had acted)",
        ),
        ("mine-now", "received"),
    ];
    let want: Vec<(String, String)> = want
        .iter()
        .map(|(d, o)| ((*d).into(), (*o).into()))
        .collect();
    assert_eq!(got, want);
    // The live node's goes once its lease runs out.
    k.hooks
        .store
        .write(|c| {
            Ok(c.execute(
                "UPDATE nodes SET lease_ms = 0, heartbeat_at = 0 WHERE name = ?1",
                ["alive"],
            )?)
        })
        .await
        .unwrap();
    assert_eq!(k.hooks.recover(None).await.unwrap(), 1);
    assert_eq!(settled(&k.hooks, 3).await.len(), 4);
}

/// The hooks each instance (by tag) holds, by name.
async fn held_by_tag(hooks: &Hooks) -> Vec<String> {
    let mut names: Vec<String> = hooks
        .hook_list()
        .await
        .unwrap()
        .into_iter()
        .map(|h| h.name)
        .collect();
    names.sort();
    names
}

#[tokio::test]
async fn an_ended_instance_s_hooks_go_only_while_it_is_still_ended() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Clock::manual(T0);
    let k = kernel_on(dir.path(), &clock).await;
    let yaml = "name: held\nagents:\n  a: {backend: mock}\n";
    // (tag, and its hook, the state its instance is in now)
    let cases = [
        ("rerun", "running"),
        ("done", "completed"),
        ("stopped", "stopped"),
        ("failed", "failed"),
    ];
    let mut ids = Vec::new();
    for (tag, state) in cases {
        let src = crate::workflows::run::Source::Text(yaml.into());
        let params = serde_json::Map::new();
        let w = k.workflows.workflow_start(src, Some(tag), &params, None);
        let started = w.await.unwrap();
        let h = NewHook {
            name: tag.into(),
            secret: SECRET.into(),
            action: post(),
            rate: None,
        };
        let owner = Some((started.id, &started.workflow));
        k.hooks.set_owned(h, owner).await.unwrap();
        let (id, state) = (started.id, state.to_owned());
        k.hooks
            .store
            .write(move |c| {
                let sql = "UPDATE workflows SET state = ?2 WHERE id = ?1";
                Ok(c.execute(sql, store::sql::params![id, state])?)
            })
            .await
            .unwrap();
        ids.push(started.id);
    }
    // A late "stopped" for an instance run again since, or one that completed:
    // their hooks stay.
    for id in &ids[..2] {
        k.hooks.instance_ended(Some(*id)).await.unwrap();
    }
    let all = ["done", "failed", "rerun", "stopped"];
    assert_eq!(held_by_tag(&k.hooks).await, all);
    // Missed events: the sweep takes the ended instances' hooks, and only theirs.
    k.hooks.instance_ended(None).await.unwrap();
    assert_eq!(held_by_tag(&k.hooks).await, ["done", "rerun"]);
}
