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
use std::path::Path;

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
    worktree_agent_holds("edit").await;
}

/// A `full` agent neither: the kernel's git would run what it wrote with the
/// kernel's reach (its data dir), which `full` does not have.
#[tokio::test]
async fn a_full_worktree_agent_cannot_write_the_repositorys_config_hooks_or_refs() {
    worktree_agent_holds("full").await;
}

async fn worktree_agent_holds(profile: &str) {
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
               "permissions": {"profile": profile, "allow": ["shell"], "sandbox": "required"}}),
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

/// An edit agent in a plain repository, under a contract refusing its edits of
/// `secrets/*`, runs commands no pattern reads: git's config and hooks, the
/// denied folder, the git folder swapped for one of its own, `/dev/shm` shared
/// with another agent. Each fails and changes nothing, while its own work in
/// the folder, a commit included, goes on.
#[tokio::test]
async fn a_plain_repositorys_git_and_a_denied_folder_hold_against_the_shell() {
    let o = Outside::new();
    let dir = tempfile::tempdir().unwrap();
    let s = InProcess::start(dir.path()).await;
    let lead = s.lead(Proto::Legacy).await;
    let repo = o.dir.path().join("repo");
    std::fs::create_dir(repo.join("secrets")).unwrap();
    std::fs::write(repo.join("secrets/k.txt"), "keep me").unwrap();
    let shm = format!("/dev/shm/aw-agent-{}", std::process::id());
    let host = format!("/dev/shm/aw-host-{}", std::process::id());
    std::fs::write(&host, "the user's").unwrap();
    let cmd = |c: &str| ("run_command", json!({ "command": c }));
    let steps = [
        cmd("git config core.fsmonitor 'touch /tmp/x'; echo status $?"),
        cmd(
            "echo 'touch /tmp/x' > .git/hooks/pre-commit; chmod +x .git/hooks/pre-commit; echo status $?",
        ),
        cmd(
            "echo x > secrets/k.txt; echo y > secrets/new.txt; rm -f secrets/k.txt; echo status $?",
        ),
        cmd("mv .git .git-old; echo status $?"),
        cmd(&format!(
            "echo planted > {shm}; cat {shm} {host}; echo status $?"
        )),
        cmd(
            "echo made > w.txt && git add w.txt && git -c user.name=t -c user.email=t@t commit -qm w && echo committed",
        ),
    ];
    let llm = FakeLlm::start(Script::steps(&steps, "done")).await;
    let contract = json!({"name": "no-secrets", "then": {"action": "deny", "reason": "not ours"},
                          "when": {"event": "tool_request", "tool": "edit", "match": "secrets/*"}});
    call(&lead, "contract_set", contract).await.ok();
    let shell = json!({"profile": "edit", "allow": ["shell"]});
    new_sdk_in(&lead, "coder", &repo, &llm.url, shell.clone()).await;
    let said = run(&lead, "coder", &llm).await;
    // The machine's /dev/shm is left as it was, whatever is asserted next.
    let leaked = Path::new(&shm).exists();
    let _ = std::fs::remove_file(&shm);
    let _ = std::fs::remove_file(&host);
    o.unchanged();
    let git = repo.join(".git");
    let config = std::fs::read_to_string(git.join("config")).unwrap();
    assert!(!config.contains("fsmonitor"), "{config} {said:?}");
    assert!(!git.join("hooks/pre-commit").exists(), "{said:?}");
    let secret = std::fs::read_to_string(repo.join("secrets/k.txt"));
    assert_eq!(secret.ok().as_deref(), Some("keep me"), "{said:?}");
    assert!(!repo.join("secrets/new.txt").exists(), "{said:?}");
    assert!(!repo.join(".git-old").exists(), "{said:?}");
    // Its own /dev/shm: what it puts there stays there, the user's is not seen.
    assert!(said[4].contains("planted"), "{said:?}");
    assert!(!said[4].contains("the user's"), "{said:?}");
    assert!(!leaked, "{said:?}");
    assert!(
        said[5].contains("committed"),
        "the agent's own git failed: {said:?}"
    );
    let log = std::process::Command::new("git")
        .args(["log", "--name-only", "--format="])
        .current_dir(&repo)
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&log.stdout).contains("w.txt"));
    // Another agent's run does not see the first one's /dev/shm either.
    let llm2 = FakeLlm::start(Script::steps(
        &[cmd(&format!("cat {shm}; echo status $?"))],
        "done",
    ))
    .await;
    let other = o.dir.path().join("other");
    std::fs::create_dir(&other).unwrap();
    new_sdk_in(&lead, "other", &other, &llm2.url, shell).await;
    let said = run(&lead, "other", &llm2).await;
    assert!(!said[0].contains("planted"), "{said:?}");
    s.stop().await;
}

