//! What one identity may make the server hold for its subscriptions.
//!
//! A subscription keeps URIs in memory for as long as it lasts, and checking a
//! filter reads the store, so both are bounded per identity (the lead, or one
//! agent, across all its sessions): URIs of at most [`MAX_URI`] bytes, at most
//! [`MAX_FILTER`] of them in one listen or one legacy session, at most
//! [`MAX_LISTENS`] listens open at once and [`MAX_BYTES`] of URIs held in all. A
//! refusal names the limit and what to do instead; it is decided before anything
//! is read from the store.
//!
//! A listen whose client has gone (its response stream closed: over HTTP that is
//! how a 2026-07-28 client cancels, and what a client that exits or is killed
//! leaves) is an orphan: it lingers at most [`ORPHAN_GRACE`], so a client that
//! lost the stream can still resume it, and it never stands in the way of a new
//! one: a listen that would go over the limits first ends its owner's orphans,
//! oldest first. What the budget counts is therefore what clients still listen to.

use kernel::Caller;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// The longest URI kept (the server's own URIs are well under 300 bytes).
pub const MAX_URI: usize = 1024;
/// URIs in one `subscriptions/listen` filter, or subscribed in one legacy session.
pub const MAX_FILTER: usize = 1024;
/// `subscriptions/listen` requests one identity may have open at once.
pub const MAX_LISTENS: usize = 32;
/// Bytes of URIs one identity may hold across its listens and legacy sessions.
pub const MAX_BYTES: usize = 1024 * 1024;
/// How long a listen outlives its response stream: time for a client that lost
/// the stream to resume it (`Last-Event-ID`, the server's retry hint is 3 s) and
/// read what it missed, the listen's end included.
pub const ORPHAN_GRACE: Duration = Duration::from_secs(10);

/// Why a subscription was refused.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum Refused {
    #[error(
        "a resource URI of {0} bytes: at most {MAX_URI}; resources/list and resources/templates/list show the URIs there are"
    )]
    UriTooLong(usize),
    #[error(
        "{0} URIs in one subscription: at most {MAX_FILTER}; watch the instance's status or channel, which change with its parts, instead of each part"
    )]
    TooManyUris(usize),
    #[error(
        "{MAX_LISTENS} subscriptions/listen requests of this identity are open already (at most {MAX_LISTENS}); cancel one, or put its URIs in one filter"
    )]
    TooManyListens,
    #[error(
        "this identity's subscriptions would hold {0} bytes of URIs: at most {MAX_BYTES}; unsubscribe from what you no longer need"
    )]
    TooManyBytes(usize),
}

/// Whose budget a subscription counts against.
pub fn owner(caller: &Caller) -> String {
    match caller {
        Caller::Lead => "lead".to_owned(),
        Caller::Agent(a) => format!("agent:{}", a.agent_id),
    }
}

/// Checks the shape of a filter before anything else looks at it.
pub fn check_filter(uris: &[String]) -> Result<usize, Refused> {
    if uris.len() > MAX_FILTER {
        return Err(Refused::TooManyUris(uris.len()));
    }
    if let Some(long) = uris.iter().find(|u| u.len() > MAX_URI) {
        return Err(Refused::UriTooLong(long.len()));
    }
    Ok(uris.iter().map(String::len).sum())
}

/// One open listen, as its owner's budget sees it.
struct Listen {
    bytes: usize,
    /// When its client went (its response stream closed), in the order of the
    /// server's listens and orphans: the smallest went first.
    orphaned: Option<u64>,
    /// Cancelled when its slot goes to a new listen.
    end: CancellationToken,
}

/// What one identity holds.
#[derive(Default)]
struct Held {
    listens: HashMap<u64, Listen>,
    /// Bytes of URIs, of its listens and its legacy sessions alike.
    bytes: usize,
}

impl Held {
    fn is_empty(&self) -> bool {
        self.listens.is_empty() && self.bytes == 0
    }

