//! Permission profiles on the real worker CLIs, offline: a fake model asks to write
//! a file in the agent's folder, then to run a command that writes outside it.
//! With `read` neither happens, with `edit` only the file is written, with `full`
//! both happen, and `full` with `deny: [shell]` refuses the command. A refusal
//! reaches the model (the CLI answers its call with an error) and, where the CLI
//! reports it, the run's `denials` in agent_info.
//!
//! The same rows for the `sdk` backend, whose local tools ask the profile directly.
//!
//! Codex runs commands under every profile, inside its sandbox (read-only, or
//! writing only in the agent's folder): its command row shows the sandbox holding.

use crate::common;
use common::clis::*;
use common::fake_llm::{FakeLlm, Script};
use common::*;
use serde_json::{Value, json};
use std::path::Path;

/// The fake model's two calls for `backend`: write `file`, then run `command`.
fn steps(backend: &str, file: &Path, command: &str) -> Vec<(&'static str, Value)> {
    let f = file.display().to_string();
    match backend {
        "claude" => vec![
            ("Write", json!({"file_path": f, "content": "written"})),
            ("Bash", json!({"command": command, "description": "run it"})),
        ],
        "gemini" => vec![
            ("write_file", json!({"file_path": f, "content": "written"})),
            (
                "run_shell_command",
                json!({"command": command, "description": "run it"}),
            ),
        ],
        "opencode" => vec![
            // OpenCode's edit tool writes a new file when the old text is empty.
            (
                "edit",
                json!({"filePath": f, "oldString": "", "newString": "written"}),
            ),
            ("bash", json!({"command": command, "description": "run it"})),
        ],
        "sdk" => vec![
            (
                "write_file",
                json!({"path": "hello.txt", "content": "written"}),
            ),
            ("run_command", json!({"command": command})),
        ],
        "codex" => vec![
            (
                "apply_patch",
                json!({"input": format!(
                    "*** Begin Patch\n*** Add File: {f}\n+written\n*** End Patch\n"
                )}),
            ),
            ("exec_command", json!({"cmd": command})),
        ],
        _ => unreachable!(),
    }
}

/// The CLIs' folder (None: skip, when they are not installed and not required);
/// the sdk backend needs none.
pub(crate) fn bin_for(backend: &str) -> Option<std::path::PathBuf> {
    match backend {
        "sdk" => Some(std::path::PathBuf::new()),
        _ => cli_bin(),
    }
}

/// The agent's env against the fake model: the sdk's provider settings, or a CLI's.
pub(crate) fn agent_env(
    backend: &str,
    bin: &Path,
    home: &Path,
    llm: &str,
) -> serde_json::Map<String, Value> {
    match backend {
        "sdk" => json!({"ANTHROPIC_BASE_URL": llm, "ANTHROPIC_API_KEY": "sk-test"})
            .as_object()
            .unwrap()
            .clone(),
        _ => cli_env(backend, bin, home, llm),
    }
}

struct Case {
    permissions: Value,
    written: bool,
    ran: bool,
    /// Refused by the OS sandbox, not the profile: the command runs and its
    /// write fails, so no denial is kept.
    by_os: bool,
}

fn cases(backend: &str) -> Vec<Case> {
    let case = |p: Value, written, ran| Case {
        permissions: p,
        written,
        ran,
        by_os: false,
    };
    let mut v = vec![
        case(json!("read"), false, false),
        case(json!("edit"), true, false),
        case(json!("full"), true, true),
        case(json!({"profile": "full", "deny": ["shell"]}), true, false),
    ];
    if backend != "codex" {
        // A command allowed by its pattern on top of edit runs…
        v.push(case(
            json!({"profile": "edit", "allow": ["shell:python3 -c*"], "sandbox": "off"}),
            true,
            true,
        ));
        // …and under its OS sandbox writes nothing outside the agent's folder.
        v.push(Case {
            by_os: true,
            ..case(
                json!({"profile": "edit", "allow": ["shell:python3 -c*"]}),
                true,
                false,
            )
        });
    }
    v
}

