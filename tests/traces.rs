//! Traces over OTLP: a kernel started with `OTEL_EXPORTER_OTLP_ENDPOINT` exports
//! one trace for an agent_ask on the sdk backend, received by an OTLP/HTTP
//! receiver (tests/python/otlp_receiver.py, the OpenTelemetry Python packages):
//! the client's `traceparent` (in `_meta`) is the parent of the kernel's span of
//! the call, under which the run, the worker, its model turns, its MCP calls
//! back (each continued by the kernel's span of it) and its tool request with
//! the contracts' decision nest, with tokens and the outcome as attributes.
//! agent_info's run carries the trace's id. A review loop is a chain of linked
//! traces, none deeper than 8 levels, every span naming its host and process;
//! a batch queue set huge is bounded in the kernel and its worker.

use crate::common;
use common::fake_llm::{FakeLlm, Script};
use common::otlp::{receiver, spans_of};
use common::*;
use rmcp::model::{CallToolRequestParams, RequestParamsMeta};
use serde_json::{Value, json};

const TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const CLIENT_SPAN: &str = "00f067aa0ba902b7";
const SENT_TRACE: &str = "0af7651916cd43dd8448eb211c80319c";

/// The agent's newest run once it has `n` runs and the newest has ended.
async fn wait_for_run(lead: &Client, agent: &str, n: usize) -> Value {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let info = call(lead, "agent_info", json!({"target": agent}))
            .await
            .ok();
        let runs = info["runs"].as_array().unwrap();
        if runs.len() >= n && runs[0]["status"] != "running" {
            return runs[0].clone();
        }
        assert!(std::time::Instant::now() < deadline, "no run {n}: {info}");
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

/// A server exporting traces to the receiver on `port` (a batch every 100 ms);
/// the endpoint it was given.
async fn exporting_to(dir: &std::path::Path, port: u16) -> (HttpServer, String) {
    let endpoint = format!("http://127.0.0.1:{port}");
    let env = [
        ("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint.as_str()),
        ("OTEL_BSP_SCHEDULE_DELAY", "100"),
    ];
    (HttpServer::start_with_env(dir, &env).await, endpoint)
}

fn named<'a>(spans: &'a [Value], name: &str) -> Vec<&'a Value> {
    spans.iter().filter(|s| s["name"] == name).collect()
}

#[track_caller]
fn one<'a>(spans: &'a [Value], name: &str) -> &'a Value {
    let found = named(spans, name);
    assert_eq!(
        found.len(),
        1,
        "one span {name:?}: {found:?}\nall: {}",
        names(spans)
    );
    found[0]
}

fn names(spans: &[Value]) -> String {
    spans
        .iter()
        .map(|s| s["name"].as_str().unwrap_or_default())
        .collect::<Vec<_>>()
        .join(", ")
}

/// The span whose id is `s`'s parent.
fn parent_of<'a>(spans: &'a [Value], s: &Value) -> &'a Value {
    spans
        .iter()
        .find(|p| p["span_id"] == s["parent"])
        .unwrap_or_else(|| panic!("no parent for {s}"))
}

