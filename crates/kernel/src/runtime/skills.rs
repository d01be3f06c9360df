//! The agents' skills as read from their folders, kept: a skill is read and
//! hashed again only when what its folder holds changed (a stat-only walk), so
//! neither a run's start nor an agent listing its skills over and over reads
//! every file each time.

use domain::error::{Error, Result};
use domain::skills::Skill;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

type Fingerprint = Vec<(PathBuf, u64, std::time::SystemTime)>;

/// Folders kept at most (then the cache starts afresh).
const KEPT: usize = 256;

/// Skills read before, by folder, with what their folder held then; locked only
/// by [`Skills::read`].
#[derive(Default)]
pub struct Skills {
    kept: Mutex<HashMap<PathBuf, (Fingerprint, Skill)>>,
}

impl Skills {
    /// One skill, read again only if its folder changed. Blocking.
    fn read(&self, dir: &Path) -> std::result::Result<Skill, String> {
        let print = domain::skills::fingerprint(dir)?;
        if let Some((p, s)) = self.kept.lock().unwrap().get(dir)
            && *p == print
        {
            return Ok(s.clone());
        }
        let skill = domain::skills::load(dir)?;
        let mut kept = self.kept.lock().unwrap();
        if kept.len() >= KEPT {
            kept.clear();
        }
        kept.insert(dir.to_owned(), (print, skill.clone()));
        Ok(skill)
    }

    /// The skills of these folders, checked as [`domain::skills::load_all`] checks
    /// them (an error names the skill and its file). Blocking.
    fn read_all(&self, dirs: &[PathBuf]) -> std::result::Result<Vec<Skill>, String> {
        domain::skills::load_all_with(dirs, |d| self.read(d))
    }
}

impl Skills {
    /// The skills of these folders (off the runtime's threads): the error names
    /// the skill and its file.
    pub(crate) async fn read_dirs(self: &Arc<Self>, dirs: &[PathBuf]) -> Result<Vec<Skill>> {
        if dirs.is_empty() {
            return Ok(Vec::new());
        }
        let (skills, dirs) = (self.clone(), dirs.to_vec());
        tokio::task::spawn_blocking(move || skills.read_all(&dirs))
            .await
            .map_err(|e| Error::internal(e.to_string()))?
            .map_err(Error::invalid)
    }

    /// The skills of these folders as they are now; one that went missing is left
    /// out (its agent's next run says why).
    pub(crate) async fn present(self: &Arc<Self>, dirs: Vec<PathBuf>) -> Result<Vec<Skill>> {
        let skills = self.clone();
        tokio::task::spawn_blocking(move || {
            dirs.iter().filter_map(|d| skills.read(d).ok()).collect()
        })
        .await
        .map_err(|e| Error::internal(e.to_string()))
    }
}
