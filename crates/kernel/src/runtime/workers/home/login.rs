//! One login chain between the user and each agent's home. OAuth logins rotate
//! their refresh token: a CLI that refreshes its copy spends the token the other
//! copy holds. So the user's file is the authority and the kernel keeps, outside
//! the home (the agent writes its home), a record of the hash of what it last
//! copied in or wrote back. Before and after each run, per login file:
//! the user's changed (a new login) → copied in; else the agent's changed (its
//! CLI refreshed) → its rotated tokens (and only those: [`TOKENS`]) are written
//! into the user's file, atomically, mode 0600, where the user's file already has
//! them with the same type (a bounded read, never through a link): an agent adds
//! no key, provider or server to the user's login, nor swaps its account type.
//! Settings are never written back. Two agents refreshing at once still race,
//! as two CLIs sharing one file would: the second's refresh may fail.

use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::io::{self, Read};
use std::path::{Path, PathBuf};

/// The most of a login file read.
const MAX: u64 = 64 * 1024;

/// What a CLI's login file looks like: a JSON object with one of these top keys
/// (an empty list: an object of providers, each an object with a `type`).
const LOGINS: &[(&str, &[&str])] = &[
    (".claude/.credentials.json", &["claudeAiOauth"]),
    (".codex/auth.json", &["tokens", "OPENAI_API_KEY"]),
    (
        ".gemini/oauth_creds.json",
        &["refresh_token", "access_token"],
    ),
    (".local/share/opencode/auth.json", &[]),
    (".config/cursor/auth.json", &["refreshToken", "accessToken"]),
];

/// The fields a refresh rotates, per login file, as JSON pointers; `*` is each
/// top-level entry of the user's file whose `type` is `oauth` (OpenCode's).
const TOKENS: &[(&str, &[&str])] = &[
    (
        ".claude/.credentials.json",
        &[
            "/claudeAiOauth/accessToken",
            "/claudeAiOauth/refreshToken",
            "/claudeAiOauth/expiresAt",
        ],
    ),
    (
        ".codex/auth.json",
        &[
            "/tokens/access_token",
            "/tokens/refresh_token",
            "/tokens/id_token",
            "/last_refresh",
        ],
    ),
    (
        ".gemini/oauth_creds.json",
        &[
            "/access_token",
            "/refresh_token",
            "/expiry_date",
            "/id_token",
        ],
    ),
    (
        ".local/share/opencode/auth.json",
        &["/*/access", "/*/refresh", "/*/expires"],
    ),
    (
        ".config/cursor/auth.json",
        &["/accessToken", "/refreshToken"],
    ),
];

/// The user's login `user` with the rotated tokens of the agent's copy `agent`
/// (see [`TOKENS`]): a field is taken only where the user's file has it, with
/// the same JSON type; None when nothing of them changed (or either is no JSON
/// object).
pub fn rotated(rel: &str, user: &[u8], agent: &[u8]) -> Option<Vec<u8>> {
    use serde_json::Value;
    let (_, fields) = TOKENS.iter().find(|(r, _)| *r == rel)?;
    let mut mine: Value = serde_json::from_slice(user).ok().filter(Value::is_object)?;
    let theirs: Value = serde_json::from_slice(agent)
        .ok()
        .filter(Value::is_object)?;
    let oauth: Vec<String> = mine
        .as_object()?
        .iter()
        .filter(|(_, v)| v.get("type").and_then(Value::as_str) == Some("oauth"))
        .map(|(k, _)| k.replace('~', "~0").replace('/', "~1"))
        .collect();
    let pointers = fields.iter().flat_map(|f| match f.strip_prefix("/*") {
        Some(rest) => oauth.iter().map(|e| format!("/{e}{rest}")).collect(),
        None => vec![f.to_string()],
    });
    let mut changed = false;
    for ptr in pointers.collect::<Vec<_>>() {
        let (Some(new), Some(old)) = (theirs.pointer(&ptr), mine.pointer_mut(&ptr)) else {
            continue;
        };
        let same_kind =
            (new.is_string() && old.is_string()) || (new.is_number() && old.is_number());
        if same_kind && new != old {
            *old = new.clone();
            changed = true;
        }
    }
    changed.then(|| serde_json::to_vec(&mine).ok()).flatten()
}

