//! The packages a user installs without Rust, as `scripts/package --profile dev`
//! makes them (common/packaging.rs): the npm packages published to a private
//! registry and run by `npx`, Claude Code and the Inspector on a machine with a
//! fresh HOME and no Rust on the PATH; the Claude Desktop bundle validated, packed,
//! unpacked and started as a host starts it; server.json against the MCP
//! registry's schema (packaging/server.schema.json). Each launch is the server the
//! README describes: relayed to a background kernel in the platform's data dir.
//! With AGENT_WORKER_HEAVY=1 (scripts/test) a missing tool fails the test.

use crate::common;
use common::inspector::inspector;
use common::lead_tools;
use common::packaging::*;
use serde_json::{Value, json};
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

const VERSION: &str = env!("CARGO_PKG_VERSION");

#[test]
#[cfg_attr(
    not(heavy),
    ignore = "heavy: the packaging tools (AGENT_WORKER_HEAVY=1, scripts/packaging-setup)"
)]
fn npx_runs_the_published_packages_for_claude_code_and_the_inspector() {
    let Some(tools) = tools() else { return };
    let Some((node, cli)) = inspector() else {
        return;
    };
    let claude = Path::new(REPO).join(".interop/node_modules/.bin/claude");
    if !claude.exists() {
        common::heavy::missing("Claude Code (in .interop/)", "scripts/interop-setup");
        return;
    }
    let dist = dist();
    let registry = Registry::start(&tools);
    registry.publish(&dist);
    let home = tempfile::tempdir().unwrap();
    let home = home.path();
    // The user's npm asks the private registry, and nothing else.
    std::fs::write(home.join(".npmrc"), format!("registry={}\n", registry.url)).unwrap();

    let npx = |args: &[&str]| {
        user_command("npx", home)
            .args(["-y", "agent-worker"])
            .args(args)
            .output()
            .unwrap()
    };
    let version = ok("npx -y agent-worker --version", npx(&["--version"]));
    assert_eq!(version.trim(), format!("agent-worker {VERSION}"));
    // The binary's refusal reaches the caller as it said it: its text, its code.
    let o = npx(&["--no-such-flag"]);
    assert_eq!(o.status.code(), Some(2), "{o:?}");
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("--no-such-flag"),
        "{o:?}"
    );

    claude_code_connects(&claude, home);
    the_inspector_lists_and_calls(&node, &cli, home);

    // Every launch relayed to one kernel in the platform's data dir, running the
    // binary npx installed from the platform's package.
    let exe = stop_kernel(&platform_data_dir(home)).display().to_string();
    assert!(
        exe.contains("/.npm/_npx/")
            && exe.contains(&format!("/agent-worker-{}/bin/agent-worker", platform())),
        "the kernel runs {exe}"
    );
}

/// Claude Code adds `npx -y agent-worker` and finds it connected.
fn claude_code_connects(claude: &Path, home: &Path) {
    let claude_code = |args: &[&str]| user_command(claude, home).args(args).output().unwrap();
    ok(
        "claude mcp add",
        claude_code(&[
            "mcp",
            "add",
            "agent-worker",
            "--",
            "npx",
            "-y",
            "agent-worker",
        ]),
    );
    let list = ok("claude mcp list", claude_code(&["mcp", "list"]));
    let line = list.lines().find(|l| l.starts_with("agent-worker:"));
    assert!(
        line.is_some_and(|l| l.contains("Connected")),
        "claude mcp list:\n{list}"
    );
}

/// The Inspector CLI, launching `npx -y agent-worker`, lists every lead tool and
/// calls agent_new.
fn the_inspector_lists_and_calls(node: &str, cli: &str, home: &Path) {
    let inspect = |args: &[&str]| -> Value {
        let o = user_command(node, home)
            .arg(cli)
            .args(["--cli", "--format", "json", "npx", "-y", "agent-worker"])
            .args(args)
            .output()
            .unwrap();
        let out = ok(&format!("inspector {args:?}"), o);
        serde_json::from_str(&out).unwrap_or_else(|e| panic!("not JSON ({e}): {out}"))
    };
    let listed = inspect(&["--method", "tools/list"]);
    let names: Vec<&str> = listed["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    for tool in lead_tools() {
        assert!(
            names.contains(&tool.as_str()),
            "{tool} not listed: {names:?}"
        );
    }
    let args = json!({"name": "packaged", "backend": "mock"}).to_string();
    let made = inspect(&[
        "--method",
        "tools/call",
        "--tool-name",
        "agent_new",
        "--tool-args-json",
        &args,
    ]);
    assert_eq!(
        made["result"]["structuredContent"]["agent"]["name"], "packaged",
        "{made}"
    );
}