/// The worker's spans (its own process) under the run: its reading, its model
/// turns, its MCP calls back (each continued by the kernel), its tool request.
fn worker_spans_nest(ours: &[Value], run: &Value) {
    // The worker (its own process) under the run; its work under it.
    let worker = one(ours, "worker coder");
    assert_eq!(worker["parent"], run["span_id"], "{worker}");
    assert_eq!(worker["resource"]["service.name"], "agent-worker-worker");
    let backend = one(ours, "backend sdk");
    assert_eq!(backend["parent"], worker["span_id"]);
    assert_eq!(
        parent_of(ours, one(ours, "read_context"))["span_id"],
        worker["span_id"]
    );
    let turns = named(ours, "chat claude-sonnet-4-5");
    assert_eq!(turns.len(), 2, "a write, then the answer: {}", names(ours));
    for t in &turns {
        assert_eq!(t["parent"], backend["span_id"], "{t}");
        assert!(
            t["attributes"]["gen_ai.usage.input_tokens"]
                .as_i64()
                .unwrap()
                > 0
        );
    }

    // Each MCP call back: the worker's client span, continued by the kernel's.
    // The inbox is read twice: with the context, and before the second model call
    // (what arrived mid-run); each read a client span and the kernel's under it.
    let inbox = named(ours, "tools/call my_inbox");
    let (clients, servers): (Vec<&Value>, Vec<&Value>) =
        inbox.iter().copied().partition(|s| s["kind"] == 3);
    assert_eq!((clients.len(), servers.len()), (2, 2), "{inbox:?}");
    for server in &servers {
        assert!(
            clients.iter().any(|c| server["parent"] == c["span_id"]),
            "{server}"
        );
        assert_eq!(
            server["attributes"]["agent_worker.caller"],
            "coder@global:main"
        );
    }

    // The tool request, in its tool's span, and the contracts' decision.
    let tool = one(ours, "execute_tool write_file");
    assert_eq!(tool["parent"], backend["span_id"], "{tool}");
    let asks = named(ours, "tools/call permission_request");
    let decided = asks
        .iter()
        .find(|s| s["kind"] == 2)
        .unwrap_or_else(|| panic!("no kernel span of the tool request: {asks:?}"));
    assert_eq!(
        decided["attributes"]["agent_worker.decision"], "allow",
        "{decided}"
    );
    assert_eq!(
        decided["attributes"]["agent_worker.tool_request"],
        "write_file"
    );
    let asking = parent_of(ours, decided);
    assert_eq!(asking["kind"], 3, "the worker's call: {asking}");
    assert_eq!(asking["parent"], tool["span_id"], "{asking}");
}

#[tokio::test]
#[cfg_attr(
    not(heavy),
    ignore = "heavy: the Python SDK's virtualenv (AGENT_WORKER_HEAVY=1, scripts/py-env)"
)]
async fn an_agent_ask_is_one_trace_from_the_clients_span_to_the_tool_request() {
    let (port, rx) = receiver().await;
    let work = tempfile::tempdir().unwrap();
    let write = [("write_file", json!({"path": "hello.txt", "content": "hi"}))];
    let llm = FakeLlm::start(Script::steps(&write, "wrote it")).await;
    let dir = tempfile::tempdir().unwrap();
    let (s, _) = exporting_to(dir.path(), port).await;
    let lead = s.lead(Proto::Legacy).await;
    new_sdk_in(&lead, "coder", work.path(), &llm.url, json!("edit")).await;
    // Governed, so the sdk's write asks the kernel first (a notice, then allowed).
    call(
        &lead,
        "contract_set",
        json!({"name": "tell-me-of-edits", "when": {"event": "tool_request", "tool": "edit"},
               "then": {"action": "notify"}}),
    )
    .await
    .ok();

    // The lead's call, in the client's own trace.
    let mut ask = CallToolRequestParams::new("agent_ask").with_arguments(
        json!({"target": "coder", "message": "write hello.txt", "wait_seconds": 40})
            .as_object()
            .unwrap()
            .clone(),
    );
    ask.set_traceparent(&format!("00-{TRACE}-{CLIENT_SPAN}-01"));
    let r = lead.call_tool(ask).await.unwrap();
    let answer = r.structured_content.unwrap();
    assert_eq!(answer["status"], "succeeded", "{answer}");
    let info = call(&lead, "agent_info", json!({"target": "coder"}))
        .await
        .ok();
    assert_eq!(info["runs"][0]["trace_id"], TRACE, "{info}");
    // A run the scheduler starts for a message continues the sender's trace.
    let mut send = CallToolRequestParams::new("channel_send").with_arguments(
        json!({"message": "@coder once more"})
            .as_object()
            .unwrap()
            .clone(),
    );
    send.set_traceparent(&format!("00-{SENT_TRACE}-{CLIENT_SPAN}-01"));
    lead.call_tool(send).await.unwrap();
    let next = wait_for_run(&lead, "coder", 2).await;
    assert_eq!(next["trace_id"], SENT_TRACE, "{next}");
    assert_eq!(next["trigger"], "message", "{next}");
    lead.cancel().await.unwrap();
    // SIGTERM: the kernel exports what is left; the worker did when it exited.
    s.stop().await;
    let spans = spans_of(rx).await;
    let ours: Vec<Value> = spans
        .iter()
        .filter(|s| s["trace_id"] == TRACE)
        .cloned()
        .collect();
    eprintln!("{} spans in the trace: {}", ours.len(), names(&ours));

    // The kernel's span of the call continues the client's.
    let asked = one(&ours, "tools/call agent_ask");
    assert_eq!(asked["parent"], CLIENT_SPAN, "{asked}");
    assert_eq!(asked["kind"], 2, "a server span: {asked}");
    assert_eq!(asked["resource"]["service.name"], "agent-worker");
    assert_eq!(asked["attributes"]["gen_ai.tool.name"], "agent_ask");

    // The run, under it, with what it cost and how it ended.
    let run = one(&ours, "invoke_agent coder");
    assert_eq!(run["parent"], asked["span_id"], "{run}");
    let a = &run["attributes"];
    assert_eq!(a["agent_worker.backend"], "sdk", "{run}");
    // The ask starts the run, or the question's delivery woke it first.
    let trigger = a["agent_worker.trigger"].as_str().unwrap();
    assert!(["ask", "message"].contains(&trigger), "{run}");
    assert_eq!(a["gen_ai.request.model"], "claude-sonnet-4-5", "{run}");
    assert_eq!(a["agent_worker.outcome"], "succeeded", "{run}");
    assert!(
        a["gen_ai.usage.input_tokens"].as_i64().unwrap() > 0,
        "{run}"
    );
    assert!(
        a["gen_ai.usage.output_tokens"].as_i64().unwrap() > 0,
        "{run}"
    );
    assert!(a["agent_worker.cost_usd"].as_f64().unwrap() > 0.0, "{run}");

    worker_spans_nest(&ours, run);
    assert!(work.path().join("hello.txt").exists());
}

