//! A workflow's `hooks:` belong to its instance, through the real server: a name
//! the lead's hook_set or another running instance holds is refused before
//! anything starts, naming who holds it and the fix; an instance's hooks go when
//! it is stopped, and the name is free again.

use crate::common;
use common::*;
use serde_json::{Value, json};
use std::time::{Duration, Instant};

const SECRET: &str = "a-shared-secret-of-some-length";

const YAML: &str = "name: triage\nagents:\n  triager: {backend: mock}\nhooks:\n  tickets:\n    \
                    secret: a-shared-secret-of-some-length\n    to: triager\n";

async fn run(lead: &Client, tag: &str) -> Out {
    call(lead, "workflow_run", json!({"yaml": YAML, "tag": tag})).await
}

async fn listed(lead: &Client) -> Value {
    call(lead, "workflow_list", json!({})).await.ok()
}

/// The instances of `triage` that exist.
fn triages(l: &Value) -> Vec<String> {
    l["workflows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w["workflow"].as_str().unwrap().to_owned())
        .filter(|w| w.starts_with("@triage"))
        .collect()
}

#[tokio::test]
async fn a_workflow_s_hooks_take_no_name_another_holds_and_go_with_it() {
    let dir = tempfile::tempdir().unwrap();
    let s = HttpServer::start(dir.path()).await;
    let lead = s.lead(Proto::Modern).await;
    let set = json!({"name": "tickets", "secret": SECRET, "workflow": "@global:main"});
    call(&lead, "hook_set", set).await.ok();
    let e = run(&lead, "a").await.err();
    assert!(
        e.contains("hooks.tickets: the lead's hook_set declared a hook named tickets")
            && e.contains("delete: true")
            && e.contains("Nothing was started"),
        "{e}"
    );
    let l = listed(&lead).await;
    assert!(triages(&l).is_empty(), "{l}");
    assert_eq!(l["hooks"][0]["action"], "post in @global:main", "{l}");

    call(
        &lead,
        "hook_set",
        json!({"name": "tickets", "delete": true}),
    )
    .await
    .ok();
    run(&lead, "a").await.ok();
    let e = run(&lead, "b").await.err();
    assert!(
        e.contains("hooks.tickets: @triage:a declared a hook named tickets and still runs")
            && e.contains("workflow_stop"),
        "{e}"
    );
    let l = listed(&lead).await;
    assert_eq!(triages(&l), ["@triage:a"], "{l}");
    assert_eq!(
        l["hooks"][0]["action"], "post in @triage:a to @triager",
        "{l}"
    );

    // Stopped, its hook goes; the name is free for the next instance.
    let stop = json!({"workflow": "@triage:a"});
    call(&lead, "workflow_stop", stop).await.ok();
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let l = listed(&lead).await;
        if l["hooks"].as_array().is_none_or(Vec::is_empty) {
            break;
        }
        assert!(Instant::now() < deadline, "the hook stayed: {l}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    run(&lead, "b").await.ok();
    let l = listed(&lead).await;
    assert_eq!(
        l["hooks"][0]["action"], "post in @triage:b to @triager",
        "{l}"
    );
    s.stop().await;
}
