//! `workspace: worktree`: each agent works in a git worktree of its own, on its own
//! branch, made outside the user's tree; every run ends in a commit; deleting the
//! agent keeps its branch. Real git, sdk agents driven by the fake model.

use crate::common;

use common::repo::*;
use common::*;
use serde_json::json;
use std::path::Path;

#[tokio::test]
async fn two_coders_in_worktrees_never_see_each_others_edits() {
    let repo = repository();
    let (llm_a, llm_b) = (writer(42).await, writer(43).await);
    let dir = tempfile::tempdir().unwrap();
    let s = InProcess::start(dir.path()).await;
    let lead = s.lead(Proto::Modern).await;
    let made = coder(&lead, "ada", repo.path(), &llm_a.url).await;
    assert_eq!(made["agent"]["workspace"]["mode"], "worktree", "{made}");
    assert_eq!(made["agent"]["workspace"]["branch"], "aw/global-main/ada");
    coder(&lead, "bob", repo.path(), &llm_b.url).await;
    // Both at once.
    let (a, b) = tokio::join!(
        ask(&lead, "ada", "make it 42", 45),
        ask(&lead, "bob", "make it 43", 45)
    );
    assert_eq!(a["status"], "succeeded", "{a}");
    assert_eq!(b["status"], "succeeded", "{b}");

    for (name, answer) in [("ada", 42), ("bob", 43)] {
        let i = info(&lead, name).await;
        let wt = &i["worktree"];
        let folder = Path::new(wt["path"].as_str().unwrap());
        assert!(
            !folder.starts_with(repo.path()),
            "a worktree in the user's tree: {wt}"
        );
        let text = std::fs::read_to_string(folder.join("lib.rs")).unwrap();
        assert!(text.contains(&answer.to_string()), "{name} sees {text}");
        assert_eq!(wt["commits"], 1, "{i}");
        assert!(wt["disk_bytes"].as_u64().unwrap() > 20, "{wt}");
        assert_eq!(
            git(folder, &["status", "--porcelain"]),
            "",
            "left uncommitted"
        );
        let head = git(
            repo.path(),
            &["rev-parse", &format!("aw/global-main/{name}")],
        );
        assert_eq!(wt["head"], head);
        assert_eq!(
            i["runs"][0]["commit"], head,
            "the run names its commit: {i}"
        );
        let message = git(repo.path(), &["log", "-1", "--format=%an%n%B", &head]);
        // The ask's message may wake the run before the ask starts it: either trigger.
        let subject = message.lines().nth(1).unwrap_or_default();
        let said = format!("answer is {answer} now");
        assert!(
            [
                format!("{name}: ask: {said}"),
                format!("{name}: message: {said}")
            ]
            .contains(&subject.to_owned()),
            "{message}"
        );
        assert!(
            message.starts_with(&format!("{name}\n")),
            "the agent is the author: {message}"
        );
        assert!(message.contains("Agent-Worker-Run: "), "{message}");
    }
    // The user's own checkout is untouched.
    let mine = std::fs::read_to_string(repo.path().join("lib.rs")).unwrap();
    assert!(mine.contains("41"), "{mine}");
    assert_eq!(git(repo.path(), &["status", "--porcelain"]), "");
    s.stop().await;
}