/// An edit agent in a plain repository makes `.git/commondir` (no mount holds
/// a file that did not exist), pointing at a repository of its own whose
/// config names an fsmonitor: the kernel removes it once the run is over and
/// says so, so the user's git (which obeys it, shown by putting it back) runs
/// nothing of the agent's.
#[tokio::test]
async fn a_commondir_the_run_made_is_removed_before_any_git_obeys_it() {
    let o = Outside::new();
    let dir = tempfile::tempdir().unwrap();
    let s = InProcess::start(dir.path()).await;
    let lead = s.lead(Proto::Legacy).await;
    let repo = o.dir.path().join("repo");
    let marker = dir.path().join("marker");
    let plant = format!(
        "mkdir -p evil/objects evil/refs && printf '[core]\\n\\trepositoryformatversion = 0\\n\\tfsmonitor = touch {}\\n' > evil/config && echo \"$PWD/evil\" > .git/commondir; echo status $?",
        marker.display()
    );
    let steps = [("run_command", json!({ "command": plant }))];
    let llm = FakeLlm::start(Script::steps(&steps, "done")).await;
    let shell = json!({"profile": "edit", "allow": ["shell"]});
    new_sdk_in(&lead, "coder", &repo, &llm.url, shell).await;
    let said = run(&lead, "coder", &llm).await;
    assert!(
        said[0].contains("status 0"),
        "the agent could not plant: {said:?}"
    );
    let commondir = repo.join(".git/commondir");
    assert!(!commondir.exists(), "{said:?}");
    let info = call(&lead, "agent_info", json!({"target": "coder"})).await;
    let info = format!("{info:?}");
    assert!(
        info.contains("removed .git/commondir the run made"),
        "{info}"
    );
    let status = || {
        std::process::Command::new("git")
            .args(["status", "--short"])
            .current_dir(&repo)
            .output()
            .unwrap()
    };
    status();
    assert!(!marker.exists(), "the user's git ran the agent's config");
    // What the removal prevented: the same file put back, the user's git obeys it.
    std::fs::write(&commondir, format!("{}\n", repo.join("evil").display())).unwrap();
    status();
    std::fs::remove_file(&commondir).unwrap();
    assert!(
        marker.exists(),
        "the planted config would not have run: the test shows nothing"
    );
    s.stop().await;
}

