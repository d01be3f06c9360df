//! WAL checkpoints on their own thread.
//!
//! Why: SQLite's automatic checkpoint runs on the connection that committed, here the
//! one writer, so every thousandth page of commits stalled all writes while pages
//! were copied into the database file and synced (7% of the send path's samples and
//! 15% of an `@all` fan-out's in the profile, plus the time waiting on the disk).
//! Here the writer's WAL hook only counts; a checkpointer thread with its own
//! connection copies pages while the writer goes on.
//!
//! A passive checkpoint never waits for the writer, so under a write load it never
//! quite catches up and the log would grow forever (SQLite restarts the log only when
//! a checkpoint copied all of it). Past [`HARD_LIMIT`] pages the writer therefore
//! checkpoints itself, waiting until the log can restart, which bounds it: when the
//! thread's pass is running it tries again at its next commit, and past twice the
//! limit it waits for that pass first.

use super::pragmas::configure;
use rusqlite::{Connection, OpenFlags};
use std::path::Path;
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::{Arc, Condvar, Mutex};

/// WAL pages after which the checkpointer is woken (SQLite's own default).
const SOFT_LIMIT: i32 = 1_000;
/// WAL pages after which the writer checkpoints inline (16 MiB of 4 KiB pages).
/// Under a steady write load this is how the log restarts, since passive passes
/// never see it idle; by then they have copied all but the last thousand pages.
const HARD_LIMIT: i32 = 4_000;

#[derive(Default)]
pub(super) struct Checkpointer {
    state: Mutex<(bool, bool)>, // (owed, closed)
    wake: Condvar,
    /// The log's size in pages when the last pass was asked for. A pass is owed only
    /// once another [`SOFT_LIMIT`] pages were written (or the log restarted): a page
    /// written over and over is then copied once per thousand commits, not once per
    /// commit, which is what a checkpoint after every commit cost.
    owed_at: AtomicI32,
    /// Held by whoever checkpoints: the thread's passive pass, or the writer's
    /// inline one. SQLite refuses a checkpoint at once (SQLITE_BUSY, no busy handler)
    /// while another connection runs one, so without this the writer's checkpoint at
    /// the hard limit failed whenever it met the thread's pass, and the log grew on
    /// for as long as that pass took (past 11,000 pages under a loaded CPU). Now the
    /// log stays under twice the hard limit (plus one transaction).
    pass: Mutex<()>,
}

impl Checkpointer {
    /// Starts the thread and hooks the writer's commits to it.
    pub(super) fn start(path: &Path, writer: &mut Connection) -> std::io::Result<Arc<Self>> {
        let me = Arc::new(Self::default());
        let (thread_me, path) = (me.clone(), path.to_owned());
        std::thread::Builder::new()
            .name("store-checkpoint".into())
            .spawn(move || thread_me.run(&path))?;
        let hook_me = me.clone();
        // Replaces SQLite's automatic checkpoint (which is itself a WAL hook).
        let hooked = writer.wal_hook(Some(move |wal: &mut rusqlite::hooks::Wal, pages| {
            if pages >= HARD_LIMIT {
                // While the thread's pass runs, the writer goes on and tries again at its
                // next commit; only a log twice the limit makes it wait for the pass.
                // Then RESTART waits (busy handler) for readers to leave the log, so this
                // pass completes and the next write starts the log over.
                let _pass = match hook_me.pass.try_lock() {
                    Ok(held) => held,
                    Err(std::sync::TryLockError::Poisoned(p)) => p.into_inner(),
                    Err(std::sync::TryLockError::WouldBlock) if pages < 2 * HARD_LIMIT => {
                        return Ok(());
                    }
                    Err(std::sync::TryLockError::WouldBlock) => {
                        hook_me.pass.lock().unwrap_or_else(|p| p.into_inner())
                    }
                };
                if let Err(e) = wal.checkpoint_v2(rusqlite::wal::CheckpointMode::RESTART) {
                    tracing::warn!("inline checkpoint of a {pages}-page log failed: {e}");
                }
            } else if pages >= SOFT_LIMIT {
                let last = hook_me.owed_at.load(Ordering::Relaxed);
                if pages < last || pages - last >= SOFT_LIMIT {
                    hook_me.owe(pages);
                }
            }
            Ok(())
        }));
        if let Err(e) = hooked {
            // Without the hook SQLite's own checkpoints stay on; nothing is lost.
            tracing::warn!("cannot hook the WAL, checkpoints stay on the writer: {e}");
        }
        Ok(me)
    }

    fn owe(&self, pages: i32) {
        self.owed_at.store(pages, Ordering::Relaxed);
        let mut s = self.state.lock().unwrap_or_else(|p| p.into_inner());
        if !s.0 {
            s.0 = true;
            drop(s);
            self.wake.notify_one();
        }
    }

    pub(super) fn close(&self) {
        self.state.lock().unwrap_or_else(|p| p.into_inner()).1 = true;
        self.wake.notify_one();
    }

    fn run(&self, path: &Path) {
        let mut conn: Option<Connection> = None;
        loop {
            {
                let mut s = self.state.lock().unwrap_or_else(|p| p.into_inner());
                while !s.0 && !s.1 {
                    s = self.wake.wait(s).unwrap_or_else(|p| p.into_inner());
                }
                if s.1 {
                    return;
                }
                s.0 = false;
            }
            if conn.is_none() {
                conn = Connection::open_with_flags(
                    path,
                    OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
                )
                .and_then(|c| configure(&c).map(|()| c))
                .inspect_err(|e| tracing::warn!("the checkpointer cannot open the store: {e}"))
                .ok();
            }
            if let Some(c) = &conn {
                let _pass = self.pass.lock().unwrap_or_else(|p| p.into_inner());
                let done = c.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |_| Ok(()));
                if let Err(e) = done {
                    tracing::warn!("checkpoint failed: {e}");
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::Store;
    use super::HARD_LIMIT;
    use std::time::{Duration, Instant};

    /// Tens of thousands of log pages go through: the database file receives them
    /// (someone checkpoints, though the writer's own automatic checkpoint is off) and
    /// the log never grows far past twice the hard limit.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn checkpoints_keep_up_and_the_log_stays_bounded() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.db");
        let store = Store::open(&path).unwrap();
        let value = "x".repeat(8_000);
        for i in 0..8_000 {
            let v = value.clone();
            store
                .write(move |c| {
                    c.execute(
                        "INSERT OR REPLACE INTO kernel_state (key, value) VALUES (?1, ?2)",
                        (format!("k{}", i % 500), v),
                    )?;
                    Ok(())
                })
                .await
                .unwrap();
        }
        let size = |p: &std::path::Path| std::fs::metadata(p).map(|m| m.len()).unwrap_or(0);
        let deadline = Instant::now() + Duration::from_secs(20);
        while size(&path) < 500 * 8_000 {
            assert!(
                Instant::now() < deadline,
                "no checkpoint reached the database file ({} bytes)",
                size(&path)
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let wal = size(&dir.path().join("state.db-wal"));
        let bound = (2 * HARD_LIMIT as u64 + 2_000) * (4_096 + 24);
        assert!(wal <= bound, "the log reached {wal} bytes (bound {bound})");
    }
}