#[tokio::test]
async fn a_worktree_needs_a_repository_and_a_free_branch() {
    let plain = tempfile::tempdir().unwrap();
    let repo = repository();
    let dir = tempfile::tempdir().unwrap();
    let s = InProcess::start(dir.path()).await;
    let lead = s.lead(Proto::Legacy).await;
    let e = call(
        &lead,
        "agent_new",
        json!({"name": "ada", "backend": "mock", "cwd": plain.path().display().to_string(),
               "workspace": "worktree"}),
    )
    .await
    .err();
    assert!(
        e.contains("workspace.repo") && e.contains("git init"),
        "{e}"
    );
    let e = call(
        &lead,
        "agent_new",
        json!({"name": "ada", "backend": "mock", "workspace": {"mode": "sandbox"}}),
    )
    .await
    .err();
    assert!(e.contains("workspace.mode"), "{e}");
    // Refused means not made: the name is free again.
    let list = call(&lead, "agent_list", json!({})).await.ok();
    assert_eq!(list["agents"], json!([]), "{list}");
    git(repo.path(), &["branch", "taken"]);
    let e = call(
        &lead,
        "agent_new",
        json!({"name": "ada", "backend": "mock",
               "workspace": {"repo": repo.path().display().to_string(), "branch": "taken"}}),
    )
    .await
    .err();
    assert!(
        e.contains("branch taken already exists") && e.contains("branch -D"),
        "{e}"
    );
    let e = call(
        &lead,
        "agent_new",
        json!({"name": "ada", "backend": "external", "cwd": repo.path().display().to_string(),
               "workspace": "worktree"}),
    )
    .await
    .err();
    assert!(e.contains("workspace") && e.contains("no runs"), "{e}");
    s.stop().await;
}

#[tokio::test]
async fn deleting_keeps_the_branch_and_discard_removes_it() {
    let (repo, lead, s, keep) = one_coder(Proto::Legacy).await;
    let r = ask(&lead, "ada", "make it 42", 45).await;
    assert_eq!(r["status"], "succeeded", "{r}");
    let folder = folder_of(&lead, "ada").await;
    // Something left after the run is committed as the agent goes.
    std::fs::write(Path::new(&folder).join("notes.md"), "half done\n").unwrap();
    let d = call(&lead, "agent_delete", json!({"target": "ada"}))
        .await
        .ok();
    let said = d["worktree"].as_str().unwrap();
    assert!(
        said.contains("aw/global-main/ada is kept") && said.contains("2 commits"),
        "{said}"
    );
    assert!(!Path::new(&folder).exists(), "the worktree folder stays");
    let files = git(
        repo.path(),
        &["ls-tree", "--name-only", "aw/global-main/ada"],
    );
    assert!(files.contains("notes.md"), "{files}");

    // The branch is taken until discarded: a new agent of the name says so.
    let e = coder_err(&lead, repo.path()).await;
    assert!(e.contains("already exists"), "{e}");
    git(repo.path(), &["branch", "-D", "aw/global-main/ada"]);
    coder(&lead, "ada", repo.path(), &keep.0.url).await;
    let d = call(
        &lead,
        "agent_delete",
        json!({"target": "ada", "discard": true}),
    )
    .await
    .ok();
    assert!(d["worktree"].as_str().unwrap().contains("discarded"), "{d}");
    let branches = git(repo.path(), &["branch", "--list", "aw/*"]);
    assert_eq!(branches, "", "the branch is gone");
    let e = call(&lead, "agent_new", json!({"name": "m", "backend": "mock"})).await;
    e.ok();
    let e = call(
        &lead,
        "agent_delete",
        json!({"target": "m", "discard": true}),
    )
    .await
    .err();
    assert!(e.contains("no worktree"), "{e}");
    s.stop().await;
}

async fn coder_err(lead: &Client, repo: &Path) -> String {
    call(
        lead,
        "agent_new",
        json!({"name": "ada", "backend": "sdk", "model": "claude-sonnet-4-5",
               "cwd": repo.display().to_string(), "workspace": "worktree"}),
    )
    .await
    .err()
}

