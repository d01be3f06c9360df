//! The OS sandbox against what an agent plants or is given: a `.git` file of its
//! own pointing at `/`, a grant of a folder that holds the kernel's data dir,
//! `CODEX_HOME` in the data dir, an abstract socket, `SSH_AUTH_SOCK`; and a coder
//! in a worktree writing its repository's config, hooks or refs. Each opens
//! nothing, while the agent's own work (and the kernel's commit of it) goes on.

use crate::common;
use crate::sandbox::{Outside, run};
use common::fake_llm::{FakeLlm, Script};
use common::*;
use serde_json::json;
use std::os::linux::net::SocketAddrExt;

/// What the agent wrote in its folder last run, or what its definition names,
/// never opens a hidden or outside place: a `.git` file pointing at `/`, a
/// grant of a folder that holds the kernel's data dir, `CODEX_HOME` in the data
/// dir, `XDG_DATA_HOME` outside.
#[tokio::test]
async fn what_an_agent_planted_or_was_given_opens_nothing_hidden() {
    let o = Outside::new();
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let data = dir.path().join("data");
    let s = InProcess::start(&data).await;
    let lead = s.lead(Proto::Legacy).await;
    let work = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    // A desktop's bus, an SSH agent: an abstract socket and a variable naming one.
    let abstract_name = format!("aw-test-{}", std::process::id());
    let addr = std::os::unix::net::SocketAddr::from_abstract_name(&abstract_name).unwrap();
    let _bus = std::os::unix::net::UnixListener::bind_addr(&addr).unwrap();
    let bus = abstract_name.as_str();
    let steps = [
        (
            "run_command",
            json!({"command": "printf 'gitdir: ./g\\n' > .git && mkdir -p g && echo / > g/commondir"}),
        ),
        (
            "run_command",
            json!({"command": format!(
                "rm -f {v}; ls {d} > leak-data.txt; echo x > {d}/planted.txt",
                v = o.path("victim.txt"),
                d = data.display()
            )}),
        ),
        (
            "run_command",
            json!({"command": format!(
                "python3 -c \"import socket; s=socket.socket(socket.AF_UNIX); \
                 s.connect('\\0{bus}'); print('abstract reached')\"; \
                 echo ssh=${{SSH_AUTH_SOCK:-none}}"
            )}),
        ),
    ];
    let llm = FakeLlm::start(Script::every_run(&steps, "done")).await;
    let env = json!({"ANTHROPIC_BASE_URL": llm.url, "ANTHROPIC_API_KEY": "sk-test",
                     "HOME": o.path("home"), "CODEX_HOME": data.display().to_string(),
                     "SSH_AUTH_SOCK": "/tmp/agent.sock",
                     "XDG_DATA_HOME": o.path("")});
    let above = format!("edit:{}", dir.path().display());
    let refused = call(
        &lead,
        "agent_new",
        json!({"name": "up", "backend": "sdk", "permissions": {"allow": ["read:~/../.."]}}),
    )
    .await
    .err();
    assert!(refused.contains("may not hold `..`"), "{refused}");
    call(
        &lead,
        "agent_new",
        json!({"name": "planter", "backend": "sdk", "model": "claude-sonnet-4-5", "env": env,
               "cwd": work.path().display().to_string(),
               "permissions": {"profile": "edit", "allow": ["shell", above]}}),
    )
    .await
    .ok();
    // The first run plants; the second would have been given what it planted.
    run(&lead, "planter", &llm).await;
    let said = run(&lead, "planter", &llm).await;
    o.unchanged();
    let leaked = std::fs::metadata(work.path().join("leak-data.txt")).map_or(0, |m| m.len());
    assert_eq!(leaked, 0, "{said:?}");
    assert!(!data.join("planted.txt").exists(), "{said:?}");
    // No abstract socket outside, no session variables.
    let last = said.last().cloned().unwrap_or_default();
    assert!(last.contains("ssh=none"), "{said:?}");
    assert!(!last.contains("abstract reached"), "{said:?}");
    s.stop().await;
}

/// An edit agent in a worktree commits its work, but cannot write what the
/// kernel's own git obeys: the repository's config, hooks and other refs.
#[tokio::test]
async fn a_worktree_agent_cannot_write_the_repositorys_config_hooks_or_refs() {
    let o = Outside::new();
    let dir = tempfile::tempdir().unwrap();
    let s = InProcess::start(dir.path()).await;
    let lead = s.lead(Proto::Legacy).await;
    let common = "$(git rev-parse --git-common-dir)";
    let steps = [
        (
            "run_command",
            json!({"command": format!("git config --file {common}/config core.fsmonitor 'touch /tmp/x'; echo x > {common}/hooks/post-commit; git update-ref refs/heads/evil HEAD; echo tried")}),
        ),
        (
            "run_command",
            json!({"command": "echo made > w.txt && git add w.txt && echo added"}),
        ),
    ];
    let llm = FakeLlm::start(Script::steps(&steps, "done")).await;
    call(
        &lead,
        "agent_new",
        json!({"name": "wt", "backend": "sdk", "model": "claude-sonnet-4-5",
               "env": {"ANTHROPIC_BASE_URL": llm.url, "ANTHROPIC_API_KEY": "sk-test",
                       "HOME": o.path("home")},
               "cwd": o.path("repo"), "workspace": "worktree",
               "permissions": {"profile": "edit", "allow": ["shell"]}}),
    )
    .await
    .ok();
    let said = run(&lead, "wt", &llm).await;
    assert!(
        said[1].contains("added"),
        "the agent's own git failed: {said:?}"
    );
    let git = o.dir.path().join("repo/.git");
    let config = std::fs::read_to_string(git.join("config")).unwrap();
    assert!(!config.contains("fsmonitor"), "{config}");
    assert!(!git.join("hooks/post-commit").exists(), "{said:?}");
    assert!(!git.join("refs/heads/evil").exists(), "{said:?}");
    // The kernel committed the turn on the agent's branch.
    let log = std::process::Command::new("git")
        .args(["log", "--all", "--name-only", "--format="])
        .current_dir(o.dir.path().join("repo"))
        .output()
        .unwrap();
    let log = String::from_utf8_lossy(&log.stdout);
    assert!(log.contains("w.txt"), "{log}");
    s.stop().await;
}
