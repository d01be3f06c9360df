//! Sends and their outcomes, as a table both ways of writing a send must give:
//! `post` (SQLite, and PostgreSQL's sends that need more) and `one` (a send in one
//! statement, PostgreSQL's function). The table runs on the store the tests use
//! (`AGENT_WORKER_TEST_STORE`), once as the kernel writes sends and once with every
//! send written by `post`; on SQLite both are `post`.
//!
//! Each row is a send in one instance whose history is the rows before it, and
//! what came of it: the recipients, mentions of no member, the missed messages
//! (the guard's count and their senders), the notes, the deliveries and broadcast
//! row written, the priority and addressee stored, the hop count after it and
//! whether the sender's cursor moved; or the refusal, with nothing written. Every
//! new id is above every id before it in the instance.

use super::Outgoing;
use crate::testing::{Rooms, said};
use domain::names::LEAD;

/// (sender, `to`, force, urgent, text, outcome). A sender `+name` registers the
/// agent `name` instead of sending; `hook:gh` is a hook's post. `{long}` in a text
/// is 4,001 characters.
type Case = (
    &'static str,
    &'static str,
    bool,
    bool,
    &'static str,
    &'static str,
);

#[rustfmt::skip]
const CASES: &[Case] = &[
    ("user", "", false, false, "@alice start", "-> alice | rows alice | normal | hops 0 | cursor moved"),
    ("alice", "", false, false, "@bob please review", "-> bob | missed 1 (user) | notes missed | rows bob | normal | hops 1 | cursor moved"),
    ("alice", "", false, false, "@bob again", "-> bob | rows bob | normal | hops 2 | cursor moved"),
    ("bob", "", false, false, "@all standup", "-> alice, carol | missed 3 (user, alice, alice) | notes missed | broadcast | normal | hops 3 | cursor moved"),
    ("carol", "", true, false, "hello nobody", "-> | notes nobody | normal | hops 3 | cursor moved"),
    ("carol", "", true, false, "@zed and @Bob, look", "-> bob | unknown zed | notes unknown | rows bob | high | hops 4 | cursor moved"),
    ("carol", "", true, false, "@zed @yan hi", "-> | unknown zed, yan | notes unknown, nobody | high | hops 4 | cursor moved"),
    ("alice", "bob", true, false, "private @carol", "-> bob | rows bob | normal | to bob | hops 5 | cursor moved"),
    ("alice", "@CAROL", true, false, "private", "-> carol | rows carol | normal | to carol | hops 6 | cursor moved"),
    ("alice", "zed", true, false, "hi", "not found: cannot send a direct message to \"zed\""),
    ("alice", "Alice", true, false, "hi", "invalid: cannot send a direct message to yourself"),
    ("alice", "", true, false, " ", "invalid: message is empty"),
    ("alice", "", true, false, "a\0b", "invalid: message contains a NUL character"),
    ("alice", "", true, false, "@bob {long}", "invalid: message too long (4006 characters"),
    ("user", "", true, false, "@bob {long}", "-> bob | rows bob | normal | resource | hops 0 | cursor moved"),
    ("alice", "", false, false, "@user done, this is urgent", "-> user | missed 1 (user) | notes missed | rows user | high | hops 0 | cursor moved"),
    ("user", "", false, false, "@all @user hi", "-> alice, bob, carol | missed 1 (alice) | notes missed | broadcast | high | hops 0 | cursor moved"),
    ("hook:gh", "", true, false, "@alice build failed", "-> alice | rows alice | normal | hops 0 | cursor kept"),
    ("+dave", "", true, false, "", ""),
    ("alice", "", true, false, "@dave welcome", "-> dave | rows dave | normal | hops 1 | cursor moved"),
    ("bob", "", true, false, "@all hello", "-> alice, carol, dave | broadcast | normal | hops 2 | cursor moved"),
    ("carol", "", true, false, "@alice @bob @dave @user sync", "-> alice, bob, dave, user | rows user | broadcast | high | hops 3 | cursor moved"),
    ("user", "bob", true, true, "stop", "-> bob | rows bob | urgent | to bob | hops 0 | cursor moved"),
    ("alice", "bob", true, true, "stop", "forbidden: urgent: only the lead may stop an agent's turn"),
];