#[tokio::test]
async fn without_an_endpoint_no_run_has_a_trace() {
    let dir = tempfile::tempdir().unwrap();
    let s = InProcess::start(dir.path()).await;
    let lead = s.lead(Proto::Legacy).await;
    call(&lead, "agent_new", json!({"name": "m", "backend": "mock"}))
        .await
        .ok();
    let r = ask(&lead, "m", "hello", 20).await;
    assert_eq!(r["status"], "succeeded", "{r}");
    let info = call(&lead, "agent_info", json!({"target": "m"})).await.ok();
    assert!(info["runs"][0].get("trace_id").is_none(), "{info}");
    assert!(!agent_worker::telemetry::enabled());
    s.stop().await;
}

/// What a CLI is started with: a stand-in `claude` on the agent's PATH writes its
/// environment down, prints a key in its error and fails. Its TRACEPARENT names
/// the worker's span of the backend's process (a CLI that continues it, as Claude
/// Code and Codex do, nests its spans there); the endpoint given by flag reaches
/// it as OTEL_EXPORTER_OTLP_ENDPOINT, the worker's own setting does not; and the
/// key in the error reaches no span.
#[tokio::test]
#[cfg_attr(
    not(heavy),
    ignore = "heavy: the Python SDK's virtualenv (AGENT_WORKER_HEAVY=1, scripts/py-env)"
)]
async fn a_cli_is_started_in_the_backends_span() {
    let (port, rx) = receiver().await;
    let bin = tempfile::tempdir().unwrap();
    let dump = bin.path().join("env.txt");
    let cli = bin.path().join("claude");
    std::fs::write(
        &cli,
        "#!/bin/sh\nenv > \"$ENV_DUMP\"\necho 'Invalid API key: sk-ant-api03-SECRETSECRET' >&2\nexit 3\n",
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&cli, std::fs::Permissions::from_mode(0o755)).unwrap();
    let dir = tempfile::tempdir().unwrap();
    // By flag this time (the other tests set the environment).
    let endpoint = format!("http://127.0.0.1:{port}");
    let s = HttpServer::start_with(
        dir.path(),
        &["--otlp-endpoint", &endpoint],
        &[
            ("OTEL_BSP_SCHEDULE_DELAY", "100"),
            ("OTEL_EXPORTER_OTLP_HEADERS", "x-collector-key=KERNELKEY"),
        ],
    )
    .await;
    let lead = s.lead(Proto::Legacy).await;
    let path = format!(
        "{}:{}",
        bin.path().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    call(
        &lead,
        "agent_new",
        json!({"name": "cc", "backend": "claude", "env": {"PATH": path, "ENV_DUMP": dump.display().to_string(),
               "ANTHROPIC_API_KEY": "sk-test", "OTEL_SERVICE_NAME": "cc-cli",
               "OTEL_BSP_MAX_QUEUE_SIZE": "100000000"},
               // The stand-in runs in the agent's sandbox: where it dumps is granted.
               "permissions": {"allow": [format!("edit:{}", bin.path().display())]}}),
    )
    .await
    .ok();
    let r = ask(&lead, "cc", "hello", 30).await;
    assert_eq!(r["status"], "failed", "the stand-in fails: {r}");
    lead.cancel().await.unwrap();
    s.stop().await;
    let spans = spans_of(rx).await;
    let env = std::fs::read_to_string(&dump).expect("the stand-in CLI ran");
    let var = |k: &str| {
        env.lines()
            .find_map(|l| l.strip_prefix(&format!("{k}=")))
            .unwrap_or_else(|| panic!("no {k} in the CLI's environment:\n{env}"))
            .to_owned()
    };
    let backend = one(&spans, "backend claude");
    let parent = var("TRACEPARENT");
    let want = format!(
        "00-{}-{}-01",
        backend["trace_id"].as_str().unwrap(),
        backend["span_id"].as_str().unwrap()
    );
    assert_eq!(parent, want, "{backend}");
    assert_eq!(var("OTEL_EXPORTER_OTLP_ENDPOINT"), endpoint);
    // The kernel's endpoint goes with the kernel's headers.
    assert_eq!(
        var("OTEL_EXPORTER_OTLP_HEADERS"),
        "x-collector-key=KERNELKEY"
    );
    assert!(
        !env.contains("AGENT_WORKER_TRACES="),
        "the worker's setting is its own:\n{env}"
    );
    // The agent's OTEL_* reach its CLI as they are, and only its CLI: the
    // worker's own spans keep the worker's name.
    assert_eq!(var("OTEL_SERVICE_NAME"), "cc-cli");
    assert_eq!(var("OTEL_BSP_MAX_QUEUE_SIZE"), "100000000");
    assert!(
        !env.contains("AW_AGENT_ENV_"),
        "held names are the worker's:\n{env}"
    );
    assert_eq!(
        backend["resource"]["service.name"], "agent-worker-worker",
        "{backend}"
    );
    assert_eq!(
        backend["status"], 2,
        "the backend's failure is on its span: {backend}"
    );
    let message = backend["message"].as_str().unwrap();
    assert!(message.contains("Invalid API key: sk…"), "{backend}");
    let all = serde_json::to_string(&spans).unwrap();
    assert!(!all.contains("SECRETSECRET"), "a key reached a span: {all}");
}

/// An agent that names an OTLP endpoint of its own gets none of the kernel's
/// exporter headers (a collector's credentials) in any process started for it,
/// its CLI's auth check included.
#[tokio::test]
async fn an_agents_own_endpoint_gets_none_of_the_kernels_headers() {
    let bin = tempfile::tempdir().unwrap();
    let cli = bin.path().join("codex");
    std::fs::write(&cli, "#!/bin/sh\nenv >> \"$ENV_DUMP\"\nexit 3\n").unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&cli, std::fs::Permissions::from_mode(0o755)).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let s = HttpServer::start_with(
        dir.path(),
        &[],
        &[("OTEL_EXPORTER_OTLP_HEADERS", "x-collector-key=KERNELKEY")],
    )
    .await;
    let lead = s.lead(Proto::Legacy).await;
    let path = format!(
        "{}:{}",
        bin.path().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let own_dump = bin.path().join("own-env.txt");
    call(
        &lead,
        "agent_new",
        json!({"name": "own", "backend": "codex", "env": {"PATH": path, "ENV_DUMP": own_dump.display().to_string(),
               "OPENAI_API_KEY": "sk-test", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9"}}),
    )
    .await
    .ok();
    ask(&lead, "own", "hello", 30).await;
    let own_env = std::fs::read_to_string(&own_dump).expect("the stand-in CLI ran");
    assert!(
        own_env.contains("OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:9")
            && !own_env.contains("KERNELKEY"),
        "the kernel's headers went to the agent's endpoint:\n{own_env}"
    );
    s.stop().await;
}

/// The review loop (examples/workflows/review-loop.yaml): the lead's workflow_run
/// continues the client's trace and holds the runs its kickoff woke; a run that
/// another agent's message woke is the root of a trace of its own, linked to the
/// kernel's span of that send; no trace is deeper than 8 levels; every span, the
/// kernel's and each worker's, names its host and its process.
#[tokio::test]
#[cfg_attr(
    not(heavy),
    ignore = "heavy: the Python SDK's virtualenv (AGENT_WORKER_HEAVY=1, scripts/py-env)"
)]
async fn a_review_loop_is_linked_traces_none_deeper_than_eight() {
    let (port, rx) = receiver().await;
    let dir = tempfile::tempdir().unwrap();
    let (s, _) = exporting_to(dir.path(), port).await;
    let lead = s.lead(Proto::Legacy).await;
    let file = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("examples/workflows/review-loop.yaml");
    let mut start = CallToolRequestParams::new("workflow_run").with_arguments(
        json!({"file": file.display().to_string(), "wait_seconds": 40})
            .as_object()
            .unwrap()
            .clone(),
    );
    start.set_traceparent(&format!("00-{TRACE}-{CLIENT_SPAN}-01"));
    let r = lead.call_tool(start).await.unwrap();
    let done = r.structured_content.unwrap();
    assert_eq!(done["status"], "completed", "{done}");
    lead.cancel().await.unwrap();
    s.stop().await;
    let spans = spans_of(rx).await;
    eprintln!("{} spans: {}", spans.len(), names(&spans));

    let called = one(&spans, "tools/call workflow_run");
    assert_eq!(called["parent"], CLIENT_SPAN, "{called}");
    let runs: Vec<&Value> = spans
        .iter()
        .filter(|s| s["name"].as_str().unwrap().starts_with("invoke_agent "))
        .collect();
    let linked = runs
        .iter()
        .filter(|run| run["parent"] != called["span_id"])
        .inspect(|run| linked_to_a_send(&spans, run))
        .count();
    assert!(linked >= 3, "draft 1, the change, draft 2: {runs:?}");
    assert!(
        linked < runs.len(),
        "the kickoff's run is in the call: {runs:?}"
    );
    let deepest = spans.iter().map(|s| depth(&spans, s)).max().unwrap();
    eprintln!("{} runs, {linked} linked, {deepest} levels", runs.len());
    assert!(deepest <= 8, "a trace {deepest} levels deep");
    every_span_names_its_host_and_process(&spans);
}

/// `run` is a trace's root linked to the kernel's span of another agent's send.
#[track_caller]
fn linked_to_a_send(spans: &[Value], run: &Value) {
    assert_eq!(run["parent"], "", "a root: {run}");
    let links = run["links"].as_array().unwrap();
    assert_eq!(links.len(), 1, "{run}");
    let cause = spans
        .iter()
        .find(|s| s["span_id"] == links[0]["span_id"])
        .unwrap_or_else(|| panic!("no span the run links to: {run}"));
    assert_eq!(cause["trace_id"], links[0]["trace_id"], "{cause}");
    assert_ne!(cause["trace_id"], run["trace_id"], "{cause}");
    assert_eq!(cause["name"], "tools/call channel_send", "{cause}");
    assert_eq!(cause["kind"], 2, "the kernel's span: {cause}");
    let me = run["attributes"]["gen_ai.agent.name"].as_str().unwrap();
    let by = cause["attributes"]["agent_worker.caller"].as_str().unwrap();
    assert!(!by.starts_with(&format!("{me}@")), "{me} woken by {by}");
}

/// How many levels from its trace's root (or its first span not exported here).
fn depth(spans: &[Value], s: &Value) -> usize {
    let mut n = 1;
    let mut at = s;
    while let Some(p) = spans
        .iter()
        .find(|p| p["span_id"] == at["parent"] && p["trace_id"] == at["trace_id"])
    {
        n += 1;
        at = p;
        assert!(n < 1000, "a cycle at {s}");
    }
    n
}

/// Every span has `host.name` (this machine's) and `service.instance.id`: one
/// for the kernel, another for each worker process.
fn every_span_names_its_host_and_process(spans: &[Value]) {
    use std::collections::BTreeSet;
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap();
    fn instance<'a>(s: &&'a Value) -> &'a str {
        s["resource"]["service.instance.id"].as_str().unwrap()
    }
    for s in spans {
        assert_eq!(s["resource"]["host.name"], host.trim(), "{s}");
        assert_eq!(instance(&s).len(), 36, "a UUID: {s}");
    }
    let of = |service: &str| -> Vec<&Value> {
        spans
            .iter()
            .filter(|s| s["resource"]["service.name"] == service)
            .collect()
    };
    let kernel: BTreeSet<&str> = of("agent-worker").iter().map(instance).collect();
    assert_eq!(kernel.len(), 1, "one kernel: {kernel:?}");
    let workers: Vec<&Value> = of("agent-worker-worker")
        .into_iter()
        .filter(|s| s["name"].as_str().unwrap().starts_with("worker "))
        .collect();
    let theirs: BTreeSet<&str> = workers.iter().map(instance).collect();
    assert!(workers.len() >= 3, "{}", names(spans));
    assert_eq!(theirs.len(), workers.len(), "one per worker: {theirs:?}");
    assert!(theirs.is_disjoint(&kernel), "{theirs:?} {kernel:?}");
}