async fn profile_rows(backend: &str) {
    let Some(bin) = bin_for(backend) else { return };
    let mut failures = Vec::new();
    for (i, case) in cases(backend).into_iter().enumerate() {
        let home = tempfile::tempdir().unwrap();
        let work = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        let file = work.path().join("hello.txt");
        let ran = outside.path().join("ran.txt");
        let command = format!("python3 -c \"open('{}','w').write('ran')\"", ran.display());
        let llm = FakeLlm::start(Script::steps(&steps(backend, &file, &command), "done")).await;
        let dir = tempfile::tempdir().unwrap();
        let s = HttpServer::start(dir.path()).await;
        let lead = s.lead(Proto::Legacy).await;
        let env = agent_env(backend, &bin, home.path(), &llm.url);
        let mut args = json!({
            "name": "worker", "backend": backend, "env": env,
            "cwd": work.path().display().to_string(),
            "permissions": case.permissions,
        });
        if let Some(m) = model_for(backend).or((backend == "sdk").then_some("claude-sonnet-4-5")) {
            args["model"] = json!(m);
        }
        let made = call(&lead, "agent_new", args).await.ok();
        let r = call(
            &lead,
            "agent_ask",
            json!({"target": "worker", "message": "write the file, then run the command", "wait_seconds": 50}),
        )
        .await
        .ok();
        let info = call(&lead, "agent_info", json!({"target": "worker"}))
            .await
            .ok();
        let run = &info["runs"][0];
        let written = file.exists();
        let did_run = ran.exists();
        let denials = run["denials"].as_array().cloned().unwrap_or_default();
        let calls = llm.model_calls();
        let last = calls
            .last()
            .map(|c| c["body"].to_string())
            .unwrap_or_default();
        let mut problems = Vec::new();
        if r["status"] != "succeeded" {
            problems.push(format!("the run did not succeed: {r}"));
        }
        if written != case.written {
            problems.push(format!("file written: {written}, want {}", case.written));
        }
        if did_run != case.ran {
            problems.push(format!("command ran: {did_run}, want {}", case.ran));
        }
        let refused = !case.written || !case.ran;
        if refused && !case.by_os && backend != "codex" && denials.is_empty() {
            problems.push("no denial kept with the run".into());
        }
        if refused && calls.len() < 3 {
            problems.push(format!(
                "the model was not asked again after its calls ({} calls)",
                calls.len()
            ));
        }
        if !problems.is_empty() {
            let offered = calls
                .last()
                .map(|c| {
                    let b = &c["body"];
                    let mut names = Vec::new();
                    for t in b["tools"].as_array().into_iter().flatten() {
                        for d in t["functionDeclarations"].as_array().into_iter().flatten() {
                            names.push(d["name"].as_str().unwrap_or("").to_owned());
                        }
                        if let Some(n) = t["name"].as_str().or(t["function"]["name"].as_str()) {
                            names.push(format!("{n}({})", t["type"].as_str().unwrap_or("")));
                        }
                    }
                    names.retain(|n| !n.contains("team"));
                    names.join(" ")
                })
                .unwrap_or_default();
            failures.push(format!(
                "{backend} case {i} {}: {}\n  agent_new: {}\n  run: {}\n  offered: {offered}\n  what the model was told: {}",
                case.permissions,
                problems.join("; "),
                made["warning"],
                run,
                tool_answers(&last)
            ));
        }
        drop(lead);
        s.stop().await;
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

#[tokio::test]
#[cfg_attr(
    not(heavy),
    ignore = "heavy: the worker CLIs from npm (AGENT_WORKER_HEAVY=1, scripts/interop-setup)"
)]
async fn claude_code_profiles() {
    profile_rows("claude").await;
}

#[tokio::test]
#[cfg_attr(
    not(heavy),
    ignore = "heavy: the worker CLIs from npm (AGENT_WORKER_HEAVY=1, scripts/interop-setup)"
)]
async fn gemini_cli_profiles() {
    profile_rows("gemini").await;
}

#[tokio::test]
#[cfg_attr(
    not(heavy),
    ignore = "heavy: the worker CLIs from npm (AGENT_WORKER_HEAVY=1, scripts/interop-setup)"
)]
async fn opencode_profiles() {
    profile_rows("opencode").await;
}

#[tokio::test]
async fn sdk_profiles() {
    profile_rows("sdk").await;
}

#[tokio::test]
#[cfg_attr(
    not(heavy),
    ignore = "heavy: the worker CLIs from npm (AGENT_WORKER_HEAVY=1, scripts/interop-setup)"
)]
async fn codex_profiles() {
    profile_rows("codex").await;
}

/// The tool answers in a model request body (each provider's shape), shortened.
fn tool_answers(body: &str) -> String {
    let mut out = Vec::new();
    for key in [
        "functionResponse",
        "tool_result",
        "\"role\":\"tool\"",
        "call_output",
    ] {
        for (i, _) in body.match_indices(key) {
            let end = (i + 400).min(body.len());
            let end = (end..body.len())
                .find(|e| body.is_char_boundary(*e))
                .unwrap_or(body.len());
            out.push(body[i..end].to_owned());
        }
    }
    out.join("\n    ")
}