/// What to do with one login file, given the hashes of the user's file, of what
/// was last copied (the record) and of the agent's copy.
#[derive(Debug, PartialEq, Eq, Clone, Copy)]
pub enum Action {
    Nothing,
    /// The user's file goes into the home.
    CopyIn,
    /// The agent's copy goes to the user's file.
    WriteBack,
}

/// The user's file wins when it changed (or the agent has none); else the
/// agent's copy goes back when it changed; a user without the file is left so.
pub fn decide(user: Option<&str>, copied: Option<&str>, agent: Option<&str>) -> Action {
    match (user, agent) {
        (None, _) => Action::Nothing,
        (Some(u), a) if Some(u) != copied || a.is_none() => Action::CopyIn,
        (Some(_), a) if a != copied => Action::WriteBack,
        _ => Action::Nothing,
    }
}

/// Where the record of `home`'s logins is kept: beside the homes, not in one
/// (`<data>/homes/agent-7` → `<data>/logins/agent-7.json`).
pub fn record(home: &Path) -> PathBuf {
    let name = home.file_name().unwrap_or_default().to_string_lossy();
    let homes = home.parent().unwrap_or(Path::new(""));
    homes.with_file_name("logins").join(format!("{name}.json"))
}

/// Brings each login seed of `home` in line with the user's (see the module).
pub fn sync(home: &Path, seeds: &[(PathBuf, &str)]) -> io::Result<()> {
    let at = record(home);
    let mut rec: BTreeMap<String, String> = std::fs::read(&at)
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .unwrap_or_default();
    let before = rec.clone();
    for (user, rel) in seeds {
        let Some((_, keys)) = LOGINS.iter().find(|(r, _)| r == rel) else {
            continue;
        };
        let Ok(dir) = super::folder_in(home, Path::new(rel).parent().unwrap_or(Path::new("")))
        else {
            continue;
        };
        let mine = dir.join(Path::new(rel).file_name().unwrap_or_default());
        let theirs = read(user, false).ok();
        let agents = read(&mine, true).ok();
        let hash = |b: &Option<Vec<u8>>| b.as_deref().map(digest);
        let (u, a) = (hash(&theirs), hash(&agents));
        let done = match decide(
            u.as_deref(),
            rec.get(*rel).map(String::as_str),
            a.as_deref(),
        ) {
            Action::Nothing => None,
            Action::CopyIn => theirs.filter(|b| replace(&mine, b).is_ok()).and(u),
            Action::WriteBack => {
                let merged = (theirs.as_deref(), agents.as_deref());
                match merged {
                    (Some(t), Some(b)) if shaped(b, keys) => match rotated(rel, t, b) {
                        Some(m) => write_back(user, u.as_deref(), &m)
                            .and_then(|()| replace(&mine, &m))
                            .ok()
                            .map(|()| digest(&m)),
                        // No token of its changed: the user's copy goes in again.
                        None => replace(&mine, t).is_ok().then(|| u.clone()).flatten(),
                    },
                    _ => None,
                }
            }
        };
        if let Some(h) = done {
            rec.insert(rel.to_string(), h);
        }
    }
    if rec != before {
        std::fs::create_dir_all(at.parent().unwrap_or(Path::new("")))?;
        let text = serde_json::to_vec(&rec).map_err(io::Error::other)?;
        replace(&at, &text)?;
    }
    Ok(())
}

fn digest(b: &[u8]) -> String {
    hex::encode(Sha256::digest(b))
}

/// A file's bytes, at most [`MAX`]; a link is refused when `no_link`.
fn read(path: &Path, no_link: bool) -> io::Result<Vec<u8>> {
    use std::os::unix::fs::OpenOptionsExt;
    let flags = if no_link { nix::libc::O_NOFOLLOW } else { 0 };
    let f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(flags | nix::libc::O_NONBLOCK)
        .open(path)?;
    if !f.metadata()?.is_file() {
        return Err(io::Error::other("not a file"));
    }
    let mut out = Vec::new();
    f.take(MAX + 1).read_to_end(&mut out)?;
    if out.len() as u64 > MAX {
        return Err(io::Error::other("too large for a login"));
    }
    Ok(out)
}