    /// Room for `listens` more listens and `bytes` more bytes, made by ending
    /// orphaned listens, oldest first; or why there is none.
    fn make_room(&mut self, listens: usize, bytes: usize) -> Result<(), Refused> {
        while self.listens.len() + listens > MAX_LISTENS || self.bytes + bytes > MAX_BYTES {
            let oldest = self
                .listens
                .iter()
                .filter_map(|(id, l)| l.orphaned.map(|at| (at, *id)))
                .min();
            let Some((_, id)) = oldest else { break };
            if let Some(gone) = self.listens.remove(&id) {
                self.bytes -= gone.bytes;
                gone.end.cancel();
            }
        }
        if self.listens.len() + listens > MAX_LISTENS {
            return Err(Refused::TooManyListens);
        }
        if self.bytes + bytes > MAX_BYTES {
            return Err(Refused::TooManyBytes(self.bytes + bytes));
        }
        Ok(())
    }
}

/// What every identity holds (one per server).
#[derive(Default)]
pub struct Budgets {
    held: Mutex<HashMap<String, Held>>,
    next: AtomicU64,
}

impl Budgets {
    /// Takes `bytes` bytes of URIs (a legacy subscription) from `owner`'s budget,
    /// or refuses.
    pub fn take(&self, owner: &str, bytes: usize) -> Result<(), Refused> {
        self.with(owner, |h| {
            h.make_room(0, bytes)?;
            h.bytes += bytes;
            Ok(())
        })
    }

    /// Gives back what [`Budgets::take`] took.
    pub fn give_back(&self, owner: &str, bytes: usize) {
        self.with(owner, |h| h.bytes = h.bytes.saturating_sub(bytes));
    }

    /// Runs `f` on what `owner` holds, forgetting the owner once it holds nothing.
    fn with<T>(&self, owner: &str, f: impl FnOnce(&mut Held) -> T) -> T {
        let mut held = self.held.lock().unwrap();
        let h = held.entry(owner.to_owned()).or_default();
        let out = f(h);
        if h.is_empty() {
            held.remove(owner);
        }
        out
    }
}

/// One open listen's share of its owner's budget, given back when dropped.
pub struct Lease {
    budgets: Arc<Budgets>,
    owner: String,
    id: u64,
    end: CancellationToken,
}

impl Lease {
    /// A listen of `uris` for `owner`: the filter checked, then the budget taken
    /// (ending the owner's orphaned listens if that makes room).
    pub fn listen(budgets: &Arc<Budgets>, owner: String, uris: &[String]) -> Result<Self, Refused> {
        let bytes = check_filter(uris)?;
        let id = budgets.next.fetch_add(1, Ordering::Relaxed);
        let end = CancellationToken::new();
        budgets.with(&owner, |h| {
            h.make_room(1, bytes)?;
            h.bytes += bytes;
            let listen = Listen {
                bytes,
                orphaned: None,
                end: end.clone(),
            };
            h.listens.insert(id, listen);
            Ok(())
        })?;
        Ok(Self {
            budgets: budgets.clone(),
            owner,
            id,
            end,
        })
    }

    /// Its client is gone: from now on the listen gives way to a new one.
    pub fn orphan(&self) {
        let when = self.budgets.next.fetch_add(1, Ordering::Relaxed);
        self.budgets.with(&self.owner, |h| {
            if let Some(l) = h.listens.get_mut(&self.id) {
                l.orphaned.get_or_insert(when);
            }
        });
    }