/// Runs [`CASES`] in one instance, each outcome checked.
async fn check_cases(r: &Rooms) {
    r.agents(&["alice", "bob", "carol"]).await;
    for &(from, to, force, urgent, text, want) in CASES {
        if let Some(name) = from.strip_prefix('+') {
            r.agents(&[name]).await;
            continue;
        }
        let before = facts::top(r).await;
        let scope = match from {
            LEAD => r.scope_in("@global:main", LEAD).await,
            _ if from.starts_with("hook:") => r.scope_in("@global:main", LEAD).await,
            _ => r.scope(from).await,
        };
        let send = Outgoing {
            message: text.replace("{long}", &"a".repeat(4_001)),
            to: (!to.is_empty()).then(|| to.to_owned()),
            force,
            urgent,
        };
        let sent = match from.strip_prefix("hook:") {
            Some(hook) => r.messaging.hook_post(&scope, hook, send).await,
            None => r.messaging.channel_send(&scope, send).await,
        };
        let got = match &sent {
            Ok(s) => {
                assert!(
                    before.as_deref() < Some(s.id.as_str()),
                    "{from}: {text:?}: id {} not above {before:?}",
                    s.id
                );
                facts::outcome(r, from, s).await
            }
            Err(_) => {
                assert_eq!(
                    facts::top(r).await,
                    before,
                    "{from}: {text:?}: a refused send wrote"
                );
                said(&sent)
            }
        };
        match want.starts_with("->") {
            true => assert_eq!(got, want, "{from}: {text:?}"),
            false => assert!(
                got.starts_with(want),
                "{from}: {text:?}: got {got:?}, want {want:?}"
            ),
        }
    }
}

/// The table as the kernel writes sends: in one statement where the engine can,
/// but for the long message of the lead's (a resource) and the urgent one; the
/// agent registered in the middle is found by the statement, which has the send
/// decided again.
#[tokio::test]
async fn sends_give_the_outcomes_of_the_table() {
    let r = Rooms::new().await;
    check_cases(&r).await;
    let functions = r.store.read(|c| Ok(c.server_functions())).await.unwrap();
    let want = if functions { (15, 1) } else { (0, 0) };
    assert_eq!(
        r.messaging.known.counts(),
        want,
        "(in one statement, found stale)"
    );
}

/// The same table with every send written by `post`, on the same engine.
#[tokio::test]
async fn sends_written_by_post_give_the_same_outcomes() {
    let r = Rooms::new().await;
    r.messaging.known.turn_off();
    check_cases(&r).await;
    assert_eq!(r.messaging.known.counts(), (0, 0));
}

/// Where several nodes may write an instance (a database that runs functions), a
/// message another node wrote with a greater id (its clock ahead, or the same
/// millisecond with greater random bits) does not make the next ones sort before
/// it, whichever way they are written: in one statement, by `post` (urgent), in a
/// batch, or the kernel's own. (SQLite has one kernel per database, whose ids are
/// in order: the UUIDv7s of one process are.)
#[tokio::test]
async fn a_new_id_is_above_the_instance_s_greatest_whoever_wrote_it() {
    let r = Rooms::new().await;
    r.agents(&["alice", "bob"]).await;
    if !r.store.read(|c| Ok(c.server_functions())).await.unwrap() {
        return;
    }
    let future = |k: u32| format!("fff00000-0000-7000-8000-{k:08x}ffff");
    let after = |k: u32| format!("fff00000-0000-7000-8000-{:08x}0000", k + 1);
    let lead = r.scope_in("@global:main", LEAD).await;
    for k in 0..4 {
        r.execute(
            "INSERT INTO messages (workflow_id, id, sender, content, created_at) VALUES (1, ?1, 'bob', 'x', 0)",
            &future(k),
        )
        .await;
        let urgent = Outgoing {
            message: "stop".into(),
            to: Some("bob".into()),
            urgent: true,
            ..Default::default()
        };
        let ids: Vec<String> = match k {
            0 => vec![r.send("alice", "@bob after").await.id],
            1 => vec![r.messaging.channel_send(&lead, urgent).await.unwrap().id],
            2 => {
                let two = ["@bob one", "@bob two"].map(|m| Outgoing {
                    message: m.into(),
                    ..Default::default()
                });
                let sent = r.messaging.channel_send_many(&lead, two.to_vec()).await;
                sent.unwrap().into_iter().map(|s| s.id).collect()
            }
            _ => {
                let wf = domain::names::WorkflowRef::global();
                let posted = r
                    .store
                    .write(move |c| super::post_system(c, 1, &wf, "@bob note".into(), 0))
                    .await
                    .unwrap();
                vec![posted.result.id]
            }
        };
        assert_eq!(ids[0], after(k), "send {k} after {}", future(k));
        assert!(ids.windows(2).all(|w| w[0] < w[1]), "{ids:?}");
    }
}

/// What the store holds of a send, as the table spells it.
pub(super) mod facts {
    use super::super::SendResult;
    use crate::testing::Rooms;

    /// The instance's greatest message id.
    pub(in crate::messaging) async fn top(r: &Rooms) -> Option<String> {
        r.store
            .read(|c| {
                Ok(c.query_row(
                    "SELECT max(id) FROM messages WHERE workflow_id = 1",
                    (),
                    |r| r.get(0),
                )?)
            })
            .await
            .unwrap()
    }

