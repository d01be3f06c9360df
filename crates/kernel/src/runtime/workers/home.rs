//! An agent's home of its own for its CLI (the `HOME` and the CLI's own
//! variables of every sandboxed run): in the kernel's data dir, so hidden from
//! every other agent with it, kept from run to run (the CLI resumes its
//! conversations from there) and removed with the agent (agent_delete), by
//! nothing else. Whatever the agent writes there (a hook, an MCP server in a
//! settings file, an npm cache) stays its own: the user's CLI never reads it.
//!
//! At each run the kernel copies in what the home lacks of a short list per CLI
//! of the user's own files (its login and settings, [`seeds`]), so the CLI runs
//! as the user's does. Copies, never links, and never over a file already there,
//! but for the logins, kept one chain with the user's (see [`login`]).
//! The functions that touch files block: call them off the async threads.

mod login;

use domain::backends::Backend;
use std::io;
use std::path::{Component, Path, PathBuf};

/// The home of agent `agent_id` (ids are never reused: no later agent finds it).
pub fn dir(data_dir: &Path, agent_id: i64) -> PathBuf {
    data_dir.join("homes").join(format!("agent-{agent_id}"))
}

/// The variables that point every CLI at `home`, and the folder each names
/// there (relative, "" for the home itself): the XDG ones always, a CLI's own
/// only where the user set it (its default then is the same place, through
/// `HOME`, and Claude Code's secure storage on macOS is named after the variable).
const VARS: &[(&str, &str)] = &[
    ("HOME", ""),
    ("XDG_CONFIG_HOME", ".config"),
    ("XDG_DATA_HOME", ".local/share"),
    ("XDG_STATE_HOME", ".local/state"),
    ("XDG_CACHE_HOME", ".cache"),
];
const CLI_VARS: &[(&str, &str)] = &[
    ("CLAUDE_CONFIG_DIR", ".claude"),
    ("CODEX_HOME", ".codex"),
    ("GEMINI_CLI_HOME", ""),
];

/// The run's variables for `home` (they replace the agent's and the kernel's);
/// `user` reads the user's environment (the agent's, then the kernel's).
pub fn env(home: &Path, user: &dyn Fn(&str) -> Option<String>) -> Vec<(String, String)> {
    let cli = CLI_VARS.iter().filter(|(k, _)| user(k).is_some());
    VARS.iter()
        .chain(cli)
        .map(|(k, rel)| {
            let at = if rel.is_empty() {
                home.to_owned()
            } else {
                home.join(rel)
            };
            (k.to_string(), at.display().to_string())
        })
        .collect()
}

/// What of the user's CLI state an agent's home is given: (the user's file,
/// where it goes in the home). `user` reads the user's environment (the
/// agent's, then the kernel's), `user_home` is the user's `HOME`.
pub fn seeds(
    backend: Backend,
    user: &dyn Fn(&str) -> Option<String>,
    user_home: &Path,
) -> Vec<(PathBuf, &'static str)> {
    let var_or =
        |var: &str, dflt: &str| user(var).map_or_else(|| user_home.join(dflt), PathBuf::from);
    match backend {
        Backend::Claude => {
            let config = var_or("CLAUDE_CONFIG_DIR", ".claude");
            // Its global file is in CLAUDE_CONFIG_DIR when set, else in the home.
            let (global, to) = match user("CLAUDE_CONFIG_DIR") {
                Some(d) => (PathBuf::from(d), ".claude/.claude.json"),
                None => (user_home.to_owned(), ".claude.json"),
            };
            vec![
                (
                    config.join(".credentials.json"),
                    ".claude/.credentials.json",
                ),
                (config.join("settings.json"), ".claude/settings.json"),
                (global.join(".claude.json"), to),
            ]
        }
        Backend::Codex => {
            let c = var_or("CODEX_HOME", ".codex");
            vec![
                (c.join("auth.json"), ".codex/auth.json"),
                (c.join("config.toml"), ".codex/config.toml"),
            ]
        }
        Backend::Gemini => {
            let g = var_or("GEMINI_CLI_HOME", "").join(".gemini");
            vec![
                (g.join("oauth_creds.json"), ".gemini/oauth_creds.json"),
                (
                    g.join("google_accounts.json"),
                    ".gemini/google_accounts.json",
                ),
                (g.join("settings.json"), ".gemini/settings.json"),
            ]
        }
        Backend::OpenCode => {
            let data = var_or("XDG_DATA_HOME", ".local/share").join("opencode");
            let config = var_or("XDG_CONFIG_HOME", ".config").join("opencode");
            vec![
                (data.join("auth.json"), ".local/share/opencode/auth.json"),
                (
                    config.join("opencode.json"),
                    ".config/opencode/opencode.json",
                ),
                (
                    config.join("opencode.jsonc"),
                    ".config/opencode/opencode.jsonc",
                ),
            ]
        }
        Backend::Cursor => vec![
            (
                user_home.join(".cursor/cli-config.json"),
                ".cursor/cli-config.json",
            ),
            (
                var_or("XDG_CONFIG_HOME", ".config").join("cursor/auth.json"),
                ".config/cursor/auth.json",
            ),
        ],
        _ => Vec::new(),
    }
}