/// `OTEL_BSP_MAX_QUEUE_SIZE=100000000` on the kernel and in an agent's env (the
/// SDK allocates its batch queue whole: gigabytes, before): the queue is bounded,
/// the kernel and the agent's worker stay under 100 MiB, and spans still go out.
#[tokio::test]
#[cfg_attr(
    not(heavy),
    ignore = "heavy: the Python SDK's virtualenv (AGENT_WORKER_HEAVY=1, scripts/py-env)"
)]
async fn a_huge_batch_queue_is_bounded_in_the_kernel_and_its_worker() {
    const HUGE: &str = "100000000";
    let (port, rx) = receiver().await;
    let dir = tempfile::tempdir().unwrap();
    let endpoint = format!("http://127.0.0.1:{port}");
    let env = [
        ("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint.as_str()),
        ("OTEL_BSP_SCHEDULE_DELAY", "100"),
        ("OTEL_BSP_MAX_QUEUE_SIZE", HUGE),
    ];
    let s = HttpServer::start_with_env(dir.path(), &env).await;
    let lead = s.lead(Proto::Legacy).await;
    call(
        &lead,
        "agent_new",
        json!({"name": "m", "backend": "mock", "env": {"OTEL_BSP_MAX_QUEUE_SIZE": HUGE},
               "mock": [{"sleep": "60s"}]}),
    )
    .await
    .ok();
    let r = ask(&lead, "m", "hold on", 0).await;
    assert_eq!(r["status"], "running", "{r}");
    // The worker read its inbox, so its exporter was made.
    wait_info(&lead, "m", 30, |i| i["inbox"]["seen"] == 1).await;
    let kernel = s.child.id().unwrap();
    let workers = workers_of(kernel);
    assert_eq!(workers.len(), 1, "{workers:?}");
    let (k, w) = (rss_kib(kernel), rss_kib(workers[0]));
    eprintln!("resident: the kernel {k} KiB, its worker {w} KiB");
    assert!(k < 100 * 1024, "the kernel: {k} KiB");
    assert!(w < 100 * 1024, "the worker: {w} KiB");
    lead.cancel().await.unwrap();
    s.stop().await;
    let spans = spans_of(rx).await;
    let read = one(&spans, "read_context");
    assert_eq!(read["resource"]["service.name"], "agent-worker-worker");
    one(&spans, "tools/call agent_ask");
}