    /// Resolves once the listen's slot went to a new listen: it must end.
    pub async fn ended(&self) {
        self.end.cancelled().await;
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        self.budgets.with(&self.owner, |h| {
            if let Some(l) = h.listens.remove(&self.id) {
                h.bytes -= l.bytes;
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_filter_is_checked_before_any_budget() {
        let many = vec!["x".to_owned(); MAX_FILTER + 1];
        assert_eq!(
            check_filter(&many),
            Err(Refused::TooManyUris(MAX_FILTER + 1))
        );
        let long = vec!["x".repeat(MAX_URI + 1)];
        assert_eq!(check_filter(&long), Err(Refused::UriTooLong(MAX_URI + 1)));
        assert_eq!(check_filter(&["ab".into(), "c".into()]), Ok(3));
    }

    #[test]
    fn listens_are_counted_per_owner_and_given_back() {
        let b = Arc::new(Budgets::default());
        let leases: Vec<Lease> = (0..MAX_LISTENS)
            .map(|_| Lease::listen(&b, "agent:1".into(), &["u".into()]).unwrap())
            .collect();
        assert_eq!(
            Lease::listen(&b, "agent:1".into(), &[]).err(),
            Some(Refused::TooManyListens)
        );
        // Another identity is not held back by the first one's listens.
        assert!(Lease::listen(&b, "agent:2".into(), &[]).is_ok());
        drop(leases);
        assert!(Lease::listen(&b, "agent:1".into(), &[]).is_ok());
        assert!(
            b.held.lock().unwrap().is_empty(),
            "everything was given back"
        );
    }

    #[test]
    fn bytes_are_bounded_across_listens_and_sessions() {
        let b = Budgets::default();
        b.take("lead", MAX_BYTES - 10).unwrap();
        assert_eq!(
            b.take("lead", 11),
            Err(Refused::TooManyBytes(MAX_BYTES + 1))
        );
        b.take("lead", 10).unwrap();
        b.give_back("lead", MAX_BYTES);
        assert!(b.held.lock().unwrap().is_empty());
    }

    /// What a new listen does to an owner's full budget, by which listens are
    /// orphans (their client gone) and in what order they became so.
    #[test]
    fn a_new_listen_ends_orphans_oldest_first_and_never_a_live_one() {
        // (orphaned, in this order; the new listen is served; which were ended)
        let cases: &[(&[usize], bool, &[usize])] = &[
            (&[], false, &[]),
            (&[7], true, &[7]),
            (&[9, 3], true, &[9]),
            (&[3, 9], true, &[3]),
        ];
        for (orphans, served, ended) in cases {
            let b = Arc::new(Budgets::default());
            let leases: Vec<Lease> = (0..MAX_LISTENS)
                .map(|_| Lease::listen(&b, "lead".into(), &["u".into()]).unwrap())
                .collect();
            for &i in *orphans {
                leases[i].orphan();
            }
            let new = Lease::listen(&b, "lead".into(), &["v".into()]);
            assert_eq!(new.is_ok(), *served, "orphans {orphans:?}");
            if !served {
                assert_eq!(new.err(), Some(Refused::TooManyListens));
            }
            let gone: Vec<usize> = (0..MAX_LISTENS)
                .filter(|&i| leases[i].end.is_cancelled())
                .collect();
            assert_eq!(&gone, ended, "orphans {orphans:?}");
            drop(leases);
            let held = b.held.lock().unwrap();
            let left = held.get("lead").map_or(0, |h| h.listens.len());
            assert_eq!(left, usize::from(*served), "orphans {orphans:?}");
        }
    }

    #[test]
    fn orphans_give_way_to_bytes_too_and_are_given_back_once() {
        let b = Arc::new(Budgets::default());
        let big = vec!["x".repeat(MAX_URI); MAX_FILTER - 1];
        let orphan = Lease::listen(&b, "lead".into(), &big).unwrap();
        orphan.orphan();
        // Legacy subscriptions of the same identity need the bytes the orphan holds.
        b.take("lead", MAX_BYTES - 10).unwrap();
        assert!(orphan.end.is_cancelled(), "the orphan gave way");
        drop(orphan);
        assert_eq!(
            b.take("lead", 11),
            Err(Refused::TooManyBytes(MAX_BYTES + 1))
        );
        b.give_back("lead", MAX_BYTES - 10);
        assert!(
            b.held.lock().unwrap().is_empty(),
            "nothing given back twice"
        );
    }
}