/// What a run killed mid-way left in the worktree is committed at the next start
/// (the kernel killed with SIGKILL while the worktree has edits).
#[tokio::test]
async fn a_restart_after_kill_9_commits_what_was_left() {
    let repo = repository();
    let dir = tempfile::tempdir().unwrap();
    let s = HttpServer::start(dir.path()).await;
    let lead = s.lead(Proto::Legacy).await;
    coder(&lead, "ada", repo.path(), "http://127.0.0.1:9").await;
    let folder = folder_of(&lead, "ada").await;
    std::fs::write(
        Path::new(&folder).join("lib.rs"),
        "fn answer() -> u32 { 44 }\n",
    )
    .unwrap();
    drop(lead);
    s.kill().await;

    let s = HttpServer::start(dir.path()).await;
    let lead = s.lead(Proto::Legacy).await;
    let log = last_commit(repo.path(), "aw/global-main/ada");
    assert!(log.starts_with("ada\nada: recovered"), "{log}");
    assert_eq!(info(&lead, "ada").await["worktree"]["commits"], 1);
    s.stop().await;
}

/// A workflow's agents get worktrees from the YAML (the repository is the file's
/// folder), a second team run (another tag) gets its own, and a worktree no agent
/// has any more (the YAML run again without it) is removed at the next start, its
/// branch kept.
#[tokio::test]
async fn workflow_agents_get_worktrees_of_their_own_run() {
    let repo = repository();
    let yaml = |workspace: &str| {
        format!(
            "name: pair\nagents:\n  ada:\n    backend: mock\n    {workspace}\n    mock: [{{reply: done}}]\nkickoff: \"@ada go\"\n"
        )
    };
    let file = repo.path().join("team.yaml");
    std::fs::write(&file, yaml("workspace: worktree")).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let s = HttpServer::start(dir.path()).await;
    let lead = s.lead(Proto::Legacy).await;
    let f = file.display().to_string();
    for tag in ["one", "two"] {
        let r = call(
            &lead,
            "workflow_run",
            json!({"file": f, "tag": tag, "wait_seconds": 30}),
        )
        .await
        .ok();
        assert_eq!(r["status"], "completed", "{r}");
        let i = info(&lead, &format!("ada@pair:{tag}")).await;
        assert_eq!(i["worktree"]["branch"], format!("aw/pair-{tag}/ada"), "{i}");
        assert_eq!(i["worktree"]["commits"], 0, "a mock writes nothing: {i}");
    }
    let one = folder_of(&lead, "ada@pair:one").await;
    std::fs::write(Path::new(&one).join("draft.md"), "kept\n").unwrap();
    // Run again without a worktree: the old one belongs to no agent now.
    std::fs::write(&file, yaml("cwd: .")).unwrap();
    let r = call(
        &lead,
        "workflow_run",
        json!({"file": f, "tag": "one", "wait_seconds": 30}),
    )
    .await
    .ok();
    assert_eq!(r["status"], "completed", "{r}");
    assert!(info(&lead, "ada@pair:one").await.get("worktree").is_none());
    drop(lead);
    s.kill().await;
    let s = HttpServer::start(dir.path()).await;
    let lead = s.lead(Proto::Legacy).await;
    assert!(
        !Path::new(&one).exists(),
        "the orphan worktree was removed at start"
    );
    let files = git(repo.path(), &["ls-tree", "--name-only", "aw/pair-one/ada"]);
    assert!(
        files.contains("draft.md"),
        "its leftovers were committed first: {files}"
    );
    let two = info(&lead, "ada@pair:two").await;
    assert!(two["worktree"].get("error").is_none(), "{two}");
    let stop = call(&lead, "workflow_stop", json!({"workflow": "@pair:two"}))
        .await
        .ok();
    let said = stop["branches"][0].as_str().unwrap_or_default();
    assert!(
        said.contains("aw/pair-two/ada is kept") && said.contains("discard: true"),
        "{stop}"
    );
    s.stop().await;
}

