//! The job queue between async callers and the store's threads.
//!
//! Why not a channel crate: an idle receiver of crossbeam's (and std's) channels spins
//! and calls `sched_yield` before it parks. With a writer and eight readers waiting on
//! two cores, those yields were 9% of the send path's samples in the profile. Here an
//! idle thread sleeps on a condition variable at once, and the writer takes every
//! queued job in one lock.

use std::collections::VecDeque;
use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::Duration;

pub(super) struct Queue<T> {
    state: Mutex<State<T>>,
    ready: Condvar,
}

struct State<T> {
    items: VecDeque<T>,
    closed: bool,
}

/// What a wait with a time limit found.
pub(super) enum Taken<T> {
    Items(Vec<T>),
    Idle,
    Closed,
}

impl<T> Queue<T> {
    pub(super) fn new() -> Self {
        Self {
            state: Mutex::new(State {
                items: VecDeque::new(),
                closed: false,
            }),
            ready: Condvar::new(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State<T>> {
        // A job never runs under this lock, so a poisoned lock holds consistent data.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Queues `item`; gives it back when the queue is closed.
    pub(super) fn push(&self, item: T) -> Result<(), T> {
        let mut s = self.lock();
        if s.closed {
            return Err(item);
        }
        s.items.push_back(item);
        drop(s);
        self.ready.notify_one();
        Ok(())
    }

    /// Closes the queue: pushes fail, waiting threads take what is left and stop.
    pub(super) fn close(&self) {
        self.lock().closed = true;
        self.ready.notify_all();
    }

    /// Waits for at least one item (up to `idle`, if given) and takes up to `max`.
    /// A closed queue still hands out what it holds before it says `Closed`.
    pub(super) fn take(&self, max: usize, idle: Option<Duration>) -> Taken<T> {
        let mut s = self.lock();
        while s.items.is_empty() {
            if s.closed {
                return Taken::Closed;
            }
            s = match idle {
                None => self.ready.wait(s).unwrap_or_else(|p| p.into_inner()),
                Some(limit) => {
                    let (s, timeout) = self
                        .ready
                        .wait_timeout(s, limit)
                        .unwrap_or_else(|p| p.into_inner());
                    if timeout.timed_out() && s.items.is_empty() {
                        return if s.closed { Taken::Closed } else { Taken::Idle };
                    }
                    s
                }
            };
        }
        let n = max.min(s.items.len());
        let items: Vec<T> = s.items.drain(..n).collect();
        let more = !s.items.is_empty();
        drop(s);
        if more {
            // Another thread may take the rest while this one works.
            self.ready.notify_one();
        }
        Taken::Items(items)
    }

    /// Puts `items` (taken last) back at the front, in their order: what a taker
    /// took but cannot carry this time goes first next time.
    pub(super) fn put_back(&self, items: Vec<T>) {
        let mut s = self.lock();
        for item in items.into_iter().rev() {
            s.items.push_front(item);
        }
    }

    /// Takes at once, without waiting, up to `max` items from the front for as long
    /// as each `fits` (the first that does not stays first, so order is kept).
    pub(super) fn take_ready(&self, max: usize, fits: impl Fn(&T) -> bool) -> Vec<T> {
        let mut s = self.lock();
        let n = s.items.iter().take(max).take_while(|i| fits(i)).count();
        s.items.drain(..n).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn what_is_put_back_goes_first_in_its_order() {
        let q = Queue::new();
        for i in 0..5 {
            q.push(i).unwrap();
        }
        let Taken::Items(mut took) = q.take(4, None) else {
            panic!("expected items")
        };
        q.put_back(took.split_off(2));
        q.push(5).unwrap();
        let Taken::Items(rest) = q.take(10, None) else {
            panic!("expected items")
        };
        assert_eq!((took, rest), (vec![0, 1], vec![2, 3, 4, 5]));
    }

    #[test]
    fn hands_out_in_order_in_batches_and_drains_after_close() {
        let q = Queue::new();
        for i in 0..5 {
            q.push(i).unwrap();
        }
        let Taken::Items(first) = q.take(3, None) else {
            panic!("expected items")
        };
        assert_eq!(first, vec![0, 1, 2]);
        q.close();
        assert_eq!(q.push(9), Err(9), "a closed queue refuses new items");
        let Taken::Items(rest) = q.take(10, None) else {
            panic!("a closed queue still hands out what it holds")
        };
        assert_eq!(rest, vec![3, 4]);
        assert!(matches!(q.take(10, None), Taken::Closed));
    }

    #[test]
    fn a_ready_take_stops_at_the_first_that_does_not_fit() {
        let q = Queue::new();
        for i in [2, 4, 5, 6] {
            q.push(i).unwrap();
        }
        assert_eq!(q.take_ready(10, |i| i % 2 == 0), vec![2, 4]);
        assert_eq!(q.take_ready(1, |_| true), vec![5]);
        assert_eq!(q.take_ready(10, |_| true), vec![6]);
        assert!(q.take_ready(10, |_| true).is_empty());
    }

    #[test]
    fn an_idle_wait_ends_and_a_push_wakes_a_waiter() {
        let q = Arc::new(Queue::new());
        assert!(matches!(
            q.take(1, Some(Duration::from_millis(20))),
            Taken::Idle
        ));
        let waiter = {
            let q = q.clone();
            std::thread::spawn(move || match q.take(1, None) {
                Taken::Items(v) => v,
                _ => vec![],
            })
        };
        std::thread::sleep(Duration::from_millis(20));
        q.push(7).unwrap();
        assert_eq!(waiter.join().unwrap(), vec![7]);
    }
}
