//! Feedback: what members tell the lead about their tools and skills (seed 000's
//! feedback tool), kept per instance in its own table, `feedback`. A service
//! built from the store and the events: the workflows room reads its summary into a
//! status, the MCP layer into a resource and the `organise` prompt.

use crate::Scope;
use crate::events::{Event, Events};
use crate::timing::Clock;
use domain::clock::fmt_ms;
use domain::error::{Error, Result};
use domain::feedback::{KEEP_PER_INSTANCE, Kind, Report};
use schemars::JsonSchema;
use serde::Serialize;
use store::Store;
use store::sql;

/// One report as stored.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct Feedback {
    pub id: i64,
    /// Who reported it (`user` for the lead).
    pub member: String,
    /// missing, friction or suggestion.
    pub kind: Kind,
    /// The tool or skill it is about.
    pub about: String,
    pub text: String,
    pub at: String,
}

/// An instance's feedback: how many of each kind, and the newest reports.
#[derive(Debug, Clone, Default, Serialize, JsonSchema)]
pub struct Summary {
    pub missing: i64,
    pub friction: i64,
    pub suggestion: i64,
    /// Newest first.
    pub newest: Vec<Feedback>,
}

impl Summary {
    pub fn is_empty(&self) -> bool {
        self.missing + self.friction + self.suggestion == 0
    }
}

/// The feedback room.
pub struct FeedbackRoom {
    store: Store,
    events: Events,
    /// Stamps each report.
    clock: Clock,
    /// Reports an instance keeps ([`KEEP_PER_INSTANCE`]; fewer in a test).
    keep: i64,
}

impl FeedbackRoom {
    pub fn new(store: Store, events: Events, clock: Clock) -> Self {
        Self {
            store,
            events,
            clock,
            keep: KEEP_PER_INSTANCE,
        }
    }

    /// Records the caller's report in its instance; the instance keeps its newest
    /// [`KEEP_PER_INSTANCE`].
    pub async fn report(&self, scope: &Scope, given: (&str, &str, &str)) -> Result<Feedback> {
        let r: Report =
            domain::feedback::check(given.0, given.1, given.2).map_err(Error::invalid)?;
        let (wid, member, keep) = (scope.workflow_id, scope.me.clone(), self.keep);
        let at = self.clock.now_ms();
        let stored = self
            .store
            .write(move |c| {
                let id: i64 = c.query_row(
                    "INSERT INTO feedback (workflow_id, member, kind, about, text, created_at)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6) RETURNING id",
                    sql::params![wid, member, r.kind.as_str(), r.about, r.text, at],
                    |row| row.get(0),
                )?;
                // Ids are shared by every instance: this one's `keep`-th newest is the cut.
                c.execute(
                    "DELETE FROM feedback WHERE workflow_id = ?1 AND id < (SELECT id FROM feedback
                       WHERE workflow_id = ?1 ORDER BY id DESC LIMIT 1 OFFSET ?2)",
                    sql::params![wid, keep - 1],
                )?;
                let kept: i64 = c.query_row(
                    "SELECT count(*) FROM feedback WHERE workflow_id = ?1",
                    [wid],
                    |row| row.get(0),
                )?;
                let given = Feedback {
                    id,
                    member,
                    kind: r.kind,
                    about: r.about,
                    text: r.text,
                    at: fmt_ms(at),
                };
                Ok((given, kept == 1))
            })
            .await?;
        let (stored, first) = stored;
        self.events.publish(Event::FeedbackGiven {
            workflow_id: wid,
            first,
        });
        Ok(stored)
    }

    /// The instance's counts by kind and its `newest` reports, newest first.
    pub async fn summary(&self, workflow_id: i64, newest: usize) -> Result<Summary> {
        let limit = i64::try_from(newest).unwrap_or(i64::MAX);
        self.store
            .read(move |c| {
                let mut s = Summary::default();
                let mut counts = c.prepare_cached(
                    "SELECT kind, count(*) FROM feedback WHERE workflow_id = ?1 GROUP BY kind",
                )?;
                let rows = counts.query_map([workflow_id], |r| {
                    Ok((r.get::<String>(0)?, r.get::<i64>(1)?))
                })?;
                for row in rows {
                    let (kind, n) = row?;
                    match kind
                        .parse::<Kind>()
                        .map_err(|e| Error::internal(e.to_string()))?
                    {
                        Kind::Missing => s.missing = n,
                        Kind::Friction => s.friction = n,
                        Kind::Suggestion => s.suggestion = n,
                    }
                }
                let mut st = c.prepare_cached(
                    "SELECT id, member, kind, about, text, created_at FROM feedback
                     WHERE workflow_id = ?1 ORDER BY id DESC LIMIT ?2",
                )?;
                let rows = st.query_map(sql::params![workflow_id, limit], |r| {
                    Ok((
                        r.get::<i64>(0)?,
                        r.get::<String>(1)?,
                        r.get::<String>(2)?,
                        r.get::<String>(3)?,
                        r.get::<String>(4)?,
                        r.get::<i64>(5)?,
                    ))
                })?;
                for row in rows {
                    let (id, member, kind, about, text, at) = row?;
                    s.newest.push(Feedback {
                        id,
                        member,
                        kind: kind.parse().map_err(|e: domain::states::UnknownState| {
                            Error::internal(e.to_string())
                        })?,
                        about,
                        text,
                        at: fmt_ms(at),
                    });
                }
                Ok(s)
            })
            .await
    }
}

#[cfg(test)]
mod report_tests;

#[cfg(test)]
mod tests {
    use super::*;
    use domain::names::WorkflowRef;

    fn scope(workflow_id: i64) -> Scope {
        Scope {
            workflow: WorkflowRef::global(),
            workflow_id,
            me: "coder".into(),
            lead: false,
            run_id: None,
        }
    }

    /// Each instance keeps its own newest reports, whatever the others write
    /// between them.
    #[tokio::test]
    async fn an_instance_keeps_its_newest_reports() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open_as(&store::Location::in_data_dir(dir.path()), "local").unwrap();
        let clock = Clock::manual(1_700_000_000_000);
        let events = Events::default();
        let mut heard = events.subscribe();
        let room = FeedbackRoom {
            keep: 3,
            ..FeedbackRoom::new(store, events, clock.clone())
        };
        for i in 0..5 {
            for wid in [1, 2] {
                let text = format!("report {i} in {wid}");
                room.report(&scope(wid), ("friction", "channel_send", &text))
                    .await
                    .unwrap();
            }
        }
        for wid in [1, 2] {
            let s = room.summary(wid, 10).await.unwrap();
            let texts: Vec<&str> = s.newest.iter().map(|f| f.text.as_str()).collect();
            let expect: Vec<String> = (2..5)
                .rev()
                .map(|i| format!("report {i} in {wid}"))
                .collect();
            assert_eq!(texts, expect, "instance {wid}");
            // Stamped by the room's clock, not the system's.
            assert!(s.newest.iter().all(|f| f.at == fmt_ms(1_700_000_000_000)));
            assert_eq!((s.friction, s.missing), (3, 0));
        }
        assert!(room.summary(3, 10).await.unwrap().is_empty());
        // Only each instance's first report is news for the list of resources.
        let mut firsts = Vec::new();
        while let Ok(Event::FeedbackGiven { workflow_id, first }) = heard.try_recv() {
            firsts.push((workflow_id, first));
        }
        let want: Vec<(i64, bool)> = (0..5).flat_map(|i| [(1, i == 0), (2, i == 0)]).collect();
        assert_eq!(firsts, want);
    }
}
