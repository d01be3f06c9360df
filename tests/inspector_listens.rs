//! The Inspector CLI, run 37 times in a row in the 2026-07-28 era against one
//! kernel over HTTP and through the stdio relay, leaves every listen served: it
//! exits without cancelling its `subscriptions/listen`, whose place went back only
//! when its stream closed (`tests/listens.rs` has the cases without the
//! Inspector). A test of an outside client, so it runs on the SQLite pass only.

use crate::common;
use crate::listens::{IN_A_ROW, Said, listen_over_http, listen_through_a_relay};
use common::inspector::{http_args, inspector, inspector_cli};
use common::*;
use serde_json::{Value, json};
use std::time::Duration;

/// The MCP Inspector CLI in the 2026-07-28 era listens on connect (for list
/// changes) and exits without cancelling. 37 runs in a row against one kernel,
/// over HTTP and through the stdio relay (one background kernel throughout): no
/// listen is refused (the Inspector shows nothing when one is, the kernel's log
/// does), and the lead's listen after them is served.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    not(heavy),
    ignore = "heavy: the MCP Inspector (AGENT_WORKER_HEAVY=1, scripts/inspector-setup)"
)]
async fn no_listen_is_refused_in_37_inspector_runs_over_http_and_stdio() {
    if inspector().is_none() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let s = HttpServer::start(&dir.path().join("http")).await;
    let http = http_args(&s);
    let data = dir.path().join("stdio");
    // Idle far longer than between two runs, however busy the machine, so that
    // one kernel serves them all; it is stopped at the end.
    let stdio = [
        BIN,
        "--data-dir",
        data.to_str().unwrap(),
        "--idle-exit",
        "60s",
    ]
    .map(String::from);
    let started = std::time::Instant::now();
    let runs = [http, stdio.to_vec()].map(|target| {
        let kernel_json = data.join("kernel.json");
        tokio::task::spawn_blocking(move || {
            let mut kernel = None;
            for run in 1..=IN_A_ROW {
                let mut argv = vec!["--protocol-era", "modern"];
                argv.extend(target.iter().map(String::as_str));
                argv.extend(["--method", "tools/list"]);
                let (code, _, err) = inspector_cli(&argv).expect("installed");
                assert_eq!(code, 0, "{} run {run}: exit {code}\n{err}", target[0]);
                if target[0] == BIN {
                    let now = std::fs::read_to_string(&kernel_json).unwrap();
                    assert_eq!(kernel.get_or_insert(now.clone()), &now, "one kernel");
                }
            }
        })
    });
    for r in runs {
        r.await.unwrap();
    }
    eprintln!(
        "{IN_A_ROW} Inspector runs per transport in {:.1?}",
        started.elapsed()
    );
    // The refusal as the server words it, so a rewording cannot make this count 0.
    let refusal = agent_worker::mcp::subscriptions::budget::Refused::TooManyListens.to_string();
    let refusal = refusal.split(" (").next().unwrap().to_owned();
    let refused = |kernel: &str| {
        let log = dir.path().join(kernel).join("logs/agent-worker.log");
        std::fs::read_to_string(log)
            .unwrap()
            .matches(&refusal)
            .count()
    };
    let refusals = (refused("http"), refused("stdio"));
    let (http, mut events) = listen_over_http(&s).await;
    events.until(Said::Acknowledged).await.unwrap();
    let lead = s.lead(Proto::Modern).await;
    call(&lead, "channel_send", json!({"message": "after"}))
        .await
        .ok();
    let over_http = events.until(Said::Updated).await;
    drop((events, http));
    let (mut relay, _stdin, through_relay) = listen_through_a_relay(&data, 0).await;
    relay.kill().await.unwrap();
    assert_eq!(
        refusals,
        (0, 0),
        "listens refused (over HTTP, through the relay)"
    );
    assert!(
        over_http.is_ok() && through_relay.is_ok(),
        "the lead's listen was not served\nover HTTP: {over_http:?}\nthrough the relay: {through_relay:?}"
    );
    s.stop().await;
    // The background kernel is stopped (before its data dir is removed).
    let kernel: Value =
        serde_json::from_str(&std::fs::read_to_string(data.join("kernel.json")).unwrap()).unwrap();
    let pid = kernel["pid"].as_i64().unwrap();
    let pid = nix::unistd::Pid::from_raw(i32::try_from(pid).unwrap());
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM).unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while std::path::Path::new(&format!("/proc/{pid}")).exists() {
        assert!(
            std::time::Instant::now() < deadline,
            "the background kernel did not stop"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}
