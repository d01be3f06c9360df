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
//! A listen's share goes back when the listen ends, and a listen ends when its
//! client goes (its response stream closed: over HTTP that is how a 2026-07-28
//! client cancels, and what a client that exits or is killed leaves; see
//! `listen.rs`). What the budget counts is therefore what clients still listen to.

use kernel::Caller;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// The longest URI kept (the server's own URIs are well under 300 bytes).
pub const MAX_URI: usize = 1024;
/// URIs in one `subscriptions/listen` filter, or subscribed in one legacy session.
pub const MAX_FILTER: usize = 1024;
/// `subscriptions/listen` requests one identity may have open at once.
pub const MAX_LISTENS: usize = 32;
/// Bytes of URIs one identity may hold across its listens and legacy sessions.
pub const MAX_BYTES: usize = 1024 * 1024;
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

    /// Whether `listens` more listens and `bytes` more bytes fit, or why not.
    fn fits(&self, listens: usize, bytes: usize) -> Result<(), Refused> {
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
            h.fits(0, bytes)?;
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
}

impl Lease {
    /// A listen of `uris` for `owner`: the filter checked, then the budget taken.
    pub fn listen(budgets: &Arc<Budgets>, owner: String, uris: &[String]) -> Result<Self, Refused> {
        let bytes = check_filter(uris)?;
        let id = budgets.next.fetch_add(1, Ordering::Relaxed);
        budgets.with(&owner, |h| {
            h.fits(1, bytes)?;
            h.bytes += bytes;
            h.listens.insert(id, Listen { bytes });
            Ok(())
        })?;
        Ok(Self {
            budgets: budgets.clone(),
            owner,
            id,
        })
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
}