/// A sandboxed run's home and what to copy into it of the user's CLI state.
pub struct Home {
    dir: PathBuf,
    seeds: Vec<(PathBuf, &'static str)>,
}

impl Home {
    /// The run's home; none when its agent's sandbox is off.
    pub(crate) fn of(spec: &super::spec::Spec, data_dir: &Path) -> Option<Self> {
        if spec.config.permissions.sandbox_mode() == domain::sandbox::Mode::Off {
            return None;
        }
        let user = |k: &str| spec.env.get(k).cloned().or_else(|| std::env::var(k).ok());
        let seeds = user("HOME")
            .map(|h| seeds(spec.backend, &user, Path::new(&h)))
            .unwrap_or_default();
        Some(Self {
            dir: dir(data_dir, spec.agent_id),
            seeds,
        })
    }

    /// Makes it ready ([`prepare`]) and brings its logins in line ([`sync_logins`]).
    pub fn prepare(&self) -> io::Result<()> {
        prepare(&self.dir, &self.seeds)?;
        self.sync_logins();
        Ok(())
    }

    /// After a run: the login the agent's CLI refreshed goes back to the user's
    /// file ([`sync_logins`]). Blocks: call it off the async threads.
    pub fn sync_logins(&self) {
        if let Err(e) = login::sync(&self.dir, &self.seeds) {
            tracing::warn!(home = %self.dir.display(), "the logins could not be synced: {e}");
        }
    }
}

/// Makes `home` (only its owner reads it) with the folders [`VARS`] name, and
/// copies in each seed it lacks. A seed the user does not have is skipped; one
/// whose place in the home the agent turned into a link is skipped too (the
/// kernel never writes through a link the agent made).
pub fn prepare(home: &Path, seeds: &[(PathBuf, &str)]) -> io::Result<()> {
    use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
    if let Some(parent) = home.parent() {
        std::fs::create_dir_all(parent)?;
    }
    match std::fs::DirBuilder::new().mode(0o700).create(home) {
        Err(e) if e.kind() != io::ErrorKind::AlreadyExists => return Err(e),
        _ => {}
    }
    if !std::fs::symlink_metadata(home)?.is_dir() {
        return Err(io::Error::other(format!(
            "{} is not a folder",
            home.display()
        )));
    }
    std::fs::set_permissions(home, std::fs::Permissions::from_mode(0o700))?;
    for (_, rel) in VARS
        .iter()
        .chain(CLI_VARS)
        .filter(|(_, rel)| !rel.is_empty())
    {
        // A folder the agent replaced with a link is its own affair: not followed.
        let _ = folder_in(home, Path::new(rel));
    }
    for (from, to) in seeds {
        let to = Path::new(to);
        let Ok(parent) = folder_in(home, to.parent().unwrap_or(Path::new(""))) else {
            continue;
        };
        let Ok(bytes) = std::fs::read(from) else {
            continue;
        };
        let _ = copy_new(&bytes, &parent.join(to.file_name().unwrap_or_default()));
    }
    Ok(())
}

/// `home/rel` as a folder, made where missing: none of its parts a link.
fn folder_in(home: &Path, rel: &Path) -> io::Result<PathBuf> {
    let mut at = home.to_owned();
    for c in rel.components() {
        let Component::Normal(name) = c else {
            return Err(io::Error::other("not a plain relative path"));
        };
        at.push(name);
        match std::fs::symlink_metadata(&at) {
            Ok(m) if m.is_dir() => {}
            Ok(_) => {
                return Err(io::Error::other(format!(
                    "{} is not a folder",
                    at.display()
                )));
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => std::fs::create_dir(&at)?,
            Err(e) => return Err(e),
        }
    }
    Ok(at)
}

/// Writes a new file (only its owner reads it): never over one, never through a link.
fn copy_new(bytes: &[u8], to: &Path) -> io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(nix::libc::O_NOFOLLOW)
        .open(to)?;
    f.write_all(bytes)
}

/// Removes an agent's home and the record of its logins (nothing if not there).
pub fn remove(home: &Path) -> io::Result<()> {
    match std::fs::remove_file(login::record(home)) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e),
        _ => {}
    }
    match std::fs::remove_dir_all(home) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::workers::sandbox::{Places, plan};
    use crate::runtime::workers::spec::Spec;
    use domain::permissions::{Permissions, Profile};

    fn user_env<'a>(vars: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
        move |k| {
            vars.iter()
                .find(|(n, _)| *n == k)
                .map(|(_, v)| v.to_string())
        }
    }

    #[test]
    fn the_cli_is_pointed_at_its_home_by_the_variables_it_reads() {
        let check = |user: &[(&str, &str)], expect: &[(&str, &str)]| {
            let got = env(Path::new("/d/homes/agent-7"), &user_env(user));
            let want: Vec<(String, String)> = expect
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect();
            assert_eq!(got, want, "{user:?}");
        };
        let xdg = [
            ("HOME", "/d/homes/agent-7"),
            ("XDG_CONFIG_HOME", "/d/homes/agent-7/.config"),
            ("XDG_DATA_HOME", "/d/homes/agent-7/.local/share"),
            ("XDG_STATE_HOME", "/d/homes/agent-7/.local/state"),
            ("XDG_CACHE_HOME", "/d/homes/agent-7/.cache"),
        ];
        check(&[("HOME", "/home/u")], &xdg);
        let mut all = xdg.to_vec();
        all.extend([
            ("CLAUDE_CONFIG_DIR", "/d/homes/agent-7/.claude"),
            ("CODEX_HOME", "/d/homes/agent-7/.codex"),
            ("GEMINI_CLI_HOME", "/d/homes/agent-7"),
        ]);
        let set = [
            ("GEMINI_CLI_HOME", "/g"),
            ("CODEX_HOME", "/home/u/cx"),
            ("CLAUDE_CONFIG_DIR", "/c"),
        ];
        check(&set, &all);
    }

    #[test]
    fn each_cli_is_given_its_login_and_settings_from_where_the_user_keeps_them() {
        let check = |backend: Backend, user: &[(&str, &str)], expect: &[(&str, &str)]| {
            let got = seeds(backend, &user_env(user), Path::new("/home/u"));
            let got: Vec<(String, &str)> = got
                .iter()
                .map(|(f, t)| (f.display().to_string(), *t))
                .collect();
            let want: Vec<(String, &str)> =
                expect.iter().map(|(f, t)| (f.to_string(), *t)).collect();
            assert_eq!(got, want, "{backend:?} {user:?}");
        };
        check(
            Backend::Claude,
            &[],
            &[
                (
                    "/home/u/.claude/.credentials.json",
                    ".claude/.credentials.json",
                ),
                ("/home/u/.claude/settings.json", ".claude/settings.json"),
                ("/home/u/.claude.json", ".claude.json"),
            ],
        );
        check(
            Backend::Claude,
            &[("CLAUDE_CONFIG_DIR", "/c")],
            &[
                ("/c/.credentials.json", ".claude/.credentials.json"),
                ("/c/settings.json", ".claude/settings.json"),
                ("/c/.claude.json", ".claude/.claude.json"),
            ],
        );
        check(
            Backend::Codex,
            &[("CODEX_HOME", "/cx")],
            &[
                ("/cx/auth.json", ".codex/auth.json"),
                ("/cx/config.toml", ".codex/config.toml"),
            ],
        );
        check(
            Backend::Gemini,
            &[],
            &[
                (
                    "/home/u/.gemini/oauth_creds.json",
                    ".gemini/oauth_creds.json",
                ),
                (
                    "/home/u/.gemini/google_accounts.json",
                    ".gemini/google_accounts.json",
                ),
                ("/home/u/.gemini/settings.json", ".gemini/settings.json"),
            ],
        );
        check(
            Backend::OpenCode,
            &[("XDG_DATA_HOME", "/x")],
            &[
                ("/x/opencode/auth.json", ".local/share/opencode/auth.json"),
                (
                    "/home/u/.config/opencode/opencode.json",
                    ".config/opencode/opencode.json",
                ),
                (
                    "/home/u/.config/opencode/opencode.jsonc",
                    ".config/opencode/opencode.jsonc",
                ),
            ],
        );
        check(Backend::Sdk, &[], &[]);
    }

    #[test]
    fn a_home_gets_copies_of_what_it_lacks_never_over_a_file_nor_through_a_link() {
        let t = tempfile::tempdir().unwrap();
        let user = t.path().join("user");
        std::fs::create_dir_all(user.join(".codex")).unwrap();
        std::fs::write(user.join(".codex/auth.json"), "login").unwrap();
        std::fs::write(user.join(".codex/config.toml"), "users").unwrap();
        let home = t.path().join("data/homes/agent-1");
        let seeds = seeds(Backend::Codex, &|_| None, &user);
        prepare(&home, &seeds).unwrap();
        let read = |p: &str| std::fs::read_to_string(home.join(p)).unwrap();
        assert_eq!(read(".codex/auth.json"), "login");
        for dir in [".config", ".local/share", ".local/state", ".cache"] {
            assert!(home.join(dir).is_dir(), "{dir}");
        }
        // The agent's own edit stays; the user's file is a copy, not a link.
        std::fs::write(home.join(".codex/config.toml"), "agents").unwrap();
        std::fs::write(user.join(".codex/auth.json"), "new login").unwrap();
        prepare(&home, &seeds).unwrap();
        assert_eq!(read(".codex/config.toml"), "agents");
        assert_eq!(read(".codex/auth.json"), "login");
        assert_eq!(
            std::fs::read_to_string(user.join(".codex/config.toml")).unwrap(),
            "users"
        );
        // A folder the agent swapped for a link to the user's is not written through.
        std::fs::remove_dir_all(home.join(".codex")).unwrap();
        let elsewhere = t.path().join("elsewhere");
        std::fs::create_dir(&elsewhere).unwrap();
        std::os::unix::fs::symlink(&elsewhere, home.join(".codex")).unwrap();
        prepare(&home, &seeds).unwrap();
        assert_eq!(std::fs::read_dir(&elsewhere).unwrap().count(), 0);
        remove(&home).unwrap();
        assert!(!home.exists() && elsewhere.exists());
        remove(&home).unwrap();
    }

    #[test]
    fn a_run_writes_its_clis_state_in_its_home_and_none_of_the_users() {
        let s = Spec::for_tests(
            Backend::Claude,
            &[("HOME", "/home/u"), ("CODEX_HOME", "/home/u/cx")],
        );
        let home = Path::new("/d/homes/agent-7");
        let at = Places {
            cwd: Path::new("/srv/a"),
            state_dir: Path::new("/d/workspaces/w/main/a"),
            scratch: "/d/scratch/run-1".into(),
            data_dir: Path::new("/d"),
            home,
            skills: Vec::new(),
            kernel_url: "http://127.0.0.1:1/mcp",
            held: Vec::new(),
        };
        let users = [
            "/home/u/.claude",
            "/home/u/.claude.json",
            "/home/u/.codex",
            "/home/u/cx",
            "/home/u/.npm",
            "/home/u/.cache",
            "/home/u/.local/share/opencode",
        ];
        for profile in [Profile::Read, Profile::Edit, Profile::Full] {
            let p = Permissions {
                profile,
                ..Default::default()
            };
            let sb = plan(&s, &p, &at).unwrap();
            assert!(sb.writable.iter().any(|w| w == home), "{profile:?}");
            assert!(sb.readable.iter().any(|w| w == home), "{profile:?}");
            let var = |k: &str| sb.env.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str());
            assert_eq!(var("HOME"), Some("/d/homes/agent-7"));
            assert_eq!(var("CODEX_HOME"), Some("/d/homes/agent-7/.codex"));
            assert_eq!(var("CLAUDE_CONFIG_DIR"), None);
            for u in users {
                let held = sb.unwritable.iter().any(|w| w == Path::new(u));
                assert!(held, "{profile:?}: {u} is not held");
            }
            let in_users = |w: &PathBuf| w.starts_with("/home/u");
            assert!(
                !sb.writable.iter().any(in_users),
                "{profile:?}: {:?}",
                sb.writable
            );
        }
    }
}
