//! Finding a CLI when the PATH does not have it.
//!
//! Desktop apps start MCP servers with a minimal PATH (launchd's `/usr/bin:/bin`),
//! so a CLI installed with npm, Homebrew or a user-level installer is "not found"
//! although it is there. After the PATH, the usual install places are searched:
//! the npm global prefix (`NPM_CONFIG_PREFIX`, `~/.npmrc`, `~/.npm-global`), the
//! version managers' current Node (`~/.volta`, `~/.nvm`), `~/.local/bin`,
//! `~/.bun/bin`, `/opt/homebrew/bin`, `/usr/local/bin`.

use std::path::{Path, PathBuf};

/// Where a program was found, and whether it was on the PATH.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Found {
    pub path: PathBuf,
    pub on_path: bool,
}

fn executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// The folders searched after the PATH, in order.
pub fn usual_places() -> Vec<PathBuf> {
    usual_places_for(crate::sandbox::user_home())
}

fn usual_places_for(home: Option<PathBuf>) -> Vec<PathBuf> {
    let mut v = Vec::new();
    if let Some(p) = std::env::var_os("NPM_CONFIG_PREFIX").filter(|p| !p.is_empty()) {
        v.push(PathBuf::from(p).join("bin"));
    }
    if let Some(h) = &home {
        // `prefix=...` in the user's .npmrc is where `npm i -g` put it.
        if let Ok(rc) = std::fs::read_to_string(h.join(".npmrc")) {
            for line in rc.lines() {
                if let Some(p) = line.trim().strip_prefix("prefix=") {
                    let p = p.trim().replace("${HOME}", &h.display().to_string());
                    let p = p
                        .strip_prefix("~/")
                        .map_or_else(|| PathBuf::from(&p), |r| h.join(r));
                    v.push(p.join("bin"));
                }
            }
        }
        v.push(h.join(".npm-global/bin"));
        v.push(h.join(".volta/bin"));
        v.extend(newest_nvm_node(h));
        v.push(h.join(".local/bin"));
        v.push(h.join(".bun/bin"));
        v.push(h.join(".cursor/bin"));
    }
    v.push("/opt/homebrew/bin".into());
    v.push("/usr/local/bin".into());
    v
}

/// `~/.nvm/versions/node/<newest>/bin`, if nvm is used.
fn newest_nvm_node(home: &Path) -> Option<PathBuf> {
    let dir = home.join(".nvm/versions/node");
    let mut versions: Vec<(Vec<u64>, PathBuf)> = std::fs::read_dir(&dir)
        .ok()?
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            let nums = name
                .trim_start_matches('v')
                .split('.')
                .map(|n| n.parse::<u64>().ok())
                .collect::<Option<Vec<_>>>()?;
            Some((nums, e.path().join("bin")))
        })
        .collect();
    versions.sort();
    versions.pop().map(|(_, p)| p)
}

/// Finds `program`: a path as given, else on the PATH, else in the usual places.
pub fn locate(program: &str) -> Option<Found> {
    if program.contains('/') {
        let p = PathBuf::from(program);
        return executable(&p).then_some(Found {
            path: p,
            on_path: true,
        });
    }
    if let Some(paths) = std::env::var_os("PATH") {
        for d in std::env::split_paths(&paths) {
            let p = d.join(program);
            if executable(&p) {
                return Some(Found {
                    path: p,
                    on_path: true,
                });
            }
        }
    }
    usual_places().into_iter().find_map(|d| {
        let p = d.join(program);
        executable(&p).then_some(Found {
            path: p,
            on_path: false,
        })
    })
}

/// The PATH for a CLI found outside it: its folder first (an npm shim runs `node`
/// from beside it), then the PATH it had.
pub fn path_with(found: &Found) -> Option<std::ffi::OsString> {
    if found.on_path {
        return None;
    }
    let dir = found.path.parent()?.to_owned();
    let rest = std::env::var_os("PATH").unwrap_or_default();
    std::env::join_paths(std::iter::once(dir).chain(std::env::split_paths(&rest))).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cli_outside_the_path_is_found_in_the_usual_places() {
        let home = tempfile::tempdir().unwrap();
        let bin = home.path().join(".local/bin");
        std::fs::create_dir_all(&bin).unwrap();
        let exe = bin.join("fake-cli-for-locate");
        std::fs::write(&exe, "#!/bin/sh\n").unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&exe, std::fs::Permissions::from_mode(0o755)).unwrap();
        let places = usual_places_for(Some(home.path().to_owned()));
        assert!(places.contains(&bin), "{places:?}");
        assert!(places.contains(&PathBuf::from("/opt/homebrew/bin")));
        assert!(locate("/no/such/program").is_none());
        assert_eq!(
            locate(&exe.display().to_string()).map(|f| f.path),
            Some(exe.clone())
        );
    }
}
