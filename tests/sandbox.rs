//! The OS sandbox through real runs: an sdk agent driven by a fake model, allowed
//! to run commands below `full`, tries what no command pattern can see (a script,
//! a Makefile, `python3 -c`, `tar --remove-files`, `mv`, `git rm` in another
//! repository, a symlink written through, `~/.ssh`, the kernel's data dir,
//! another agent's worktree, a loopback port of no one's): the sandbox refuses
//! each and the outside files stay, while work in its folder succeeds. A `read`
//! agent writes nothing at all; a required sandbox the machine cannot give is
//! refused with the missing feature and the fix.

use crate::common;
use common::fake_llm::{FakeLlm, Script};
use common::*;
use serde_json::{Value, json};
use std::path::Path;

/// One agent_ask; every tool result the model read, in order (from its last
/// call, which carries the whole conversation).
pub(crate) async fn run(lead: &Client, name: &str, llm: &FakeLlm) -> Vec<String> {
    let r = ask(lead, name, "go", 45).await;
    assert_eq!(r["status"], "succeeded", "{r}");
    let calls = llm.model_calls();
    let last = calls.last().expect("the model was called");
    let messages = last["body"]["messages"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    messages
        .iter()
        .filter_map(|m| m["content"].as_array().cloned())
        .flatten()
        .filter(|b| b["type"] == "tool_result")
        .map(|b| b["content"].to_string())
        .collect()
}

/// A place outside every agent's folder: its files, and a git repository.
pub(crate) struct Outside {
    pub(crate) dir: tempfile::TempDir,
}

impl Outside {
    pub(crate) fn new() -> Self {
        let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
        for f in [
            "victim.txt",
            "moved.txt",
            "tarred.txt",
            "py.txt",
            "make.txt",
            "script.txt",
        ] {
            std::fs::write(dir.path().join(f), "keep me").unwrap();
        }
        let repo = dir.path().join("repo");
        std::fs::create_dir(&repo).unwrap();
        std::fs::write(repo.join("tracked.txt"), "keep me").unwrap();
        let git = |args: &[&str]| {
            let ok = std::process::Command::new("git")
                .args(args)
                .current_dir(&repo)
                .output()
                .unwrap()
                .status
                .success();
            assert!(ok, "git {args:?}");
        };
        git(&["init", "-q"]);
        git(&["add", "."]);
        git(&[
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@t",
            "commit",
            "-qm",
            "x",
        ]);
        std::fs::create_dir(dir.path().join("home")).unwrap();
        Self { dir }
    }

    pub(crate) fn path(&self, rel: &str) -> String {
        self.dir.path().join(rel).display().to_string()
    }

    /// Every file is as it was.
    pub(crate) fn unchanged(&self) {
        for f in [
            "victim.txt",
            "moved.txt",
            "tarred.txt",
            "py.txt",
            "make.txt",
            "script.txt",
            "repo/tracked.txt",
        ] {
            let text = std::fs::read_to_string(self.dir.path().join(f));
            assert_eq!(text.ok().as_deref(), Some("keep me"), "{f} changed");
        }
        assert!(
            !self.dir.path().join("home/.ssh/authorized_keys").exists(),
            "~/.ssh/authorized_keys was written"
        );
    }
}

/// The commands an agent's model tries, each meant to change or read what it must not.
fn attempts(o: &Outside, data_dir: &Path, other: &Path, port: u16) -> Vec<String> {
    vec![
        format!(
            "printf 'rm -f {}\\n' > del.sh && sh del.sh",
            o.path("script.txt")
        ),
        format!(
            "printf 'x:\\n\\trm -f {}\\n' > Makefile && make x",
            o.path("make.txt")
        ),
        format!(
            "python3 -c \"import os; os.remove('{}')\"",
            o.path("py.txt")
        ),
        format!("tar --remove-files -cf t.tar {}", o.path("tarred.txt")),
        format!("mv {} ./stolen.txt", o.path("moved.txt")),
        format!("git -C {} rm -q tracked.txt", o.path("repo")),
        format!(
            "ln -s {} link.txt && echo gone > link.txt",
            o.path("victim.txt")
        ),
        format!(
            "mkdir -p {h}/.ssh && echo key >> {h}/.ssh/authorized_keys",
            h = o.path("home")
        ),
        format!("cat {}/kernel.port > leak-data.txt", data_dir.display()),
        format!("ls {} > leak-other.txt", other.display()),
        format!(
            "python3 -c \"import socket; socket.create_connection(('127.0.0.1', {port}), 2); open('leak-port.txt','w').write('x')\""
        ),
        "echo made > inside.txt && mkdir -p d && mv inside.txt d/".into(),
    ]
}

/// Nothing outside changed, nothing hidden was read, no port reached (where the
/// network is held), and the work inside the folder was done.
fn held(o: &Outside, work: &Path, said: &str) {
    o.unchanged();
    for leak in ["leak-data.txt", "leak-other.txt", "leak-port.txt"] {
        let len = std::fs::metadata(work.join(leak)).map_or(0, |m| m.len());
        assert_eq!(len, 0, "{leak} has what it must not: {said}");
    }
    assert_eq!(
        std::fs::read_to_string(work.join("d/inside.txt"))
            .ok()
            .as_deref(),
        Some("made\n"),
        "work inside the folder failed: {said}"
    );
}

async fn sdk_agent(
    lead: &Client,
    name: &str,
    work: &Path,
    llm: &FakeLlm,
    o: &Outside,
    permissions: Value,
) {
    call(
        lead,
        "agent_new",
        json!({"name": name, "backend": "sdk", "model": "claude-sonnet-4-5",
               "env": {"ANTHROPIC_BASE_URL": llm.url, "ANTHROPIC_API_KEY": "sk-test",
                       "HOME": o.path("home")},
               "cwd": work.display().to_string(), "permissions": permissions}),
    )
    .await
    .ok();
}

#[tokio::test]
async fn an_edit_agents_commands_change_nothing_outside_its_folder() {
    let o = Outside::new();
    let dir = tempfile::tempdir().unwrap();
    let s = InProcess::start(dir.path()).await;
    let lead = s.lead(Proto::Legacy).await;
    // Another agent, with a folder of its own in the data dir.
    call(
        &lead,
        "agent_new",
        json!({"name": "other", "backend": "mock"}),
    )
    .await
    .ok();
    let other = dir.path().join("workspaces");
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let work = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let tries = attempts(&o, dir.path(), &other, port);
    let steps: Vec<(&str, Value)> = tries
        .iter()
        .map(|c| ("run_command", json!({"command": c})))
        .collect();
    let llm = FakeLlm::start(Script::steps(&steps, "done")).await;
    let perms = json!({"profile": "edit", "allow": ["shell"]});
    sdk_agent(&lead, "builder", work.path(), &llm, &o, perms).await;
    let said = run(&lead, "builder", &llm).await;
    assert_eq!(said.len(), tries.len(), "{said:?}");
    held(&o, work.path(), &format!("{said:?}"));
    drop(listener);
    s.stop().await;
}

#[tokio::test]
async fn a_read_agent_writes_nothing_even_in_its_folder() {
    let o = Outside::new();
    let dir = tempfile::tempdir().unwrap();
    let s = InProcess::start(dir.path()).await;
    let lead = s.lead(Proto::Legacy).await;
    let work = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    std::fs::write(work.path().join("mine.txt"), "keep me").unwrap();
    let steps = [
        (
            "run_command",
            json!({"command": "echo x > new.txt; rm -f mine.txt; echo y >> mine.txt"}),
        ),
        (
            "run_command",
            json!({"command": format!("rm -f {}", o.path("victim.txt"))}),
        ),
        (
            "run_command",
            json!({"command": "cat mine.txt && echo TMP > \"$TMPDIR/t\" && cat \"$TMPDIR/t\""}),
        ),
    ];
    let llm = FakeLlm::start(Script::steps(&steps, "done")).await;
    let perms = json!({"profile": "read", "allow": ["shell"]});
    sdk_agent(&lead, "reader", work.path(), &llm, &o, perms).await;
    let said = run(&lead, "reader", &llm).await.join("\n");
    o.unchanged();
    assert!(!work.path().join("new.txt").exists(), "{said}");
    assert_eq!(
        std::fs::read_to_string(work.path().join("mine.txt")).unwrap(),
        "keep me"
    );
    // It still reads its folder and writes its own temporary folder.
    assert!(said.contains("keep meTMP"), "{said}");
    s.stop().await;
}

#[tokio::test]
async fn a_required_sandbox_the_machine_lacks_is_refused_with_the_fix() {
    let dir = tempfile::tempdir().unwrap();
    let s = InProcess::start(dir.path()).await;
    let lead = s.lead(Proto::Legacy).await;
    let work = tempfile::tempdir().unwrap();
    let llm = FakeLlm::start(Script::text("done")).await;
    call(
        &lead,
        "agent_new",
        json!({"name": "strict", "backend": "sdk", "model": "claude-sonnet-4-5",
               "env": {"ANTHROPIC_BASE_URL": llm.url, "ANTHROPIC_API_KEY": "sk-test",
                       "SANDBOX_TEST_ABI": "99"},
               "cwd": work.path().display().to_string(), "permissions": "edit"}),
    )
    .await
    .ok();
    let text = call(
        &lead,
        "agent_ask",
        json!({"target": "strict", "message": "go", "wait_seconds": 30}),
    )
    .await
    .err();
    for word in ["Landlock ABI 99", "permissions.sandbox", "best_effort"] {
        assert!(text.contains(word), "{word}: {text}");
    }
    // The readiness report says what this machine supports.
    let b = call(&lead, "backend_list", json!({"backends": ["mock"]}))
        .await
        .ok();
    let support = b["sandbox"].as_str().unwrap_or_default();
    assert!(support.contains("Landlock"), "{b}");
    // best_effort runs it with what the machine has.
    new_sdk_in(
        &lead,
        "lenient",
        work.path(),
        &llm.url,
        json!({"profile": "edit", "sandbox": "best_effort"}),
    )
    .await;
    let r = ask(&lead, "lenient", "go", 30).await;
    assert_eq!(r["status"], "succeeded", "{r}");
    s.stop().await;
}

#[tokio::test]
async fn a_disk_filler_and_a_cpu_burner_stop_at_the_agents_limits() {
    let o = Outside::new();
    let dir = tempfile::tempdir().unwrap();
    let s = InProcess::start(dir.path()).await;
    let lead = s.lead(Proto::Legacy).await;
    let work = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let steps = [
        (
            "run_command",
            json!({"command": "head -c 4194304 /dev/zero > big.bin; echo status $?"}),
        ),
        (
            "run_command",
            json!({"command": "python3 -c 'while True: pass'; echo status $?", "timeout_seconds": 30}),
        ),
    ];
    let llm = FakeLlm::start(Script::steps(&steps, "done")).await;
    let perms =
        json!({"profile": "edit", "allow": ["shell"], "limits": {"file_mb": 1, "cpu_s": 1}});
    sdk_agent(&lead, "filler", work.path(), &llm, &o, perms).await;
    let said = run(&lead, "filler", &llm).await;
    let size = std::fs::metadata(work.path().join("big.bin"))
        .unwrap()
        .len();
    assert_eq!(size, 1024 * 1024, "the file grew past its limit: {said:?}");
    // 128 + SIGXFSZ (25), 128 + SIGXCPU (24): each killed by its limit's signal.
    assert!(said[0].contains("status 153"), "{said:?}");
    assert!(said[1].contains("status 152"), "{said:?}");
    // agent_info shows the limits the run had.
    let i = info(&lead, "filler").await;
    assert_eq!(i["agent"]["permissions"]["limits"]["file_mb"], 1, "{i}");
    s.stop().await;
}

/// The same attempts through a real CLI's own shell tool (the fake model asks for
/// each command in turn): the sandbox holds whatever runs the command.
async fn cli_commands_held(backend: &str) {
    let Some(bin) = common::clis::cli_bin() else {
        return;
    };
    let o = Outside::new();
    let dir = tempfile::tempdir().unwrap();
    let s = HttpServer::start(dir.path()).await;
    let lead = s.lead(Proto::Legacy).await;
    let other = dir.path().join("workspaces");
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let work = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let tries = attempts(&o, dir.path(), &other, port);
    let step = |c: &String| match backend {
        "claude" => ("Bash", json!({"command": c, "description": "run it"})),
        "gemini" => (
            "run_shell_command",
            json!({"command": c, "description": "run it"}),
        ),
        "opencode" => ("bash", json!({"command": c, "description": "run it"})),
        _ => ("exec_command", json!({"cmd": c})),
    };
    let steps: Vec<(&str, Value)> = tries.iter().map(step).collect();
    let llm = FakeLlm::start(Script::steps(&steps, "done")).await;
    let home = Path::new(&o.path("home")).to_owned();
    let env = common::clis::cli_env(backend, &bin, &home, &llm.url);
    // Codex allows no shell below full; under edit its commands run anyway.
    let permissions = match backend {
        "codex" => json!("edit"),
        _ => json!({"profile": "edit", "allow": ["shell"]}),
    };
    let mut args = json!({"name": "builder", "backend": backend, "env": env,
                          "cwd": work.path().display().to_string(), "permissions": permissions});
    if let Some(m) = common::clis::model_for(backend) {
        args["model"] = json!(m);
    }
    call(&lead, "agent_new", args).await.ok();
    let r = ask_long(&lead, "builder", "go", 180).await;
    assert_eq!(r["status"], "succeeded", "{backend}: {r}");
    let calls = llm.model_calls().len();
    assert!(
        calls > tries.len(),
        "{backend}: the model was called {calls} times"
    );
    // OpenCode's own server is on the port the kernel chose for it: the rest is held.
    held(&o, work.path(), backend);
    drop(listener);
    s.stop().await;
}

#[tokio::test]
#[cfg_attr(
    not(heavy),
    ignore = "heavy: the worker CLIs from npm (AGENT_WORKER_HEAVY=1, scripts/interop-setup)"
)]
async fn claude_codes_commands_are_held() {
    cli_commands_held("claude").await;
}

