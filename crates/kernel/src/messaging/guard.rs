//! The send guard: when others posted since the sender last read, the send still
//! goes out and its result lists what was missed (see the module above). Its scan
//! of a job's first send is sent ahead, with the instance's agents' read.

use super::{MISSED_COUNT_CAP, MissedMessage, Outgoing, PREVIEW_CHARS, preview};
use crate::Scope;
use domain::error::Result;
use store::sql::{self, Connection};

/// How many missed messages the send guard lists (the count is always exact).
const MISSED_LISTED: i64 = 10;
/// The characters of a text the send guard reads: one more than a preview shows, so
/// [`preview`] still knows whether to add its ellipsis.
pub(super) const PREVIEW_READ: usize = PREVIEW_CHARS + 1;

/// The guard's scan: messages in instance `?1` before `?2` from others than `?3`,
/// visible to `?3` (a hook's direct messages are the lead's too), past its cursor, that it has not seen through its inbox; newest
/// first, up to the cap.
///
/// Only the start of each text is read, enough for its preview: up to a hundred
/// messages of up to 64 KiB each would otherwise cross the connection per send.
/// `LIMIT 1 OFFSET 0` in the two lookups keeps each a probe of one delivery.
/// PostgreSQL may otherwise hash a lookup, reading every delivery the reader has
/// (open, or acked ever) into a hash table on every send, when it expects many
/// messages to check or few deliveries (statistics taken before the instance grew):
/// 16 ms per send with 100,000 acked, phases 2 and 3 of the bench. An OFFSET keeps
/// it from turning the lookup into a join; SQLite reads the clause as written.
pub(crate) fn missed_sql() -> String {
    format!(
        "SELECT m.id, m.sender, substr(m.content, 1, {PREVIEW_READ}) FROM messages m
          WHERE m.workflow_id = ?1 AND m.id < ?2 AND m.sender <> ?3
            AND m.id > COALESCE((SELECT r.last_read FROM read_cursors r
                                  WHERE r.workflow_id = ?1 AND r.reader = ?3), '')
            AND (m.to_member IS NULL OR (m.to_member = ?3 AND m.created_at >= COALESCE(
                (SELECT a.created_at FROM agents a WHERE a.workflow_id = ?1 AND a.name = ?3), 0))
                OR (?3 = 'user' AND m.sender LIKE 'hook:%'))
            AND (instr(m.mentions, '\"' || ?3 || '\"') = 0 OR (
                NOT EXISTS (SELECT 1 FROM deliveries d WHERE d.workflow_id = m.workflow_id AND d.recipient = ?3
                            AND d.message_id = m.id AND d.state <> 'pending' LIMIT 1 OFFSET 0)
                AND NOT EXISTS (SELECT 1 FROM deliveries_done d WHERE d.workflow_id = m.workflow_id
                            AND d.recipient = ?3 AND d.message_id = m.id LIMIT 1 OFFSET 0)))
          ORDER BY m.id DESC LIMIT {MISSED_COUNT_CAP}"
    )
}

/// A new message's id: time-ordered, so the guard's scan reads what came before it.
pub(super) fn new_id() -> String {
    uuid::Uuid::now_v7().to_string()
}

/// The instance's greatest message id.
pub(super) fn greatest_id(c: &Connection, workflow_id: i64) -> Result<Option<String>> {
    Ok(
        c.prepare_cached("SELECT max(id) FROM messages WHERE workflow_id = ?1")?
            .query_row([workflow_id], |r| r.get(0))?,
    )
}

/// The send guard's scan of a job's first send, sent before the instance's agents
/// are read so that on PostgreSQL both are one round trip. Its answer is the one
/// the send would read later: the scan never reads the message it guards (nor its
/// deliveries), and nothing else is written in the job before it.
pub(super) struct Ahead {
    pub(super) id: String,
    pub(super) scan: sql::Later,
}

/// [`Ahead`] for `send`, unless it skips the guard.
pub(super) fn scan_ahead(c: &Connection, scope: &Scope, send: &Outgoing) -> Result<Option<Ahead>> {
    if send.force {
        return Ok(None);
    }
    let id = new_id();
    let scan = c
        .prepare_cached(&missed_sql())?
        .query_later((scope.workflow_id, &id, &scope.me))?;
    Ok(Some(Ahead { id, scan }))
}

/// Messages from others, visible to the reader, newer than the reader's cursor, that
/// the reader has not already seen through its inbox (read now, or from `scan` sent
/// ahead).
pub(super) fn missed_since_last_read(
    c: &Connection,
    scope: &Scope,
    new_id: &str,
    scan: Option<sql::Later>,
) -> Result<(Vec<MissedMessage>, i64)> {
    // The reader's cursor is read in the same statement (on PostgreSQL each is a
    // round trip). One pass, newest first, up to the cap: its length is the count (the guard ran
    // two passes, a count and a listing, which were 40% of the writer's time when
    // every send missed a few messages); the text comes with the scan, and only the
    // listed ones make a preview of it.
    // Whether the reader already saw a message through its inbox is asked only of
    // messages delivered to it: `mentions` lists exactly the recipients (names need
    // no JSON escaping), and the two lookups per message were most of the guard's
    // cost when the missed messages were addressed to others.
    if let Some(scan) = scan {
        return missed_of(scan.rows(c)?);
    }
    let mut st = c.prepare_cached(&missed_sql())?;
    missed_of(st.query((scope.workflow_id, new_id, &scope.me))?)
}

/// The guard's answer from its scan's rows.
fn missed_of(mut rows: sql::Rows<'_>) -> Result<(Vec<MissedMessage>, i64)> {
    let mut missed = Missed::default();
    while let Some(r) = rows.next()? {
        if missed.count_one() {
            let text = r.get_ref(2)?.as_str().map_err(sql::Error::from)?;
            missed.list(r.get(0)?, r.get(1)?, text);
        }
    }
    Ok(missed.answer())
}

/// The guard's answer gathered from its scan's rows, newest first.
#[derive(Default)]
pub(super) struct Missed {
    listed: Vec<MissedMessage>,
    count: i64,
}

impl Missed {
    /// Counts one more missed message: whether it is one of those listed.
    pub(super) fn count_one(&mut self) -> bool {
        self.count += 1;
        self.count <= MISSED_LISTED
    }

    /// Lists the message counted last: its id, sender and the start of its text.
    pub(super) fn list(&mut self, id: String, from: String, text: &str) {
        self.listed.push(MissedMessage {
            id,
            from,
            preview: preview(text),
        });
    }

    /// The messages listed, oldest first, and the count.
    pub(super) fn answer(mut self) -> (Vec<MissedMessage>, i64) {
        self.listed.reverse();
        (self.listed, self.count)
    }
}