/// The worktree's `.git` file is the agent's to write: a rewritten one must not
/// send the kernel's commit to the user's checkout.
#[tokio::test]
async fn a_rewritten_dot_git_does_not_move_the_commit() {
    let (repo, lead, s, _keep) = one_coder(Proto::Legacy).await;
    let folder = folder_of(&lead, "ada").await;
    let main_git = repo.path().join(".git");
    std::fs::write(
        Path::new(&folder).join(".git"),
        format!("gitdir: {}\n", main_git.display()),
    )
    .unwrap();
    let r = ask(&lead, "ada", "make it 42", 45).await;
    assert_eq!(r["status"], "succeeded", "{r}");
    assert_eq!(
        git(repo.path(), &["log", "--format=%s", "main"]),
        "first",
        "main moved"
    );
    assert_eq!(
        git(repo.path(), &["status", "--porcelain"]),
        "",
        "the user's index changed"
    );
    let on_branch = git(repo.path(), &["show", "aw/global-main/ada:lib.rs"]);
    assert!(on_branch.contains("42"), "{on_branch}");
    s.stop().await;
}

/// shared -> worktree -> shared -> worktree: leaving keeps the branch, coming back
/// takes it up again; a repository that vanished does not keep an agent from
/// being deleted.
#[tokio::test]
async fn an_agent_moves_in_and_out_of_its_worktree() {
    let repo = repository();
    let dir = tempfile::tempdir().unwrap();
    let s = InProcess::start(dir.path()).await;
    let lead = s.lead(Proto::Legacy).await;
    let cwd = repo.path().display().to_string();
    call(
        &lead,
        "agent_new",
        json!({"name": "ada", "backend": "mock", "cwd": cwd}),
    )
    .await
    .ok();
    assert!(info(&lead, "ada").await.get("worktree").is_none());
    let update = |ws: &'static str| {
        call(
            &lead,
            "agent_update",
            json!({"target": "ada", "workspace": ws}),
        )
    };
    let u = update("worktree").await.ok();
    assert_eq!(
        u["agent"]["workspace"]["branch"], "aw/global-main/ada",
        "{u}"
    );
    let folder = folder_of(&lead, "ada").await;
    std::fs::write(Path::new(&folder).join("plan.md"), "step 1\n").unwrap();
    update("shared").await.ok();
    assert!(!Path::new(&folder).exists(), "the worktree went");
    let files = git(
        repo.path(),
        &["ls-tree", "--name-only", "aw/global-main/ada"],
    );
    assert!(files.contains("plan.md"), "committed as it left: {files}");
    update("worktree").await.ok();
    let back = std::fs::read_to_string(Path::new(&folder).join("plan.md")).unwrap();
    assert_eq!(back, "step 1\n", "its branch is taken up again");
    // The repository goes away: deleting the agent still works, and says what is left.
    let gone = tempfile::tempdir().unwrap();
    std::fs::rename(repo.path(), gone.path().join("moved")).unwrap();
    let d = call(&lead, "agent_delete", json!({"target": "ada"}))
        .await
        .ok();
    let said = d["worktree"].as_str().unwrap();
    assert!(
        said.contains("could not be removed") && said.contains("left as it was"),
        "{said}"
    );
    s.stop().await;
}

/// A workflow start refused at its second agent's worktree discards the first
/// agent's new worktree and branch, so the corrected file runs.
#[tokio::test]
async fn a_refused_start_leaves_no_branch_behind() {
    let repo = repository();
    let yaml = |base: &str| {
        format!(
            "name: duo\nagents:\n  ada:\n    backend: mock\n    workspace: worktree\n  bob:\n    backend: mock\n    workspace: {{ base: {base} }}\nkickoff: \"@ada @bob go\"\n"
        )
    };
    let file = repo.path().join("duo.yaml");
    std::fs::write(&file, yaml("no-such-ref")).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let s = InProcess::start(dir.path()).await;
    let lead = s.lead(Proto::Legacy).await;
    let f = file.display().to_string();
    let e = call(
        &lead,
        "workflow_run",
        json!({"file": f, "wait_seconds": 30}),
    )
    .await
    .err();
    assert!(
        e.contains("agents.bob.workspace.base") && e.contains("Nothing was started"),
        "{e}"
    );
    assert_eq!(
        git(repo.path(), &["branch", "--list", "aw/*"]),
        "",
        "a branch was left"
    );
    std::fs::write(&file, yaml("main")).unwrap();
    let r = call(
        &lead,
        "workflow_run",
        json!({"file": f, "wait_seconds": 30}),
    )
    .await
    .ok();
    assert_eq!(r["status"], "completed", "{r}");
    s.stop().await;
}