/// Cursor Agent is not on npm: a stand-in records what each profile gives it (its
/// flags and the workspace's `.cursor/cli.json` and `mcp.json` during the run) and
/// answers with a recorded result line. The rows show the mapping, not Cursor's
/// own enforcement, which is untested here.
#[tokio::test]
async fn cursor_profiles_as_flags_and_rules() {
    let bin = tempfile::tempdir().unwrap();
    let marks = tempfile::tempdir().unwrap();
    let p = bin.path().join("cursor-agent");
    std::fs::write(
        &p,
        r#"#!/bin/sh
{ echo "ARGS $*"; echo "CLI"; cat .cursor/cli.json 2>/dev/null; echo; echo "MCP"; cat .cursor/mcp.json; } > "$MARKS/seen"
echo '{"type":"system","subtype":"init","session_id":"c1","model":"Auto"}'
echo '{"type":"result","subtype":"success","is_error":false,"duration_ms":5,"result":"done","session_id":"c1","usage":{"inputTokens":11,"outputTokens":3}}'
"#,
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let s = HttpServer::start(dir.path()).await;
    let lead = s.lead(Proto::Legacy).await;
    // The stand-in records outside its folder: its sandbox is granted that folder
    // (a granted path is the sandbox's alone; Cursor's rules do not show it).
    let marked = |v: Value| {
        let mut v = match v {
            Value::String(p) => json!({"profile": p}),
            v => v,
        };
        v["allow"] = json!([format!("edit:{}", marks.path().display())]);
        v
    };
    let rows: [(Value, bool, &[&str]); 4] = [
        (marked(json!("read")), false, &[]),
        (marked(json!("edit")), true, &["Shell(*)"]),
        (marked(json!("full")), true, &[]),
        (
            marked(json!({"profile": "full", "deny": ["shell:rm*", "mcp:tracker:delete"]})),
            true,
            &["Shell(rm)", "Mcp(tracker:delete)"],
        ),
    ];
    for (i, (permissions, force, deny)) in rows.iter().enumerate() {
        let work = tempfile::tempdir().unwrap();
        let name = format!("c{i}");
        let env = json!({
            "PATH": format!("{}:/usr/bin:/bin", bin.path().display()),
            "MARKS": marks.path().display().to_string(),
            "CURSOR_API_KEY": "k",
        });
        call(
            &lead,
            "agent_new",
            json!({"name": name, "backend": "cursor", "env": env,
                   "cwd": work.path().display().to_string(), "permissions": permissions,
                   "mcp_servers": {"tracker": {"url": "http://127.0.0.1:9/mcp",
                                               "headers": {"Authorization": "Bearer sekrit-value"}}}}),
        )
        .await
        .ok();
        let r = call(
            &lead,
            "agent_ask",
            json!({"target": name, "message": "go", "wait_seconds": 30}),
        )
        .await
        .ok();
        assert_eq!(r["status"], "succeeded", "{permissions}: {r}");
        let seen = std::fs::read_to_string(marks.path().join("seen")).unwrap();
        let args = seen.lines().next().unwrap();
        assert_eq!(args.contains("--force"), *force, "{permissions}: {seen}");
        for d in *deny {
            assert!(seen.contains(d), "{permissions}: {d} missing in {seen}");
        }
        assert!(seen.contains("\"tracker\""), "{permissions}: {seen}");
        assert!(
            !seen.contains("sekrit-value"),
            "a header secret reached the workspace file: {seen}"
        );
        // The run's rules and servers are gone from the workspace again.
        assert!(!work.path().join(".cursor").exists(), "{permissions}");
    }
    s.stop().await;
}

/// A profile a backend cannot hold exactly is refused when the agent is made (or
/// changed), with the reason, never silently widened.
#[tokio::test]
async fn profiles_a_backend_cannot_hold_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let s = HttpServer::start(dir.path()).await;
    let lead = s.lead(Proto::Legacy).await;
    let refused = [
        (
            "codex",
            json!({"profile": "edit", "allow": ["shell:cargo test*"]}),
            "codex",
        ),
        (
            "codex",
            json!({"profile": "full", "deny": ["edit"]}),
            "codex",
        ),
        (
            "gemini",
            json!({"profile": "edit", "allow": ["shell:npm * test"]}),
            "start",
        ),
        (
            "cursor",
            json!({"profile": "edit", "allow": ["shell:npm test*"]}),
            "program name",
        ),
        (
            "cursor",
            json!({"profile": "full", "allow": ["web"]}),
            "web",
        ),
    ];
    for (i, (backend, permissions, says)) in refused.iter().enumerate() {
        let e = call(
            &lead,
            "agent_new",
            json!({"name": format!("a{i}"), "backend": backend, "permissions": permissions}),
        )
        .await
        .err();
        assert!(e.contains(says), "{backend} {permissions}: {e}");
    }
    // The same holds for a change: a valid agent cannot be widened past its backend.
    call(
        &lead,
        "agent_new",
        json!({"name": "ok", "backend": "codex", "permissions": "read"}),
    )
    .await
    .ok();
    let e = call(
        &lead,
        "agent_update",
        json!({"target": "ok", "permissions": {"profile": "edit", "allow": ["shell:make*"]}}),
    )
    .await
    .err();
    assert!(e.contains("codex"), "{e}");
    s.stop().await;
}
