use super::*;

fn spec(backend: Backend, home: &str) -> Spec {
    Spec::for_tests(backend, &[("HOME", home)])
}

/// The user's real home (from the user database), for `~` in a case.
fn real_home() -> PathBuf {
    nix::unistd::User::from_uid(nix::unistd::getuid())
        .unwrap()
        .unwrap()
        .dir
}

/// One case: an agent of `backend` whose `HOME` is `home` and whose folder is
/// `cwd`, at `profile`: its workspace folders are `folders`, the places in
/// `held` are never writable (held, or not granted at all), those in `open`
/// are writable. `~` is the user's real home.
struct Case<'a> {
    profile: Profile,
    backend: Backend,
    home: &'a str,
    cwd: &'a str,
    folders: &'a [&'a str],
    held: &'a [&'a str],
    open: &'a [&'a str],
}

fn check(c: Case<'_>) {
    let real = real_home();
    let path = |p: &str| match p.strip_prefix("~") {
        Some(rest) => PathBuf::from(format!("{}{rest}", real.display())),
        None => PathBuf::from(p),
    };
    let cwd = path(c.cwd);
    let at = Places {
        cwd: &cwd,
        state_dir: Path::new("/d/workspaces/w/main/a"),
        scratch: "/d/scratch/run-1".into(),
        data_dir: Path::new("/d"),
        home: Path::new("/d/homes/agent-7"),
        skills: Vec::new(),
        kernel_url: "http://127.0.0.1:1/mcp",
        held: Vec::new(),
    };
    let p = Permissions {
        profile: c.profile,
        ..Default::default()
    };
    let sb = plan(&spec(c.backend, c.home), &p, &at).unwrap();
    let what = format!("{:?} {:?} in {}", c.profile, c.backend, c.cwd);
    let folders: Vec<PathBuf> = c.folders.iter().map(|f| path(f)).collect();
    assert_eq!(sb.folders, folders, "{what}");
    // Writable as the worker grants it: beneath a writable place, but not
    // beneath an unwritable place inside that one (it splits around those).
    let writable = |x: &Path| {
        sb.writable.iter().any(|w| {
            x.starts_with(w)
                && !sb
                    .unwritable
                    .iter()
                    .any(|u| u.starts_with(w) && x.starts_with(u))
        })
    };
    for h in c.held.iter().map(|h| path(h)) {
        assert!(!writable(&h), "{what}: {} is writable", h.display());
    }
    for o in c.open.iter().map(|o| path(o)) {
        assert!(writable(&o), "{what}: {} is not writable", o.display());
    }
}

const SHELL: &[&str] = &[
    "/home/u/.bashrc",
    "/home/u/.profile",
    "/home/u/.zshrc",
    "/home/u/.gitconfig",
    "/home/u/.config/git/config",
    "/home/u/.local/bin/git",
    "/home/u/.config/systemd/user/x.service",
    "/home/u/.config/autostart/x.desktop",
    "/home/u/.local/share/claude/versions/1",
    "/home/u/.opencode/bin/opencode",
];

#[test]
fn a_workspace_folder_in_the_users_home_is_the_users_and_never_granted() {
    use {Backend::*, Profile::*};
    for profile in [Read, Edit, Full] {
        let case = |backend, home, cwd, folders| Case {
            profile,
            backend,
            home,
            cwd,
            folders,
            held: &[
                "/home/u/.gemini/settings.json",
                "~/.gemini",
                "~/.cursor/mcp.json",
            ],
            open: &[],
        };
        check(case(Gemini, "/home/u", "/home/u", &[]));
        check(case(Cursor, "/home/u", "/home/u/", &[]));
        check(case(Gemini, "/home/u", "~", &[]));
        check(case(Cursor, "/home/u", "~", &[]));
        check(case(Gemini, "/home/u", "/srv/a", &["/srv/a/.gemini"]));
        check(case(Cursor, "/home/u", "/srv/a", &["/srv/a/.cursor"]));
        check(case(Claude, "/home/u", "/home/u", &[]));
    }
}

#[test]
fn the_real_homes_cli_state_is_held_whatever_home_the_agent_names() {
    for profile in [Profile::Read, Profile::Edit, Profile::Full] {
        check(Case {
            profile,
            backend: Backend::Sdk,
            home: "/srv/h",
            cwd: "/srv/a",
            folders: &[],
            held: &[
                "~/.claude/settings.json",
                "~/.codex",
                "~/.npm",
                "/srv/h/.claude",
            ],
            open: &["/d/homes/agent-7/.claude"],
        });
    }
}

