//! The rows a send writes, gathered and written together: messages and their
//! deliveries as multi-row inserts, the hop count and the sender's cursor once.
//!
//! Why: a bulk send (channel_send_many: the benchmark's preload, a workflow's
//! kickoff) wrote four statements per message; on PostgreSQL each is work for the
//! client and the server even when it shares round trips. Written here, 10,000
//! messages are a few hundred statements. A single send is the same statements as
//! before. Whatever reads the channel inside the send (the send guard) has the
//! rows written first ([`Rows::write`]).

use super::senders::{Hop, Hops};
use crate::Scope;
use domain::error::Result;
use store::sql::{Connection, ToSql};

/// Rows per multi-row insert; a remainder goes one row at a time, so each table
/// has two statements in the connection's cache.
const CHUNK: usize = 64;

/// A message as stored.
pub(super) struct MessageRow {
    pub id: String,
    pub sender: String,
    pub content: String,
    pub kind: &'static str,
    pub to: Option<String>,
    pub mentions: String,
    pub priority: String,
    pub created_at: i64,
}

/// The writes of one send job, for one instance.
pub(super) struct Rows {
    workflow_id: i64,
    /// When the job writes (ms since the epoch).
    now: i64,
    messages: Vec<MessageRow>,
    /// (recipient, message id, at)
    deliveries: Vec<(String, String, i64)>,
    /// The hop count: reset (the lead spoke) and then raised by this much.
    hops: Hops,
    /// The newest message of the sender, whose cursor moves past it.
    cursor: Option<(String, String)>,
    /// The instance's greatest message id, where several nodes may write it (see
    /// [`Rows::above`]).
    floor: Option<String>,
}

impl Rows {
    pub(super) fn new(workflow_id: i64, now: i64) -> Self {
        Self {
            workflow_id,
            now,
            messages: Vec::new(),
            deliveries: Vec::new(),
            hops: Hops::default(),
            cursor: None,
            floor: None,
        }
    }

    /// Where several nodes may write the instance (a database that runs
    /// functions, PostgreSQL), the ids of this job's messages are kept above
    /// `top`, the instance's greatest, read under the instance's lock: a UUIDv7
    /// of another process in the same millisecond may sort after this one's.
    pub(super) fn above(&mut self, top: Option<String>) {
        self.floor = Some(top.unwrap_or_default());
    }

    /// A new message's id: time-ordered, and above the floor if there is one.
    pub(super) fn new_id(&mut self) -> String {
        let id = super::guard::new_id();
        let Some(floor) = &self.floor else {
            return id;
        };
        let id = match id > *floor {
            true => id,
            false => after(floor),
        };
        self.floor = Some(id.clone());
        id
    }

    pub(super) fn message(&mut self, m: MessageRow) {
        self.messages.push(m);
    }

    /// A pending delivery of the message gathered last, stamped with its time.
    pub(super) fn delivery(&mut self, recipient: &str, message_id: &str) {
        let at = self.messages.last().map_or(self.now, |m| m.created_at);
        self.deliveries
            .push((recipient.to_owned(), message_id.to_owned(), at));
    }

    /// A message's move of the count of agent-to-agent hops.
    pub(super) fn hop(&mut self, h: Hop) {
        self.hops.then(h);
    }

    /// The sender's cursor moves past `id` (never back).
    pub(super) fn read_through(&mut self, scope: &Scope, id: &str) {
        self.cursor = Some((scope.me.clone(), id.to_owned()));
    }

    /// Writes what is gathered (deferred: the answers come with the job's next
    /// statement) and starts empty.
    pub(super) fn write(&mut self, c: &Connection) -> Result<()> {
        let wid = self.workflow_id;
        for chunk in std::mem::take(&mut self.messages).chunks(CHUNK) {
            let values: Vec<&dyn ToSql> = chunk
                .iter()
                .flat_map(|m| {
                    [
                        &wid as &dyn ToSql,
                        &m.id,
                        &m.sender,
                        &m.content,
                        &m.kind,
                        &m.to,
                        &m.mentions,
                        &m.priority,
                        &m.created_at,
                    ]
                })
                .collect();
            insert(c, MESSAGES, 9, chunk.len(), &values)?;
        }
        for chunk in std::mem::take(&mut self.deliveries).chunks(CHUNK) {
            let values: Vec<&dyn ToSql> = chunk
                .iter()
                .flat_map(|(r, id, at)| [&wid as &dyn ToSql, r, id, at])
                .collect();
            insert(c, DELIVERIES, 4, chunk.len(), &values)?;
        }
        self.write_hops(c)?;
        if let Some((reader, id)) = self.cursor.take() {
            super::set_cursor(c, wid, &reader, &id)?;
        }
        Ok(())
    }