#[tokio::test]
#[cfg_attr(
    not(heavy),
    ignore = "heavy: the worker CLIs from npm (AGENT_WORKER_HEAVY=1, scripts/interop-setup)"
)]
async fn codex_commands_are_held() {
    cli_commands_held("codex").await;
}

#[tokio::test]
#[cfg_attr(
    not(heavy),
    ignore = "heavy: the worker CLIs from npm (AGENT_WORKER_HEAVY=1, scripts/interop-setup)"
)]
async fn gemini_cli_commands_are_held() {
    cli_commands_held("gemini").await;
}

#[tokio::test]
#[cfg_attr(
    not(heavy),
    ignore = "heavy: the worker CLIs from npm (AGENT_WORKER_HEAVY=1, scripts/interop-setup)"
)]
async fn opencode_commands_are_held() {
    cli_commands_held("opencode").await;
}

/// A classic fork bomb under the default limits: the run's processes limit
/// stops it (a pids cgroup of the run's own where the machine has one, which
/// holds root too), the run ends naming the limit, nothing of it is left, and the
/// kernel answers a tool call within a second meanwhile.
#[tokio::test]
async fn a_fork_bomb_stops_at_the_default_process_limit_and_the_kernel_answers() {
    let o = Outside::new();
    let dir = tempfile::tempdir().unwrap();
    let s = InProcess::start(dir.path()).await;
    let lead = s.lead(Proto::Legacy).await;
    let b = call(&lead, "backend_list", json!({"backends": ["mock"]}))
        .await
        .ok();
    let cgroup = b["sandbox"]
        .as_str()
        .unwrap_or_default()
        .contains("pids cgroup");
    let work = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let bomb = "bomb() { bomb | bomb & }; bomb; sleep 30";
    let steps = [(
        "run_command",
        json!({"command": bomb, "timeout_seconds": 15}),
    )];
    let llm = FakeLlm::start(Script::steps(&steps, "done")).await;
    let perms = json!({"profile": "edit", "allow": ["shell"]});
    sdk_agent(&lead, "bomber", work.path(), &llm, &o, perms).await;
    // Another client asks the kernel something, again and again, while it runs.
    let other = s.lead(Proto::Legacy).await;
    let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let d = done.clone();
    let probe = tokio::spawn(async move {
        let (mut slowest, mut calls) = (std::time::Duration::ZERO, 0);
        while !d.load(std::sync::atomic::Ordering::Relaxed) {
            let t = std::time::Instant::now();
            call(&other, "agent_list", json!({})).await.ok();
            slowest = slowest.max(t.elapsed());
            calls += 1;
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        }
        (slowest, calls)
    });
    let r = ask(&lead, "bomber", "go", 45).await;
    done.store(true, std::sync::atomic::Ordering::Relaxed);
    let (slowest, calls) = probe.await.unwrap();
    assert!(
        calls > 0 && slowest < std::time::Duration::from_secs(1),
        "{slowest:?} {r}"
    );
    let run_id = r["run_id"].as_str().unwrap_or_default().to_owned();
    if cgroup {
        assert_eq!(r["status"], "failed", "{r}");
        let error = r["error"].as_str().unwrap_or_default();
        assert!(error.contains("processes limit (512"), "{r}");
    }
    // No process is left of the run: none on the machine is in its cgroup.
    let left: Vec<_> = std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter(|e| {
            std::fs::read_to_string(e.path().join("cgroup")).is_ok_and(|c| c.contains(&run_id))
        })
        .map(|e| e.file_name())
        .collect();
    assert!(!run_id.is_empty() && left.is_empty(), "{left:?} {r}");
    s.stop().await;
}
