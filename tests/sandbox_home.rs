//! A sandboxed agent's CLI keeps its state in a home of its own, in the kernel's
//! data dir, not in the user's: an agent's commands cannot plant a setting in
//! the user's `~/.claude`, `~/.codex`, `~/.bashrc` or `~/.npm` (which the user's
//! own CLI would later run outside any sandbox); its home stays from run to run
//! (the CLI resumes its conversation there), no other agent reads it, and it goes
//! with the agent (agent_delete).

use crate::common;
use crate::sandbox::{Outside, run};
use common::fake_llm::{FakeLlm, Script};
use common::*;
use serde_json::{Value, json};
use std::path::{Path, PathBuf};

/// The user's CLI state and shell start-up files (each valid for its CLI),
/// planted in `home`.
const USERS: &[(&str, &str)] = &[
    (".claude/settings.json", "{\"env\": {\"USERS\": \"1\"}}"),
    (".codex/config.toml", "# the user's\n"),
    (".bashrc", "# the user's\n"),
    (".npm/keep", "the user's"),
];

fn plant(home: &Path) {
    for (f, text) in USERS {
        let p = home.join(f);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }
}

/// Every planted file is as it was, and nothing new is in the user's `.npm`.
fn users_unchanged(home: &Path, said: &str) {
    for (f, was) in USERS {
        let text = std::fs::read_to_string(home.join(f)).unwrap_or_default();
        assert_eq!(text, *was, "the user's {f} changed: {said}");
    }
    assert!(
        !home.join(".npm/_npx").exists(),
        "~/.npm was written: {said}"
    );
}

/// What a model's commands try on the user's home `h`, then in its own home.
fn plants(h: &str) -> Vec<String> {
    vec![
        format!("echo '{{\"hooks\": 1}}' >> {h}/.claude/settings.json"),
        format!("echo 'notify = [\"sh\"]' >> {h}/.codex/config.toml"),
        format!("echo 'alias ls=rm' >> {h}/.bashrc"),
        format!("echo x > {h}/.npm/keep; mkdir -p {h}/.npm/_npx && echo x > {h}/.npm/_npx/p"),
        "echo \"HOME=$HOME CODEX=$CODEX_HOME\"; echo run >> ~/mine.txt".into(),
    ]
}