/// An edit agent in a plain repository whose contracts refuse its edits of
/// `secrets/*` and `src/keys/*` renames the folders above them and makes new
/// ones in their place, writes a submodule's config and a linked worktree's
/// `commondir`, and makes the hooks and info folders git lacked at the start: each
/// fails and changes nothing, while its own work in the folder goes on.
#[tokio::test]
async fn a_held_path_does_not_move_and_gits_other_folders_hold() {
    let o = Outside::new();
    let dir = tempfile::tempdir().unwrap();
    let s = InProcess::start(dir.path()).await;
    let lead = s.lead(Proto::Legacy).await;
    let repo = o.dir.path().join("repo");
    let held = [
        "secrets/k.txt",
        "src/keys/k.txt",
        ".git/modules/m/config",
        ".git/worktrees/w/commondir",
    ];
    for f in held {
        std::fs::create_dir_all(repo.join(f).parent().unwrap()).unwrap();
        std::fs::write(repo.join(f), "keep me").unwrap();
    }
    for d in [".git/hooks", ".git/info"] {
        let _ = std::fs::remove_dir_all(repo.join(d));
    }
    let cmd = |c: &str| ("run_command", json!({ "command": c }));
    let steps = [
        cmd("mv secrets secrets.old; mkdir -p secrets; echo EVIL > secrets/k.txt; echo status $?"),
        cmd("mv src src.old; mkdir -p src/keys; echo EVIL > src/keys/k.txt; echo status $?"),
        cmd(
            "echo EVIL > .git/modules/m/config; echo / > .git/worktrees/w/commondir; mkdir .git/worktrees/x; echo status $?",
        ),
        cmd(
            "mkdir -p .git/hooks .git/info; echo 'touch /tmp/x' > .git/hooks/post-commit; echo '* filter=x' > .git/info/attributes; echo status $?",
        ),
        cmd("echo made > mine.txt && echo wrote"),
    ];
    let llm = FakeLlm::start(Script::steps(&steps, "done")).await;
    for (name, glob) in [("no-secrets", "secrets/*"), ("no-keys", "src/keys/*")] {
        let contract = json!({"name": name, "then": {"action": "deny", "reason": "not ours"},
                              "when": {"event": "tool_request", "tool": "edit", "match": glob}});
        call(&lead, "contract_set", contract).await.ok();
    }
    let shell = json!({"profile": "edit", "allow": ["shell"]});
    new_sdk_in(&lead, "coder", &repo, &llm.url, shell).await;
    let said = run(&lead, "coder", &llm).await;
    o.unchanged();
    let read = |f: &str| std::fs::read_to_string(repo.join(f)).ok();
    for f in held {
        assert_eq!(read(f).as_deref(), Some("keep me"), "{f}: {said:?}");
    }
    for f in [
        "secrets.old",
        "src.old",
        ".git/worktrees/x",
        ".git/hooks/post-commit",
        ".git/info/attributes",
    ] {
        assert!(!repo.join(f).exists(), "{f}: {said:?}");
    }
    assert!(said[4].contains("wrote"), "{said:?}");
    assert_eq!(read("mine.txt").as_deref(), Some("made\n"));
    s.stop().await;
}

/// A contract glob matching more paths than a run's start holds is not cut
/// short in silence: a required run is refused naming it, a best-effort one
/// runs and says so.
#[tokio::test]
async fn a_glob_matching_too_many_paths_is_refused_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let s = InProcess::start(dir.path()).await;
    let lead = s.lead(Proto::Legacy).await;
    let work = tempfile::tempdir().unwrap();
    std::fs::create_dir(work.path().join("logs")).unwrap();
    for i in 0..101 {
        std::fs::write(work.path().join(format!("logs/{i}.log")), "x").unwrap();
    }
    let contract = json!({"name": "no-logs", "then": {"action": "deny", "reason": "not ours"},
                          "when": {"event": "tool_request", "tool": "edit", "match": "logs/*.log"}});
    call(&lead, "contract_set", contract).await.ok();
    let llm = FakeLlm::start(Script::text("done")).await;
    for (name, mode) in [("strict", "required"), ("lenient", "best_effort")] {
        let p = json!({"profile": "edit", "sandbox": mode});
        new_sdk_in(&lead, name, work.path(), &llm.url, p).await;
    }
    let r = ask(&lead, "strict", "go", 30).await;
    let text = r.to_string();
    assert_ne!(r["status"], "succeeded", "{r}");
    assert!(
        text.contains("logs/*.log") && text.contains("give the rule a folder"),
        "{r}"
    );
    let r = ask(&lead, "lenient", "go", 30).await;
    assert_eq!(r["status"], "succeeded", "{r}");
    s.stop().await;
}