    /// The outcome of a send as a row of the table spells it.
    pub(in crate::messaging) async fn outcome(r: &Rooms, me: &str, s: &SendResult) -> String {
        let mut out = vec![
            format!("-> {}", s.recipients.join(", "))
                .trim_end()
                .to_owned(),
        ];
        if !s.unknown_mentions.is_empty() {
            out.push(format!("unknown {}", s.unknown_mentions.join(", ")));
        }
        if s.missed_count > 0 {
            let from: Vec<&str> = s.missed.iter().map(|m| m.from.as_str()).collect();
            out.push(format!("missed {} ({})", s.missed_count, from.join(", ")));
        }
        let note = s.note.as_deref().unwrap_or_default();
        let notes: Vec<&str> = [
            ("missed", "since you last read"),
            ("unknown", "not members of"),
            ("nobody", "nobody was mentioned"),
        ]
        .into_iter()
        .filter(|(_, words)| note.contains(words))
        .map(|(name, _)| name)
        .collect();
        if !notes.is_empty() {
            out.push(format!("notes {}", notes.join(", ")));
        }
        out.extend(stored(r, me, s).await);
        out.join(" | ")
    }

    /// The rows written for `s`: deliveries, a broadcast, the message's priority,
    /// addressee and resource, the hop count, the cursor.
    async fn stored(r: &Rooms, me: &str, s: &SendResult) -> Vec<String> {
        let (id, me) = (s.id.clone(), me.to_owned());
        let (rows, broadcast, priority, to, hops, cursor) = r
            .store
            .read(move |c| {
                let mut st = c.prepare(
                    "SELECT recipient FROM deliveries WHERE workflow_id = 1 AND message_id = ?1 ORDER BY recipient",
                )?;
                let rows = st.query_map([&id], |r| r.get::<String>(0))?.collect::<store::sql::Result<Vec<_>>>()?;
                let broadcast: i64 =
                    c.query_row("SELECT count(*) FROM broadcasts WHERE message_id = ?1", [&id], |r| r.get(0))?;
                let (priority, to): (String, Option<String>) = c.query_row(
                    "SELECT priority, to_member FROM messages WHERE id = ?1",
                    [&id],
                    |r| Ok((r.get(0)?, r.get(1)?)),
                )?;
                let hops: i64 = c.query_row("SELECT hops FROM workflows WHERE id = 1", (), |r| r.get(0))?;
                let cursor: i64 = c.query_row(
                    "SELECT count(*) FROM read_cursors WHERE workflow_id = 1 AND reader = ?1 AND last_read = ?2",
                    [&me, &id],
                    |r| r.get(0),
                )?;
                Ok((rows, broadcast, priority, to, hops, cursor))
            })
            .await
            .unwrap();
        let mut out = Vec::new();
        if !rows.is_empty() {
            out.push(format!("rows {}", rows.join(", ")));
        }
        if broadcast > 0 {
            out.push("broadcast".into());
        }
        out.push(priority);
        if let Some(to) = to {
            out.push(format!("to {to}"));
        }
        if s.resource.is_some() {
            out.push("resource".into());
        }
        out.push(format!("hops {hops}"));
        out.push(format!(
            "cursor {}",
            if cursor > 0 { "moved" } else { "kept" }
        ));
        out
    }
}

/// The guard's scan inside PostgreSQL's `channel_send_many` is `missed_sql`'s,
/// word for word but for its parameters' names, the guard's switch and the cursor
/// moved by the job's earlier sends: a change to one that misses the other fails
/// here.
#[tokio::test]
async fn the_statement_s_guard_scan_is_the_send_guard_s() {
    let r = Rooms::new().await;
    let def: Option<String> = r
        .store
        .read(|c| {
            if !c.server_functions() {
                return Ok(None);
            }
            let sql = "SELECT pg_get_functiondef(CAST('channel_send_many' AS regproc))";
            Ok(Some(c.query_row(sql, (), |row| row.get(0))?))
        })
        .await
        .unwrap();
    let Some(def) = def else { return };
    let words = |s: &str| s.split_whitespace().collect::<Vec<_>>().join(" ");
    let scan = |s: &str, end: &str| {
        let s = words(s);
        let from = s.find("m.sender, substr(").expect("the scan's columns");
        let to = from + s[from..].find(end).expect("the scan's end") + end.len();
        s[from..to].to_owned()
    };
    let rust = super::guard::missed_sql()
        .replace("?1", "p_wid")
        .replace("?2", "v_ids[u.i]")
        .replace("?3", "u.s");
    let rust = scan(&rust, &format!("LIMIT {}", super::MISSED_COUNT_CAP));
    let function = scan(&def, &format!("LIMIT {}", super::MISSED_COUNT_CAP))
        .replace(" AS text FROM", " FROM")
        .replace(
            "WHERE u.g AND m.id > COALESCE(v_ids[u.a], '') AND ",
            "WHERE ",
        );
    assert_eq!(function, rust);
}

/// The lock and isolation of a send job, by how many sends and whether a
/// contract or a resource makes it every instance's business.
#[test]
fn a_send_job_locks_what_it_touches() {
    use store::{Isolation::*, WriteScope::*};
    let check = |n: usize, wide: bool, expect| {
        assert_eq!(
            super::send_lock(4, n, wide),
            expect,
            "{n} sends, wide {wide}"
        );
    };
    check(1, false, (Instance(4), ChecksFirst));
    check(3, false, (Instance(4), Savepoint));
    check(1, true, (Global, Savepoint));
    check(3, true, (Global, Savepoint));
}