/// The agents' homes in the data dir.
fn homes(data: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(data.join("homes"))
        .map(|d| d.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    v.sort();
    v
}

async fn sdk_agent(lead: &Client, name: &str, llm: &FakeLlm, user_home: &str, work: &Path) {
    let env = json!({"ANTHROPIC_BASE_URL": llm.url, "ANTHROPIC_API_KEY": "sk-test",
                     "HOME": user_home, "CODEX_HOME": format!("{user_home}/.codex")});
    call(
        lead,
        "agent_new",
        json!({"name": name, "backend": "sdk", "model": "claude-sonnet-4-5", "env": env,
               "cwd": work.display().to_string(),
               "permissions": {"profile": "edit", "allow": ["shell"]}}),
    )
    .await
    .ok();
}

#[tokio::test]
async fn an_agents_commands_plant_nothing_in_the_users_home_and_its_own_home_stays() {
    let o = Outside::new();
    let user_home = o.path("home");
    plant(Path::new(&user_home));
    let dir = tempfile::tempdir().unwrap();
    let s = InProcess::start(dir.path()).await;
    let lead = s.lead(Proto::Legacy).await;
    let work = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let tries = plants(&user_home);
    let steps: Vec<(&str, Value)> = tries
        .iter()
        .map(|c| ("run_command", json!({"command": c})))
        .collect();
    let llm = FakeLlm::start(Script::every_run(&steps, "done")).await;
    sdk_agent(&lead, "builder", &llm, &user_home, work.path()).await;
    let said = run(&lead, "builder", &llm).await.join("\n");
    users_unchanged(Path::new(&user_home), &said);
    let [home] = homes(dir.path()).try_into().expect("one home");
    let own = format!("HOME={h} CODEX={h}/.codex", h = home.display());
    assert!(said.contains(&own), "{own}: {said}");
    // Its home stays from one run to the next.
    let said = run(&lead, "builder", &llm).await.join("\n");
    users_unchanged(Path::new(&user_home), &said);
    let mine = std::fs::read_to_string(home.join("mine.txt")).unwrap();
    assert_eq!(mine, "run\nrun\n", "{said}");

    // Another agent neither reads it nor shares it.
    let leak = format!(
        "cat {}/mine.txt > leak.txt; ls {} > leak-list.txt; echo \"HOME=$HOME\"",
        home.display(),
        dir.path().join("homes").display()
    );
    let llm2 = FakeLlm::start(Script::steps(
        &[("run_command", json!({"command": leak}))],
        "done",
    ))
    .await;
    let work2 = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    sdk_agent(&lead, "other", &llm2, &user_home, work2.path()).await;
    let said2 = run(&lead, "other", &llm2).await.join("\n");
    for f in ["leak.txt", "leak-list.txt"] {
        let len = std::fs::metadata(work2.path().join(f)).map_or(0, |m| m.len());
        assert_eq!(len, 0, "{f}: {said2}");
    }
    let both = homes(dir.path());
    assert_eq!(both.len(), 2, "{both:?}");
    let theirs = both.iter().find(|h| **h != home).unwrap();
    assert!(
        said2.contains(&format!("HOME={}", theirs.display())),
        "{said2}"
    );

    // It goes with its agent, and only with it.
    call(&lead, "agent_delete", json!({"target": "builder"}))
        .await
        .ok();
    assert_eq!(homes(dir.path()), vec![theirs.clone()]);
    drop(lead);
    s.stop().await;
    // A restart (which sweeps what runs left in the data dir) keeps the other's.
    let s = InProcess::start(dir.path()).await;
    assert_eq!(homes(dir.path()), vec![theirs.clone()]);
    s.stop().await;
}

/// The user's start-up files and the places the user's tools run from.
const STARTUP: &[&str] = &[
    ".profile",
    ".gitconfig",
    ".config/git/config",
    ".local/bin/git",
    ".config/autostart/x.desktop",
];

/// An `edit` agent whose folder is the user's home (a workflow file kept in `~`
/// with no cwd) changes the home's files, but none of the CLIs' state, nor the
/// shell's start-up files, git's config or where the user's tools run from.
#[tokio::test]
async fn an_edit_agent_in_the_users_home_changes_no_start_up_file() {
    let o = Outside::new();
    let user_home = o.path("home");
    let h = Path::new(&user_home);
    plant(h);
    for f in STARTUP.iter().chain(&["src/lib.rs"]) {
        std::fs::create_dir_all(h.join(f).parent().unwrap()).unwrap();
        std::fs::write(h.join(f), "the user's\n").unwrap();
    }
    let mut tries: Vec<String> = STARTUP
        .iter()
        .map(|f| format!("echo planted >> {user_home}/{f}"))
        .collect();
    tries.extend(plants(&user_home).into_iter().take(4));
    tries.push(format!("echo ours > {user_home}/src/lib.rs"));
    let steps: Vec<(&str, Value)> = tries
        .iter()
        .map(|c| ("run_command", json!({"command": c})))
        .collect();
    let llm = FakeLlm::start(Script::steps(&steps, "done")).await;
    let dir = tempfile::tempdir().unwrap();
    let s = InProcess::start(dir.path()).await;
    let lead = s.lead(Proto::Legacy).await;
    sdk_agent(&lead, "homebody", &llm, &user_home, h).await;
    let said = run(&lead, "homebody", &llm).await.join("\n");
    users_unchanged(h, &said);
    for f in STARTUP {
        let text = std::fs::read_to_string(h.join(f)).unwrap();
        assert_eq!(text, "the user's\n", "the user's {f} changed: {said}");
    }
    let work = std::fs::read_to_string(h.join("src/lib.rs")).unwrap();
    assert_eq!(work, "ours\n", "work in its folder failed: {said}");
    drop(lead);
    s.stop().await;
}

/// A real CLI (its own shell tool) under `edit`: its commands plant nothing in
/// the user's home, it runs on the login and settings copied into its own, and
/// a second run resumes its conversation from there.
async fn cli_keeps_to_its_home(backend: &str) {
    let Some(bin) = common::clis::cli_bin() else {
        return;
    };
    let o = Outside::new();
    let user_home = o.path("home");
    let uh = Path::new(&user_home).to_owned();
    plant(&uh);
    let dir = tempfile::tempdir().unwrap();
    let s = HttpServer::start(dir.path()).await;
    let lead = s.lead(Proto::Legacy).await;
    let work = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let step = |c: &String| match backend {
        "claude" => ("Bash", json!({"command": c, "description": "run it"})),
        "gemini" => (
            "run_shell_command",
            json!({"command": c, "description": "run it"}),
        ),
        "opencode" => ("bash", json!({"command": c, "description": "run it"})),
        _ => ("exec_command", json!({"cmd": c})),
    };
    let tries = plants(&user_home);
    let steps: Vec<(&str, Value)> = tries.iter().map(step).collect();
    let llm = FakeLlm::start(Script::every_run(&steps, "done")).await;
    let env = common::clis::cli_env(backend, &bin, &uh, &llm.url);
    // Codex allows no shell below full; under edit its commands run anyway.
    let permissions = match backend {
        "codex" => json!("edit"),
        _ => json!({"profile": "edit", "allow": ["shell"]}),
    };
    let mut args = json!({"name": "worker", "backend": backend, "env": env,
                          "cwd": work.path().display().to_string(), "permissions": permissions});
    if let Some(m) = common::clis::model_for(backend) {
        args["model"] = json!(m);
    }
    call(&lead, "agent_new", args).await.ok();
    let mine = || {
        let [home] = homes(dir.path()).try_into().expect("one home");
        std::fs::read_to_string(home.join("mine.txt")).unwrap_or_default()
    };
    for prompt in ["please say hello", "and once more?"] {
        let r = ask_long(&lead, "worker", prompt, 180).await;
        assert_eq!(r["status"], "succeeded", "{backend}: {r}");
        users_unchanged(&uh, backend);
        // Its commands' HOME is its own, and what they wrote there stays
        // (Codex's resumed conversation does not play the script again).
        assert!(mine().starts_with("run\n"), "{backend}: {}", mine());
    }
    let last = llm.model_calls().last().unwrap()["body"].to_string();
    assert!(
        last.contains("please say hello") && last.contains("and once more?"),
        "{backend}: the second run did not resume the conversation: {last}"
    );
    let [home] = homes(dir.path()).try_into().expect("one home");
    // Its settings are a copy of the user's (Gemini's chose API-key auth);
    // OpenCode, given its configuration in its env, keeps its sessions there.
    let (copied, was) = match backend {
        "claude" => USERS[0],
        "codex" => USERS[1],
        "gemini" => (".gemini/settings.json", ""),
        _ => {
            let data = home.join(".local/share/opencode");
            assert!(data.is_dir(), "{backend}: nothing in {}", data.display());
            return s.stop().await;
        }
    };
    let text = std::fs::read_to_string(home.join(copied)).unwrap_or_default();
    if backend == "gemini" {
        // The user's choice, and the run's inbox hook beside it (its own home's
        // user settings are where Gemini's hook goes).
        let v: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(
            v["security"]["auth"]["selectedType"], "gemini-api-key",
            "{text}"
        );
        assert!(
            v["hooks"]["AfterTool"].to_string().contains("__hook"),
            "{text}"
        );
    } else {
        assert!(text.starts_with(was), "{backend}: {copied}: {text}");
    }
    s.stop().await;
}

#[tokio::test]
#[cfg_attr(
    not(heavy),
    ignore = "heavy: the worker CLIs from npm (AGENT_WORKER_HEAVY=1, scripts/interop-setup)"
)]
async fn claude_code_keeps_to_its_own_home() {
    cli_keeps_to_its_home("claude").await;
}