/// Whether `bytes` read as a CLI's login with one of `keys` at its top.
fn shaped(bytes: &[u8], keys: &[&str]) -> bool {
    let Ok(serde_json::Value::Object(top)) = serde_json::from_slice(bytes) else {
        return false;
    };
    if keys.is_empty() {
        return !top.is_empty() && top.values().all(|v| v.get("type").is_some());
    }
    keys.iter().any(|k| top.contains_key(*k))
}

/// Writes the user's file, if it is still the one copied in (`was`) and no link.
fn write_back(user: &Path, was: Option<&str>, bytes: &[u8]) -> io::Result<()> {
    if std::fs::symlink_metadata(user)?.file_type().is_symlink() {
        return Err(io::Error::other("the user's file is a link"));
    }
    if read(user, true).ok().map(|b| digest(&b)).as_deref() != was {
        return Err(io::Error::other("the user's file changed meanwhile"));
    }
    replace(user, bytes)
}

/// Replaces `to` atomically (a temporary file beside it, renamed over it: a
/// link at `to` is replaced, not followed), readable by its owner only.
fn replace(to: &Path, bytes: &[u8]) -> io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let name = to.file_name().unwrap_or_default().to_string_lossy();
    let tmp = to.with_file_name(format!(".{name}.{}", uuid::Uuid::now_v7().simple()));
    let written = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(nix::libc::O_NOFOLLOW)
        .open(&tmp)
        .and_then(|mut f| f.write_all(bytes).and_then(|()| f.sync_all()))
        .and_then(|()| std::fs::rename(&tmp, to));
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    written
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_users_change_wins_and_the_agents_goes_back() {
        use Action::*;
        // (user, copied, agent) → action
        let table = [
            (Some("u1"), Some("u1"), Some("u1"), Nothing),
            (Some("u2"), Some("u1"), Some("u1"), CopyIn),
            (Some("u1"), Some("u1"), Some("a2"), WriteBack),
            (Some("u2"), Some("u1"), Some("a2"), CopyIn),
            (Some("u1"), None, Some("a1"), CopyIn),
            (Some("u1"), None, None, CopyIn),
            (Some("u1"), Some("u1"), None, CopyIn),
            (None, Some("u1"), Some("a2"), Nothing),
            (None, None, Some("a1"), Nothing),
        ];
        for (user, copied, agent, expect) in table {
            let got = decide(user, copied, agent);
            assert_eq!(
                got, expect,
                "user {user:?} copied {copied:?} agent {agent:?}"
            );
        }
    }

    #[test]
    fn only_a_cli_login_of_its_shape_is_written_back() {
        let check = |text: &str, keys: &[&str], expect: bool| {
            assert_eq!(shaped(text.as_bytes(), keys), expect, "{text} {keys:?}");
        };
        check(
            r#"{"claudeAiOauth": {"refreshToken": "r"}}"#,
            &["claudeAiOauth"],
            true,
        );
        check(r#"{"hooks": {}}"#, &["claudeAiOauth"], false);
        check(r#"["claudeAiOauth"]"#, &["claudeAiOauth"], false);
        check("not json", &["tokens"], false);
        check(r#"{"anthropic": {"type": "oauth"}}"#, &[], true);
        check(r#"{"anthropic": {"type": "oauth"}, "x": 1}"#, &[], false);
        check("{}", &[], false);
    }

    #[test]
    fn only_the_rotated_tokens_of_an_existing_login_go_back() {
        let check = |rel: &str, user: &str, agent: &str, expect: Option<&str>| {
            let got = rotated(rel, user.as_bytes(), agent.as_bytes())
                .map(|b| serde_json::from_slice::<serde_json::Value>(&b).unwrap());
            let want = expect.map(|e| serde_json::from_str::<serde_json::Value>(e).unwrap());
            assert_eq!(got, want, "{rel}: {user} <- {agent}");
        };
        let oc = ".local/share/opencode/auth.json";
        let user =
            r#"{"anthropic": {"type": "oauth", "access": "a1", "refresh": "r1", "expires": 1}}"#;
        check(
            oc,
            user,
            r#"{"anthropic": {"type": "oauth", "access": "a2", "refresh": "r2", "expires": 2}}"#,
            Some(
                r#"{"anthropic": {"type": "oauth", "access": "a2", "refresh": "r2", "expires": 2}}"#,
            ),
        );
        // A provider the agent added (OpenCode fetches a `wellknown` one's config) never goes back.
        check(
            oc,
            user,
            r#"{"anthropic": {"type": "oauth", "access": "a1", "refresh": "r1", "expires": 1},
                "https://evil.test": {"type": "wellknown", "key": "K", "token": "t"}}"#,
            None,
        );
        // Nor a swapped account type, nor an API key set where the user had none.
        check(
            oc,
            user,
            r#"{"anthropic": {"type": "api", "key": "attacker"}}"#,
            None,
        );
        check(
            ".codex/auth.json",
            r#"{"OPENAI_API_KEY": null, "tokens": {"access_token": "a1", "refresh_token": "r1"}}"#,
            r#"{"OPENAI_API_KEY": "attacker", "tokens": {"access_token": "a1", "refresh_token": "r1"}}"#,
            None,
        );
        check(
            ".gemini/oauth_creds.json",
            r#"{"refresh_token": "r1"}"#,
            r#"{"refresh_token": 5}"#,
            None,
        );
        check(".claude/settings.json", "{}", "{}", None);
    }

    fn claude(token: &str) -> String {
        format!(r#"{{"claudeAiOauth": {{"refreshToken": "{token}"}}}}"#)
    }

    #[test]
    fn a_refreshed_login_reaches_the_user_and_a_new_one_the_agent() {
        use std::os::unix::fs::PermissionsExt;
        let t = tempfile::tempdir().unwrap();
        let user = t.path().join("user/.credentials.json");
        std::fs::create_dir_all(user.parent().unwrap()).unwrap();
        std::fs::write(&user, claude("r1")).unwrap();
        let home = t.path().join("data/homes/agent-3");
        std::fs::create_dir_all(&home).unwrap();
        let seeds = [(user.clone(), ".claude/.credentials.json")];
        let mine = home.join(".claude/.credentials.json");
        let text = |p: &Path| std::fs::read_to_string(p).unwrap();
        sync(&home, &seeds).unwrap();
        assert_eq!(text(&mine), claude("r1"));
        assert_eq!(record(&home), t.path().join("data/logins/agent-3.json"));
        let json = |p: &Path| serde_json::from_str::<serde_json::Value>(&text(p)).unwrap();
        let claude_json = |t: &str| serde_json::from_str::<serde_json::Value>(&claude(t)).unwrap();
        // The agent's CLI refreshed: the user's file gets it, readable by its owner only.
        std::fs::write(&mine, claude("r2")).unwrap();
        sync(&home, &seeds).unwrap();
        assert_eq!(json(&user), claude_json("r2"));
        let mode = std::fs::metadata(&user).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        // The user logged in again: the agent's copy follows.
        std::fs::write(&user, claude("r3")).unwrap();
        sync(&home, &seeds).unwrap();
        assert_eq!(text(&mine), claude("r3"));
        // Not a login's shape, or a link: nothing goes back.
        std::fs::write(&mine, r#"{"hooks": 1}"#).unwrap();
        sync(&home, &seeds).unwrap();
        assert_eq!(text(&user), claude("r3"));
        // Only the rotated tokens go back: a key the agent added stays its own.
        let more = r#"{"claudeAiOauth": {"refreshToken": "r4", "scopes": ["x"]}, "evil": 1}"#;
        std::fs::write(&mine, more).unwrap();
        sync(&home, &seeds).unwrap();
        assert_eq!(json(&user), claude_json("r4"));
        std::fs::remove_file(&mine).unwrap();
        let elsewhere = t.path().join("elsewhere.json");
        std::fs::write(&elsewhere, claude("planted")).unwrap();
        std::os::unix::fs::symlink(&elsewhere, &mine).unwrap();
        sync(&home, &seeds).unwrap();
        assert_eq!(json(&user), claude_json("r4"));
        assert_eq!(text(&elsewhere), claude("planted"));
    }
}
