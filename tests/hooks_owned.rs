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

/// Hooks of instance `wref`, by name, and what each does.
fn hooks_of(l: &Value, wref: &str) -> Vec<String> {
    let mut out: Vec<String> = l["hooks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|h| h["action"].as_str().unwrap().contains(wref))
        .map(|h| h["name"].as_str().unwrap().to_owned())
        .collect();
    out.sort();
    out
}

#[tokio::test]
async fn a_start_naming_a_hook_another_start_is_declaring_is_refused_before_it_starts() {
    let dir = tempfile::tempdir().unwrap();
    let s = HttpServer::start(dir.path()).await;
    let lead = s.lead(Proto::Modern).await;
    let slow = "name: triage\nagents:\n  triager: {backend: mock}\nsetup:\n  - shell: \
                echo b >> began.txt; sleep 2\nhooks:\n  tickets:\n    \
                secret: a-shared-secret-of-some-length\n    to: triager\n";
    let file = dir.path().join("triage.yaml");
    std::fs::write(&file, slow).unwrap();
    let first = {
        let lead = s.lead(Proto::Modern).await;
        let run = json!({"file": file, "tag": "pr-1"});
        tokio::spawn(async move { call(&lead, "workflow_run", run).await.ok() })
    };
    // The first is in its setup: its hook's row is not written yet.
    crate::hooks_hostile::exists(&dir.path().join("began.txt")).await;
    let e = call(&lead, "workflow_run", json!({"file": file, "tag": "pr-2"}))
        .await
        .err();
    assert!(
        e.contains("hooks.tickets: @triage:pr-1 is starting and declares a hook named tickets")
            && e.contains("Nothing was started"),
        "{e}"
    );
    first.await.unwrap();
    let l = listed(&lead).await;
    assert_eq!(triages(&l), ["@triage:pr-1"], "{l}");
    assert_eq!(hooks_of(&l, "@triage:pr-1"), ["tickets"], "{l}");
    let began = std::fs::read_to_string(dir.path().join("began.txt")).unwrap();
    assert_eq!(began.lines().count(), 1, "the second setup never began");
    s.stop().await;
}

/// A step workflow that completes at once (its instance keeps its hooks), with
/// `hooks:` named as given.
fn once(hooks: &[&str]) -> String {
    let mut y =
        "name: once\nagents:\n  a: {backend: mock}\ntrigger: go\nsteps:\n  - agent: a\n    \
                 on: trigger\n    prompt: go\nhooks:\n"
            .to_owned();
    for h in hooks {
        y.push_str(&format!("  {h}:\n    secret: {SECRET}\n    to: a\n"));
    }
    y
}

#[tokio::test]
async fn running_an_instance_again_removes_the_hooks_its_yaml_no_longer_declares() {
    let dir = tempfile::tempdir().unwrap();
    let s = HttpServer::start(dir.path()).await;
    let lead = s.lead(Proto::Modern).await;
    // (hooks the YAML declares, hooks the instance holds after its run)
    let runs: [(&[&str], &[&str]); 3] = [
        (&["extra", "tickets"], &["extra", "tickets"]),
        (&["tickets"], &["tickets"]),
        (&["other"], &["other"]),
    ];
    for (i, (declared, want)) in runs.into_iter().enumerate() {
        let run = json!({"yaml": once(declared), "wait_seconds": 30});
        let r = call(&lead, "workflow_run", run).await.ok();
        assert_eq!(r["status"], "completed", "run {i}: {r}");
        let l = listed(&lead).await;
        assert_eq!(hooks_of(&l, "@once:main"), want, "run {i}: {l}");
        assert_eq!(
            l["hooks"].as_array().unwrap().len(),
            want.len(),
            "run {i}: {l}"
        );
    }
    s.stop().await;
}

#[tokio::test]
async fn a_hook_s_deliveries_act_one_at_a_time_in_the_order_kept() {
    let dir = tempfile::tempdir().unwrap();
    let s = HttpServer::start(dir.path()).await;
    let lead = s.lead(Proto::Modern).await;
    let file = dir.path().join("seq.yaml");
    let yaml = "name: seq\nparams:\n  - {name: n}\nagents:\n  a: {backend: mock}\nsetup:\n  - \
                shell: echo \"${{ params.n }} begins\" >> order.txt; sleep 0.1; echo \
                \"${{ params.n }} ends\" >> order.txt\n";
    std::fs::write(&file, yaml).unwrap();
    let set = json!({"name": "seq", "secret": SECRET, "file": file,
        "params": {"n": "$.n"}, "tag": "n$.n"});
    call(&lead, "hook_set", set).await.ok();
    let n = 6;
    for i in 0..n {
        let body = json!({"n": i});
        let sent = crate::hooks_hostile::deliver(&s, "seq", &body, &format!("s-{i}")).await;
        assert_eq!(sent, 202);
    }
    let got = crate::hooks_hostile::outcomes(&lead, n).await;
    assert!(
        got.iter().all(|o| o.starts_with("started @seq:n")),
        "{got:?}"
    );
    let order = std::fs::read_to_string(dir.path().join("order.txt")).unwrap();
    let want: Vec<String> = (0..n)
        .flat_map(|i| [format!("{i} begins"), format!("{i} ends")])
        .collect();
    assert_eq!(order.lines().collect::<Vec<_>>(), want);
    s.stop().await;
}
