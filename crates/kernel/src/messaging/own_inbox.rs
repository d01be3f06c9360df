//! The one way into an inbox's state machine: a store job that runs once the
//! member's broadcasts are rows of its own, alone or piped with the other jobs
//! of its transaction (see `inbox.rs`).

use crate::Scope;
use crate::messaging::Messaging;
use crate::messaging::broadcast;
use crate::timing::Clock;
use domain::error::Result;
use store::sql::Connection;
use store::{Isolation, Rest, Then, WriteScope::Instance as instance};

/// An inbox job's statements, sent with the broadcasts' check.
pub(super) type Ahead<A> = Box<dyn FnOnce(&Connection, &Scope, i64) -> Result<A> + Send>;
/// An inbox job: its statements (`ahead`), and what it does with their answers
/// (`f`, which also gets whether they are current).
pub(super) type Halves<A, T> = (
    Ahead<A>,
    Box<dyn FnOnce(&Connection, &Scope, i64, (A, bool)) -> Result<T> + Send>,
);
/// A piped inbox job: its statements, and what it reads from their answers (None:
/// it must run whole, its statements having written nothing).
pub(super) type Piped<A, T> = (
    Ahead<A>,
    Box<dyn FnOnce(&Connection, &Scope, i64, A) -> Result<Option<T>> + Send>,
);

/// The store job that runs `f` once the member's broadcasts are rows of its own
/// (`broadcast::write_own`): the one way into the inbox's state machine, so no
/// entry point can forget them. `f` gets the connection, the scope, `now` and
/// what `ahead` sent: the job's first statements, sent with the broadcasts'
/// check (one round trip on PostgreSQL), and whether they are current: false
/// when broadcast rows were written after them (which they did not see).
fn own_inbox_job<A: 'static, T: 'static>(
    s: Scope,
    clock: Clock,
    (ahead, f): Halves<A, T>,
) -> impl FnOnce(&Connection) -> Result<T> + Send + 'static {
    move |c| {
        let now = clock.now_ms();
        let own = broadcast::own_ahead(c, s.workflow_id, &s.me)?;
        let sent = ahead(c, &s, now)?;
        let wrote = broadcast::write_own_from(c, (s.workflow_id, &s.me, now), own)?;
        f(c, &s, now, (sent, !wrote))
    }
}

impl Messaging {
    /// Runs [`own_inbox_job`] in a store write job of the member's instance. A
    /// job that may refuse after it wrote (a deferral) runs in a savepoint.
    pub(super) async fn in_own_inbox<A: 'static, T: Send + 'static>(
        &self,
        (scope, isolation): (&Scope, Isolation),
        halves: Halves<A, T>,
    ) -> Result<T> {
        let job = own_inbox_job(scope.clone(), self.clock.clone(), halves);
        // The member's own rows of its instance (deliveries, its broadcast mark).
        self.store
            .write_as(instance(scope.workflow_id), isolation, job)
            .await
    }

    /// An inbox job piped with the other jobs of its transaction
    /// (`Store::write_piped`): `piped`'s statements go out with the broadcasts'
    /// check, and write only when there is no broadcast to write first (under
    /// [`broadcast::NONE_UNWRITTEN`]); then `piped`'s second half reads their
    /// answers. When there was one, or when that half gives None (its statements
    /// wrote nothing), `whole` runs as [`Messaging::in_own_inbox`] would.
    pub(super) async fn piped_own_inbox<A: Send + 'static, T: Send + 'static>(
        &self,
        scope: &Scope,
        (ahead, done): Piped<A, T>,
        (isolation, whole): (Isolation, Halves<A, T>),
    ) -> Result<T> {
        let (s, clock) = (scope.clone(), self.clock.clone());
        let whole = own_inbox_job(scope.clone(), self.clock.clone(), whole);
        self.store
            .write_piped(instance(scope.workflow_id), move |c| {
                let now = clock.now_ms();
                let own = broadcast::own_ahead(c, s.workflow_id, &s.me)?;
                let sent = ahead(c, &s, now)?;
                let rest: Rest<T> = Box::new(move |c| {
                    if !broadcast::any_unwritten(c, own)?
                        && let Some(t) = done(c, &s, now, sent)?
                    {
                        return Ok(Then::Done(t));
                    }
                    Ok(Then::Again(isolation, Box::new(whole)))
                });
                Ok(rest)
            })
            .await
    }
}