/// The kernel killed (SIGKILL) while a worktree agent's run is in progress and
/// its edits are in the folder: after the restart the run is lost, its worker is
/// gone, and the edits are committed on the agent's branch, marked recovered.
#[tokio::test]
async fn kill_9_during_a_run_loses_no_edit() {
    let repo = repository();
    let dir = tempfile::tempdir().unwrap();
    let s = HttpServer::start(dir.path()).await;
    let lead = s.lead(Proto::Legacy).await;
    call(
        &lead,
        "agent_new",
        json!({"name": "ada", "backend": "mock", "cwd": repo.path().display().to_string(),
               "workspace": "worktree", "mock": [{"sleep": "60s"}]}),
    )
    .await
    .ok();
    call(&lead, "channel_send", json!({"message": "@ada work on it"}))
        .await
        .ok();
    let i = wait_info(&lead, "ada", 20, |i| i.get("running").is_some()).await;
    let folder = i["worktree"]["path"].as_str().unwrap().to_owned();
    // What the run has written so far.
    std::fs::write(
        Path::new(&folder).join("lib.rs"),
        "fn answer() -> u32 { 45 }\n",
    )
    .unwrap();
    drop(lead);
    s.kill().await;

    let s = HttpServer::start(dir.path()).await;
    let lead = s.lead(Proto::Legacy).await;
    let log = last_commit(repo.path(), "aw/global-main/ada");
    assert!(log.starts_with("ada\nada: recovered"), "{log}");
    let at_head = git(repo.path(), &["show", "aw/global-main/ada:lib.rs"]);
    assert!(at_head.contains("45"), "{at_head}");
    // The killed run is lost (its message is read again by a new run).
    let i = info(&lead, "ada").await;
    let lost = i["runs"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["status"] == "lost")
        .count();
    assert_eq!(lost, 1, "{i}");
    assert_eq!(git(repo.path(), &["log", "--format=%s", "main"]), "first");
    s.stop().await;
}

/// The kernel's own git reads no global config or attributes of the user's: a
/// filter a `full` agent could plant in `~/.gitconfig` never runs at its commit.
#[tokio::test]
async fn the_kernels_commit_runs_no_filter_from_the_users_git_config() {
    let (repo, home, data) = (
        repository(),
        tempfile::tempdir().unwrap(),
        tempfile::tempdir().unwrap(),
    );
    let ran = home.path().join("filter-ran");
    let config = format!(
        "[filter \"x\"]\n\tclean = \"touch {} && sed s/42/99/\"\n[core]\n\tattributesFile = {}\n",
        ran.display(),
        home.path().join("attributes").display()
    );
    std::fs::write(home.path().join(".gitconfig"), config).unwrap();
    std::fs::write(home.path().join("attributes"), "* filter=x\n").unwrap();
    let llm = writer(42).await;
    let s =
        HttpServer::start_with_env(data.path(), &[("HOME", home.path().to_str().unwrap())]).await;
    let lead = s.lead(Proto::Legacy).await;
    coder(&lead, "ada", repo.path(), &llm.url).await;
    let r = ask(&lead, "ada", "make it 42", 45).await;
    assert_eq!(r["status"], "succeeded", "{r}");
    let on_branch = git(repo.path(), &["show", "aw/global-main/ada:lib.rs"]);
    assert!(on_branch.contains("42"), "{on_branch}");
    assert!(
        !ran.exists(),
        "the user's filter ran at the kernel's commit"
    );
    s.stop().await;
}