/// The launcher passes SIGTERM on to the binary and ends as the binary alone
/// ends on it (its exit code, or the same signal).
#[test]
#[cfg_attr(
    not(heavy),
    ignore = "heavy: the packaging tools (AGENT_WORKER_HEAVY=1, scripts/packaging-setup)"
)]
fn the_launcher_passes_a_signal_on_and_ends_as_the_binary_does() {
    if tools().is_none() {
        return;
    }
    let dist = dist();
    // The launcher beside the platform's package, as npm lays them out.
    let root = tempfile::tempdir().unwrap();
    let modules = root.path().join("node_modules");
    copy_dir(
        &dist.join("npm/agent-worker"),
        &modules.join("agent-worker"),
    );
    let package = format!("agent-worker-{}", platform());
    let platform = modules.join("@agent-worker").join(&package);
    copy_dir(&dist.join("npm").join(&package), &platform);
    let foreground = |data: &str| ["--foreground", "--data-dir", data].map(String::from);
    let mut alone = user_command(platform.join("bin/agent-worker"), root.path());
    alone.args(foreground("alone"));
    let (alone, _) = ended_by_sigterm(alone);
    let mut launched = user_command("node", root.path());
    launched
        .arg(modules.join("agent-worker/bin/agent-worker.js"))
        .args(foreground("launched"));
    let (launched, binary) = ended_by_sigterm(launched);
    assert_eq!(binary.len(), 1, "the launcher runs one process: {binary:?}");
    assert!(
        gone(binary[0], Duration::from_secs(1)),
        "the binary outlived its launcher"
    );
    assert_eq!(
        launched, alone,
        "the launcher ended otherwise than the binary"
    );
}

/// Starts `cmd` (a foreground stdio server), sees it answer `initialize`, sends it
/// SIGTERM; how it ended, and the processes it had started.
fn ended_by_sigterm(mut cmd: Command) -> (std::process::ExitStatus, Vec<i32>) {
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let reply = initialize(child.stdin.as_mut().unwrap(), child.stdout.take().unwrap());
    assert_eq!(
        reply["result"]["serverInfo"]["name"], "agent-worker",
        "{reply}"
    );
    let started = children(child.id() as i32);
    // The server takes SIGTERM (a graceful stop) only once its handler is set,
    // a moment after it answers; before, SIGTERM ends it by the signal.
    let server = started.first().copied().unwrap_or(child.id() as i32);
    let end = std::time::Instant::now() + Duration::from_secs(10);
    while !catches_sigterm(server) {
        assert!(
            std::time::Instant::now() < end,
            "{server} never took SIGTERM"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    assert!(
        gone(child.id() as i32, Duration::from_secs(30)),
        "still running 30 s after SIGTERM"
    );
    (child.wait().unwrap(), started)
}

/// The bundle: its manifest passes `mcpb validate` and lists the server's own
/// tools; packed, then unpacked, it starts the server with the command its
/// manifest names, resolved as hosts resolve it, and the server answers.
#[test]
#[cfg_attr(
    not(heavy),
    ignore = "heavy: the packaging tools (AGENT_WORKER_HEAVY=1, scripts/packaging-setup)"
)]
fn the_bundle_validates_and_starts_the_server_its_manifest_names() {
    let Some(tools) = tools() else { return };
    let dist = dist();
    let mcpb = tools.join(".bin/mcpb");
    let manifest = dist.join("mcpb").join(platform()).join("manifest.json");
    let said = ok(
        "mcpb validate",
        Command::new(&mcpb)
            .arg("validate")
            .arg(&manifest)
            .output()
            .unwrap(),
    );
    assert!(said.contains("passes"), "{said}");
    let m: Value = serde_json::from_str(&std::fs::read_to_string(&manifest).unwrap()).unwrap();
    let mut listed: Vec<String> = m["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_owned())
        .collect();
    listed.sort();
    let mut lead = lead_tools();
    lead.sort();
    assert_eq!(listed, lead, "the bundle lists the lead's tools");

    let work = tempfile::tempdir().unwrap();
    let unpacked = work.path().join("unpacked");
    let bundle = dist.join(format!("agent-worker-{VERSION}-{}.mcpb", platform()));
    ok(
        "mcpb unpack",
        Command::new(&mcpb)
            .arg("unpack")
            .arg(&bundle)
            .arg(&unpacked)
            .output()
            .unwrap(),
    );
    let home = work.path().join("home");
    std::fs::create_dir(&home).unwrap();
    let config = host_config(&tools, &unpacked, &home);
    let mut server = user_command(config["command"].as_str().unwrap(), &home);
    for a in config["args"].as_array().unwrap() {
        server.arg(a.as_str().unwrap());
    }
    for (k, v) in config["env"].as_object().unwrap() {
        server.env(k, v.as_str().unwrap());
    }
    let mut child = server
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let reply = initialize(child.stdin.as_mut().unwrap(), child.stdout.take().unwrap());
    assert_eq!(reply["result"]["serverInfo"]["version"], VERSION, "{reply}");
    drop(child.stdin.take());
    child.wait().unwrap();
    // The data folder left empty: the platform's, as for any other launch.
    let exe = stop_kernel(&platform_data_dir(&home));
    assert!(
        exe.starts_with(&unpacked),
        "the kernel runs {}",
        exe.display()
    );
}

/// server.json is valid by the registry's schema, names this version, and the
/// checksums of what was made hold (the bundle's is also in server.json).
#[test]
#[cfg_attr(
    not(heavy),
    ignore = "heavy: the packaging tools (AGENT_WORKER_HEAVY=1, scripts/packaging-setup)"
)]
fn server_json_is_valid_by_the_registry_schema_and_the_checksums_hold() {
    let Some(tools) = tools() else { return };
    let dist = dist();
    let schema = Path::new(REPO).join("packaging/server.schema.json");
    let script = "import Ajv from 'ajv/dist/2020.js'; import addFormats from 'ajv-formats';\n\
        import fs from 'node:fs';\n\
        const [schema, doc] = process.argv.slice(1).map((f) => JSON.parse(fs.readFileSync(f, 'utf8')));\n\
        const ajv = new Ajv({ strict: false, allErrors: true }); addFormats(ajv);\n\
        const validate = ajv.compile(schema);\n\
        if (!validate(doc)) { console.error(JSON.stringify(validate.errors, null, 2)); process.exit(1); }\n\
        console.log('valid');";
    let check = |doc: &Path| {
        Command::new("node")
            .args(["--input-type=module", "-e", script])
            .arg(&schema)
            .arg(doc)
            .current_dir(tools.parent().unwrap())
            .output()
            .unwrap()
    };
    let server_json = dist.join("server.json");
    ok("server.json against the schema", check(&server_json));
    // The schema does refuse: a server.json without its name fails it.
    let mut doc: Value =
        serde_json::from_str(&std::fs::read_to_string(&server_json).unwrap()).unwrap();
    doc.as_object_mut().unwrap().remove("name");
    let bad = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(bad.path(), doc.to_string()).unwrap();
    assert!(
        !check(bad.path()).status.success(),
        "a server.json without a name passed"
    );

    let doc: Value = serde_json::from_str(&std::fs::read_to_string(&server_json).unwrap()).unwrap();
    assert_eq!(doc["version"], VERSION);
    let packages = doc["packages"].as_array().unwrap();
    assert!(
        packages.iter().any(|p| p["registryType"] == "npm"
            && p["identifier"] == "agent-worker"
            && p["version"] == VERSION),
        "{doc}"
    );
    let bundle = packages
        .iter()
        .find(|p| p["registryType"] == "mcpb")
        .expect("an mcpb package");
    let sums = std::fs::read_to_string(dist.join("SHA256SUMS")).unwrap();
    let name = format!("agent-worker-{VERSION}-{}.mcpb", platform());
    let line = sums
        .lines()
        .find(|l| l.ends_with(&name))
        .expect("the bundle's checksum");
    assert!(
        line.starts_with(bundle["fileSha256"].as_str().unwrap()),
        "{line} / {bundle}"
    );
    ok(
        "sha256sum -c",
        Command::new("sha256sum")
            .args(["-c", "SHA256SUMS"])
            .current_dir(&dist)
            .output()
            .unwrap(),
    );
}