    fn write_hops(&mut self, c: &Connection) -> Result<()> {
        let Hops { reset, add } = std::mem::take(&mut self.hops);
        match (reset, add) {
            (true, 0) => c
                .prepare_cached("UPDATE workflows SET hops = 0 WHERE id = ?1 AND hops <> 0")?
                .execute_later([self.workflow_id])?,
            (true, n) => c
                .prepare_cached("UPDATE workflows SET hops = ?2 WHERE id = ?1")?
                .execute_later([self.workflow_id, n])?,
            (false, 0) => {}
            (false, n) => c
                .prepare_cached("UPDATE workflows SET hops = hops + ?2 WHERE id = ?1")?
                .execute_later([self.workflow_id, n])?,
        }
        Ok(())
    }
}

/// The smallest UUID above `id` (as PostgreSQL's `message_id_after`); an id that
/// is no UUID gets a character more.
fn after(id: &str) -> String {
    match uuid::Uuid::parse_str(id) {
        Ok(u) => uuid::Uuid::from_u128(u.as_u128().wrapping_add(1)).to_string(),
        Err(_) => format!("{id}0"),
    }
}

const MESSAGES: &str = "INSERT INTO messages (workflow_id, id, sender, content, kind, to_member, mentions, priority, created_at) VALUES ";
const DELIVERIES: &str =
    "INSERT INTO deliveries (workflow_id, recipient, message_id, state, updated_at) VALUES ";

/// `rows` rows of `width` values into `head`: one statement of [`CHUNK`] rows, else
/// one statement per row (two shapes in the statement cache, whatever the count).
fn insert(
    c: &Connection,
    head: &str,
    width: usize,
    rows: usize,
    values: &[&dyn ToSql],
) -> Result<()> {
    if rows == CHUNK {
        c.prepare_cached(&statement(head, width, CHUNK))?
            .execute_later(values)?;
        return Ok(());
    }
    let one = statement(head, width, 1);
    for row in values.chunks(width) {
        c.prepare_cached(&one)?.execute_later(row)?;
    }
    Ok(())
}

/// `head` followed by `rows` groups of `width` numbered placeholders (a delivery's
/// state is always 'pending').
fn statement(head: &str, width: usize, rows: usize) -> String {
    let delivery = head == DELIVERIES;
    let groups: Vec<String> = (0..rows)
        .map(|r| {
            let n = |k: usize| format!("?{}", r * width + k + 1);
            let cols: Vec<String> = match delivery {
                true => vec![n(0), n(1), n(2), "'pending'".into(), n(3)],
                false => (0..width).map(n).collect(),
            };
            format!("({})", cols.join(", "))
        })
        .collect();
    format!("{head}{}", groups.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_id_above_a_floor_is_its_successor_when_the_clock_is_behind() {
        for (top, want) in [
            (
                "fff00000-0000-7000-8000-00000000ffff",
                "fff00000-0000-7000-8000-000000010000",
            ),
            (
                "ffffffff-ffff-7fff-bfff-fffffffffffe",
                "ffffffff-ffff-7fff-bfff-ffffffffffff",
            ),
            ("zz", "zz0"),
        ] {
            let mut rows = Rows::new(1, 0);
            rows.above(Some(top.into()));
            assert_eq!(rows.new_id(), want);
            assert!(rows.new_id().as_str() > want, "each next one above");
        }
        let mut rows = Rows::new(1, 0);
        rows.above(None);
        let (a, b) = (rows.new_id(), rows.new_id());
        assert!(a < b && a.len() == 36, "{a} {b}");
    }

    #[test]
    fn statements_number_their_placeholders_row_by_row() {
        assert_eq!(
            statement(DELIVERIES, 4, 2),
            format!("{DELIVERIES}(?1, ?2, ?3, 'pending', ?4), (?5, ?6, ?7, 'pending', ?8)")
        );
        let m = statement(MESSAGES, 9, CHUNK);
        assert!(m.ends_with(&format!("?{})", 9 * CHUNK)), "{m}");
    }
}