#[test]
fn below_full_an_agent_in_the_users_home_changes_no_start_up_file() {
    let case = |profile, open: &'static [&'static str], held: &'static [&'static str]| Case {
        profile,
        backend: Backend::Sdk,
        home: "/home/u",
        cwd: "/home/u",
        folders: &[],
        held,
        open,
    };
    check(case(
        Profile::Edit,
        &["/home/u/src/x.rs", "/home/u/notes"],
        SHELL,
    ));
    check(case(Profile::Read, &[], SHELL));
    check(case(
        Profile::Full,
        SHELL,
        &["/home/u/.claude", "/home/u/.codex/config.toml"],
    ));
}

/// The mounts a run's plan carries, from its profile, its folder (a plain
/// repository, or a worktree's `.git` file) and its contracts' edit globs.
#[test]
fn the_plan_holds_git_and_the_contracts_paths_read_only() {
    let dir = tempfile::tempdir().unwrap();
    let w = dir.path();
    // No `.git/info` yet: the plan makes it, to hold it.
    for d in [".git/hooks", ".git/worktrees/a", "secrets", "src/keys"] {
        std::fs::create_dir_all(w.join(d)).unwrap();
    }
    for f in [".git/config", "secrets/k.txt", "src/a.key", "src/b.rs"] {
        std::fs::write(w.join(f), "x").unwrap();
    }
    std::os::unix::fs::symlink("/etc", w.join("src/link.key")).unwrap();
    let check = |profile: Profile, held: &[&str], worktree: bool, expect: (&[&str], &[&str])| {
        let at = Places {
            cwd: w,
            state_dir: w,
            scratch: w.into(),
            data_dir: w,
            home: w,
            skills: Vec::new(),
            kernel_url: "",
            held: held.iter().map(|h| h.to_string()).collect(),
        };
        let m = mounts(profile, &at, worktree);
        let rel = |v: &[PathBuf]| -> Vec<String> {
            v.iter()
                .map(|p| p.strip_prefix(w).unwrap().display().to_string())
                .collect()
        };
        let got = (rel(&m.read_only), rel(&m.pinned));
        let expect = (
            expect.0.iter().map(|s| s.to_string()).collect::<Vec<_>>(),
            expect.1.iter().map(|s| s.to_string()).collect::<Vec<_>>(),
        );
        assert_eq!(got, expect, "{profile:?} {held:?} worktree {worktree}");
        assert_eq!(m.shm_mb, domain::sandbox::SHM_MB);
    };
    let git: &[&str] = &[".git/config", ".git/hooks", ".git/info", ".git/worktrees"];
    check(Profile::Edit, &[], false, (git, &[".git"]));
    assert!(w.join(".git/info").is_dir());
    // Every folder above a held path is pinned: `mv src old` moves nothing held.
    check(
        Profile::Edit,
        &["secrets/*", "src/*.key", "src/keys/*"],
        false,
        (
            &[
                ".git/config",
                ".git/hooks",
                ".git/info",
                ".git/worktrees",
                "secrets",
                "src/a.key",
                "src/keys",
            ],
            &[".git", "src"],
        ),
    );
    // Nothing is writable at read; full writes the user's own git config anyway.
    check(Profile::Read, &["secrets/*"], false, (&[], &[]));
    check(
        Profile::Full,
        &["secrets/*", "src/keys/*"],
        false,
        (&["secrets", "src/keys"], &["src"]),
    );
    // A glob matching more than a run can hold is said, to be refused.
    std::fs::create_dir(w.join("logs")).unwrap();
    for i in 0..101 {
        std::fs::write(w.join(format!("logs/{i}.log")), "x").unwrap();
    }
    let at = Places {
        cwd: w,
        state_dir: w,
        scratch: w.into(),
        data_dir: w,
        home: w,
        skills: Vec::new(),
        kernel_url: "",
        held: vec!["logs/*.log".into(), "secrets/*".into()],
    };
    let m = mounts(Profile::Edit, &at, false);
    assert_eq!(m.unheld, ["logs/*.log"]);
    assert!(m.read_only.contains(&w.join("secrets")), "{m:?}");
    assert!(!m.read_only.iter().any(|p| p.starts_with(w.join("logs"))));
    // A worktree's repository is held by Landlock; its `.git` file by a mount.
    std::fs::remove_dir_all(w.join(".git")).unwrap();
    std::fs::write(w.join(".git"), "gitdir: /r/.git/worktrees/a").unwrap();
    check(Profile::Edit, &[], true, (&[".git"], &[]));
}

#[test]
fn a_limits_signal_is_named() {
    let check = |sig: i32, expect: Option<&str>| assert_eq!(super::limit_hit(sig), expect, "{sig}");
    check(nix::libc::SIGXCPU, Some("CPU time limit (RLIMIT_CPU)"));
    check(nix::libc::SIGXFSZ, Some("file size limit (RLIMIT_FSIZE)"));
    check(nix::libc::SIGKILL, None);
}
