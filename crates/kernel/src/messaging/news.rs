//! The "new for you" line: what waits unread for an agent in the middle of its run,
//! added to each team tool's result it gets (the MCP layer adds it), so a backend
//! with no way into a running turn learns of a message when it next touches the
//! team. Short (it costs tokens), and absent when nothing waits.

use super::{Messaging, broadcast};
use domain::error::Result;

/// Unread messages shown by sender and first words, at most.
const SHOWN: usize = 3;
/// The first words of each, at most (characters).
const WORDS: usize = 40;

impl Messaging {
    /// The line for `name` of instance `workflow_id`, when deliveries wait unread
    /// (pending: not yet read by any run).
    pub async fn news(&self, workflow_id: i64, name: &str) -> Result<Option<String>> {
        let name = name.to_owned();
        let (count, first) = self
            .store
            .read(move |c| {
                let mut st = c.prepare_cached(
                    "SELECT m.sender, m.content FROM deliveries d JOIN messages m
                       ON m.workflow_id = d.workflow_id AND m.id = d.message_id
                     WHERE d.workflow_id = ?1 AND d.recipient = ?2 AND d.state = 'pending'
                     ORDER BY d.message_id LIMIT 3",
                )?;
                let first = st
                    .query_map((workflow_id, &name), |r| Ok((r.get(0)?, r.get(1)?)))?
                    .collect::<store::sql::Result<Vec<(String, String)>>>()?;
                let rows: i64 = c
                    .prepare_cached(
                        "SELECT count(*) FROM deliveries WHERE workflow_id = ?1 AND recipient = ?2 AND state = 'pending'",
                    )?
                    .query_row((workflow_id, &name), |r| r.get(0))?;
                Ok((rows + broadcast::unwritten(c, workflow_id, &name)?, first))
            })
            .await?;
        Ok(line(count, &first))
    }
}

/// `count` unread, the first of them as (sender, text): one short line, or none.
pub fn line(count: i64, first: &[(String, String)]) -> Option<String> {
    if count <= 0 {
        return None;
    }
    let shown: Vec<String> = first
        .iter()
        .take(SHOWN)
        .map(|(from, text)| {
            let words: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
            let cut: String = words.chars().take(WORDS).collect();
            let more = if cut.len() < words.len() { "…" } else { "" };
            format!("@{from}: \"{cut}{more}\"")
        })
        .collect();
    let more = count as usize - shown.len().min(count as usize);
    let rest = if more > 0 && !shown.is_empty() {
        format!(" and {more} more")
    } else {
        String::new()
    };
    Some(format!(
        "New for you: {count} unread ({}{rest}); my_inbox reads them.",
        if shown.is_empty() {
            "a message to everyone".to_owned()
        } else {
            shown.join("; ")
        }
    ))
}

#[cfg(test)]
mod tests {
    use super::line;

    fn check(count: i64, first: &[(&str, &str)], want: Option<&str>) {
        let first: Vec<(String, String)> = first
            .iter()
            .map(|(a, b)| ((*a).to_owned(), (*b).to_owned()))
            .collect();
        assert_eq!(line(count, &first).as_deref(), want);
    }

    #[test]
    fn the_line_is_short_and_absent_when_nothing_waits() {
        check(0, &[], None);
        check(
            1,
            &[("user", "stop:\n use  the other grammar")],
            Some(
                "New for you: 1 unread (@user: \"stop: use the other grammar\"); my_inbox reads them.",
            ),
        );
        check(
            5,
            &[("user", &"x".repeat(60)), ("bob", "ok"), ("eve", "hi")],
            Some(&format!(
                "New for you: 5 unread (@user: \"{}…\"; @bob: \"ok\"; @eve: \"hi\" and 2 more); my_inbox reads them.",
                "x".repeat(40)
            )),
        );
        check(
            1,
            &[],
            Some("New for you: 1 unread (a message to everyone); my_inbox reads them."),
        );
    }
}
