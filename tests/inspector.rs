//! The MCP Inspector CLI (`@modelcontextprotocol/inspector` 2.12, on the Node 24
//! that `scripts/inspector-setup` installs into .interop/inspector; see
//! `common/inspector.rs`) lists our tools over stdio and HTTP with `--strict`: no
//! schema portability warning, no error; and lists and expands the lead's prompts.
//! `tests/inspector_calls.rs` calls the tools.
//! With AGENT_WORKER_HEAVY=1 (scripts/test) a missing Inspector fails the test.

use crate::common;
use common::inspector::{http_args, inspector_cli};
use common::*;

/// Runs `inspector --cli --strict <target…> --method tools/list`; (exit code, stdout, stderr).
fn strict_tools_list(target: &[&str]) -> Option<(i32, String, String)> {
    inspect(target, &["--method", "tools/list"])
}

/// Runs `inspector --cli <target…> <request…>` (with `--strict`, which the
/// Inspector takes for tools/list only); (exit code, stdout, stderr).
fn inspect(target: &[&str], request: &[&str]) -> Option<(i32, String, String)> {
    let strict: &[&str] = if request.contains(&"tools/list") {
        &["--strict"]
    } else {
        &[]
    };
    let args: Vec<&str> = strict
        .iter()
        .chain(target)
        .chain(request)
        .copied()
        .collect();
    inspector_cli(&args)
}

fn check(what: &str, (code, stdout, stderr): (i32, String, String)) {
    assert_eq!(code, 0, "{what}: inspector exit {code}\n{stderr}");
    let tools: serde_json::Value = serde_json::from_str(&stdout)
        .unwrap_or_else(|e| panic!("{what}: tools/list is not JSON ({e}): {stdout}"));
    let n = tools["tools"].as_array().map_or(0, Vec::len);
    assert!(n >= lead_tools().len(), "{what}: {n} tools listed");
    let lower = stderr.to_lowercase();
    assert!(
        !lower.contains("warning") && !lower.contains("error:"),
        "{what}: the inspector found schema problems:\n{stderr}"
    );
}

#[tokio::test]
#[cfg_attr(
    not(heavy),
    ignore = "heavy: the MCP Inspector (AGENT_WORKER_HEAVY=1, scripts/inspector-setup)"
)]
async fn the_inspector_lists_every_tool_without_a_warning_over_stdio_and_http() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("stdio");
    let Some(r) = strict_tools_list(&[
        BIN,
        "--data-dir",
        data.to_str().unwrap(),
        "--idle-exit",
        "1s",
    ]) else {
        return;
    };
    check("stdio", r);
    let s = HttpServer::start(&dir.path().join("http")).await;
    let http = http_args(&s);
    let http: Vec<&str> = http.iter().map(String::as_str).collect();
    let r = strict_tools_list(&http).expect("installed");
    check("http", r);
    s.stop().await;
}

/// The lead's prompts: one per bundled example and start-team, listed and expanded
/// over stdio and HTTP; a missing required argument is refused.
#[tokio::test]
#[cfg_attr(
    not(heavy),
    ignore = "heavy: the MCP Inspector (AGENT_WORKER_HEAVY=1, scripts/inspector-setup)"
)]
async fn the_inspector_lists_and_expands_the_prompts_over_stdio_and_http() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("stdio");
    let stdio = [
        BIN,
        "--data-dir",
        data.to_str().unwrap(),
        "--idle-exit",
        "1s",
    ];
    let Some((code, out, err)) = inspect(&stdio, &["--method", "prompts/list"]) else {
        return;
    };
    assert_eq!(code, 0, "{err}");
    let list: serde_json::Value = serde_json::from_str(&out).unwrap();
    let names: Vec<&str> = list["prompts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap())
        .collect();
    for n in [
        "start-team",
        "review-loop",
        "debate-vote",
        "scheduled-digest",
        "coding-team",
        "code-review-steps",
        "organise",
        "teams-guide",
    ] {
        assert!(names.contains(&n), "{n} missing: {names:?}");
    }
    let s = HttpServer::start(&dir.path().join("http")).await;
    let http = http_args(&s);
    let http: Vec<&str> = http.iter().map(String::as_str).collect();
    let (code, out, err) = inspect(
        &http,
        &[
            "--method",
            "prompts/get",
            "--prompt-name",
            "start-team",
            "--prompt-args",
            "goal=ship the release notes",
        ],
    )
    .unwrap();
    assert_eq!(code, 0, "{err}");
    let got: serde_json::Value = serde_json::from_str(&out).unwrap();
    let text = got["messages"][0]["content"]["text"].as_str().unwrap();
    assert!(
        text.contains("ship the release notes") && text.contains("backend_list"),
        "{text}"
    );
    let (code, out, err) = inspect(
        &stdio,
        &["--method", "prompts/get", "--prompt-name", "coding-team"],
    )
    .unwrap();
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("workflow_run") && out.contains("shell:cargo test*"),
        "{out}"
    );
    let (code, out, err) = inspect(
        &http,
        &["--method", "prompts/get", "--prompt-name", "start-team"],
    )
    .unwrap();
    assert!(
        code != 0 && format!("{out}{err}").contains("goal"),
        "a missing goal was not refused: {code} {out} {err}"
    );
    // The lead's skill as a prompt, for clients without the Skills extension.
    let (code, out, err) = inspect(
        &http,
        &["--method", "prompts/get", "--prompt-name", "teams-guide"],
    )
    .unwrap();
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("Contracts cookbook") && out.contains("branch_merge"),
        "{out}"
    );
    s.stop().await;
}

/// Resources over stdio and HTTP: listed, their templates listed, and read.
#[tokio::test]
#[cfg_attr(
    not(heavy),
    ignore = "heavy: the MCP Inspector (AGENT_WORKER_HEAVY=1, scripts/inspector-setup)"
)]
async fn the_inspector_lists_and_reads_resources_over_stdio_and_http() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("stdio");
    let stdio = [
        BIN,
        "--data-dir",
        data.to_str().unwrap(),
        "--idle-exit",
        "1s",
    ];
    let Some((code, out, err)) = inspect(&stdio, &["--method", "resources/templates/list"]) else {
        return;
    };
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("agent-worker://workflows/{name}/{tag}/channel"),
        "{out}"
    );
    let (code, out, err) = inspect(&stdio, &["--method", "resources/list"]).unwrap();
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("agent-worker://backends"), "{out}");
    let (code, out, err) = inspect(
        &stdio,
        &[
            "--method",
            "resources/read",
            "--uri",
            "agent-worker://workflows/global/main/status",
        ],
    )
    .unwrap();
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("@global:main") && out.contains("application/json"),
        "{out}"
    );

    let s = HttpServer::start(&dir.path().join("http")).await;
    let lead = s.lead(Proto::Legacy).await;
    call(
        &lead,
        "channel_send",
        serde_json::json!({"message": "hello from the lead"}),
    )
    .await
    .ok();
    let http = http_args(&s);
    let http: Vec<&str> = http.iter().map(String::as_str).collect();
    let (code, out, err) = inspect(&http, &["--method", "resources/templates/list"]).unwrap();
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("{+file}"), "{out}");
    let (code, out, err) = inspect(&http, &["--method", "resources/list"]).unwrap();
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("agent-worker://workflows/global/main/channel"),
        "{out}"
    );
    let (code, out, err) = inspect(
        &http,
        &[
            "--method",
            "resources/read",
            "--uri",
            "agent-worker://workflows/global/main/channel",
        ],
    )
    .unwrap();
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("hello from the lead") && out.contains("text/markdown"),
        "{out}"
    );
    s.stop().await;
}