#[tokio::test]
#[cfg_attr(
    not(heavy),
    ignore = "heavy: the worker CLIs from npm (AGENT_WORKER_HEAVY=1, scripts/interop-setup)"
)]
async fn codex_keeps_to_its_own_home() {
    cli_keeps_to_its_home("codex").await;
}

#[tokio::test]
#[cfg_attr(
    not(heavy),
    ignore = "heavy: the worker CLIs from npm (AGENT_WORKER_HEAVY=1, scripts/interop-setup)"
)]
async fn gemini_cli_keeps_to_its_own_home() {
    cli_keeps_to_its_home("gemini").await;
}

#[tokio::test]
#[cfg_attr(
    not(heavy),
    ignore = "heavy: the worker CLIs from npm (AGENT_WORKER_HEAVY=1, scripts/interop-setup)"
)]
async fn opencode_keeps_to_its_own_home() {
    cli_keeps_to_its_home("opencode").await;
}

/// The login in an agent's home stays one chain with the user's: what its CLI
/// refreshed goes back to the user's file at the run's end, and a user's new
/// login reaches the agent at its next run. Cursor's CLI is played by a script
/// that notes the login it finds in its home and writes a refreshed one there.
#[tokio::test]
async fn a_refreshed_login_goes_back_to_the_user_and_a_new_one_reaches_the_agent() {
    use std::os::unix::fs::PermissionsExt;
    let o = Outside::new();
    let uh = PathBuf::from(o.path("home"));
    let users = uh.join(".config/cursor/auth.json");
    std::fs::create_dir_all(users.parent().unwrap()).unwrap();
    let login = |token: &str| json!({"accessToken": "a", "refreshToken": token}).to_string();
    let text = |p: &Path| std::fs::read_to_string(p).unwrap_or_default();
    std::fs::write(&users, login("r1")).unwrap();
    let work = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let (bin, seen) = (work.path().join("bin"), work.path().join("seen.txt"));
    std::fs::create_dir(&bin).unwrap();
    let cli = format!(
        "#!/bin/sh\nf=\"$HOME/.config/cursor/auth.json\"\n(cat \"$f\"; echo) >> {}\nprintf %s '{}' > \"$f\"\n",
        seen.display(),
        login("by-agent")
    );
    std::fs::write(bin.join("cursor-agent"), cli).unwrap();
    std::fs::set_permissions(bin.join("cursor-agent"), PermissionsExt::from_mode(0o755)).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let s = InProcess::start(dir.path()).await;
    let lead = s.lead(Proto::Legacy).await;
    let env = json!({"HOME": uh.display().to_string(), "CURSOR_API_KEY": "k",
                     "PATH": format!("{}:/usr/bin:/bin", bin.display())});
    call(
        &lead,
        "agent_new",
        json!({"name": "cursor", "backend": "cursor", "env": env,
               "cwd": work.path().display().to_string(), "permissions": "edit"}),
    )
    .await
    .ok();
    // Its CLI found the user's login and refreshed it: the user's file has the
    // new one (the worker may start the CLI more than once in a run).
    let r = ask(&lead, "cursor", "hello", 30).await;
    let seen_lines = || -> Vec<String> { text(&seen).lines().map(String::from).collect() };
    let first = seen_lines();
    assert_eq!(first.first(), Some(&login("r1")), "{r}");
    assert_eq!(text(&users), login("by-agent"), "{r}");
    // The user logs in again: the agent's CLI finds that one at its next run.
    std::fs::write(&users, login("r3")).unwrap();
    let r = ask(&lead, "cursor", "again", 30).await;
    assert_eq!(seen_lines().get(first.len()), Some(&login("r3")), "{r}");
    // The record of what was copied is kept beside the homes, and goes with the agent.
    let [home] = homes(dir.path()).try_into().expect("one home");
    let record = dir.path().join("logins/agent-1.json");
    assert!(!text(&record).is_empty());
    call(&lead, "agent_delete", json!({"target": "cursor"}))
        .await
        .ok();
    assert!(!record.exists() && !home.exists());
    drop(lead);
    s.stop().await;
}