/// The command, arguments and environment a host gives the unpacked bundle,
/// from the mcpb library's own resolution (the settings left at their defaults).
fn host_config(tools: &Path, unpacked: &Path, home: &Path) -> Value {
    let script = "import { getMcpConfigForManifest } from '@anthropic-ai/mcpb';\n\
        import fs from 'node:fs';\n\
        const [dir, home] = process.argv.slice(1);\n\
        const manifest = JSON.parse(fs.readFileSync(dir + '/manifest.json', 'utf8'));\n\
        const config = await getMcpConfigForManifest({ manifest, extensionPath: dir,\n\
          systemDirs: { HOME: home }, userConfig: {}, pathSeparator: '/' });\n\
        console.log(JSON.stringify(config));";
    let o = Command::new("node")
        .args(["--input-type=module", "-e", script])
        .arg(unpacked)
        .arg(home)
        .current_dir(tools.parent().unwrap())
        .output()
        .unwrap();
    serde_json::from_str(&ok("the host's configuration of the bundle", o)).unwrap()
}

/// Sends `initialize` over a stdio launch; its answer.
fn initialize(stdin: &mut impl Write, stdout: impl std::io::Read) -> Value {
    let request = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "packaging-test", "version": "1"}}});
    writeln!(stdin, "{request}").unwrap();
    stdin.flush().unwrap();
    let mut line = String::new();
    BufReader::new(stdout).read_line(&mut line).unwrap();
    serde_json::from_str(&line).unwrap_or_else(|e| panic!("not an answer ({e}): {line:?}"))
}

/// Whether the process has a handler for SIGTERM (its mask of caught signals).
fn catches_sigterm(pid: i32) -> bool {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let caught = status.lines().find_map(|l| l.strip_prefix("SigCgt:"));
    caught.is_some_and(|m| u64::from_str_radix(m.trim(), 16).is_ok_and(|m| m & (1 << 14) != 0))
}

/// The processes whose parent is `pid`.
fn children(pid: i32) -> Vec<i32> {
    let path = format!("/proc/{pid}/task/{pid}/children");
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .split_whitespace()
        .map(|p| p.parse().unwrap())
        .collect()
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &to.join(e.file_name()));
        } else {
            std::fs::copy(e.path(), to.join(e.file_name())).unwrap();
        }
    }
}
