//! Tidy: every table of the kernel has one room that writes it. Another room that
//! needs a row changed asks the owner (inside the same transaction where the two
//! writes must be atomic), so a table's rules live in one place. A few columns of
//! the two rows everything hangs on (an instance in `workflows`, an agent in
//! `agents`) belong to the room whose state they hold (the send guard's hop count
//! is messaging's, a run's state the runtime's): an `UPDATE` that sets only such
//! columns is their room's write. This reads every `INSERT INTO`, `UPDATE` and
//! `DELETE FROM` in the kernel's rooms and fails when a room writes what it does
//! not own, unless the pair is listed below with its reason; a listed pair that no
//! longer writes fails too, so the list only shrinks.

use regex::Regex;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

const KERNEL: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/crates/kernel/src");
const SCHEMA: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/crates/store/src/schema.rs");

/// Each table and the room that owns it (writes it).
const OWNERS: &[(&str, &str)] = &[
    ("workflows", "registry"),
    ("agents", "registry"),
    ("tokens", "registry"),
    ("orgs", "registry"),
    ("org_members", "registry"),
    ("feedback", "feedback"),
    ("contracts", "governance"),
    ("contract_decisions", "governance"),
    ("contract_hits", "governance"),
    ("approvals", "governance"),
    ("messages", "messaging"),
    ("deliveries", "messaging"),
    ("deliveries_done", "messaging"),
    ("broadcasts", "messaging"),
    ("read_cursors", "messaging"),
    ("member_status", "messaging"),
    ("resources", "messaging"),
    ("results", "messaging"),
    ("documents", "context"),
    ("proposals", "context"),
    ("votes", "context"),
    ("runs", "runtime"),
    ("schedules", "runtime"),
    ("nodes", "runtime"),
    ("tasks", "tasks"),
    ("task_deps", "tasks"),
    ("task_history", "tasks"),
    ("steps", "workflows"),
    ("hooks", "hooks"),
    ("hook_deliveries", "hooks"),
    ("hook_macs", "hooks"),
];

/// Columns owned by another room than their table's: `(table, column, room)`.
const COLUMNS: &[(&str, &str, &str)] = &[
    // An agent as a thing that runs: its run state, its session, its node.
    ("agents", "state", "runtime"),
    ("agents", "state_reason", "runtime"),
    ("agents", "resume_at", "runtime"),
    ("agents", "pauses", "runtime"),
    ("agents", "session_id", "runtime"),
    ("agents", "session_usage", "runtime"),
    ("agents", "node", "runtime"),
    // How far an agent has taken the instance's broadcasts in as rows.
    ("agents", "broadcast_mark", "messaging"),
    // The send guard's count of hops without the lead.
    ("workflows", "hops", "messaging"),
    // Where the instance's documents live, and who owns them.
    ("workflows", "doc_provider", "context"),
    ("workflows", "doc_dir", "context"),
    ("workflows", "document_owner", "context"),
    // A workflow run: its state, why, when, with what.
    ("workflows", "state", "workflows"),
    ("workflows", "reason", "workflows"),
    ("workflows", "started_at", "workflows"),
    ("workflows", "ended_at", "workflows"),
    ("workflows", "params", "workflows"),
    ("workflows", "budget", "workflows"),
    ("workflows", "source", "workflows"),
    ("workflows", "trigger_text", "workflows"),
    ("workflows", "step_vars", "workflows"),
];

/// Writes by a room that does not own the table, each with its reason. Only
/// shrinks: a pair that no longer writes must leave the list.
const EXCEPTIONS: &[(&str, &str, &str)] = &[
    // agent_update, agent_delete and a worktree agent's branch in its configuration
    // (runtime/agents, runtime/worktrees), and the labels placement settles on: the
    // registry's rows changed where the runtime decides them.
    (
        "agents",
        "runtime",
        "agent_update, agent_delete, a worktree's config, placement's labels",
    ),
    // A workflow run's start upserts its agents: their configuration and their run
    // state in one statement (a conversation kept only for the same CLI and folder).
    ("agents", "workflows", "a run's start upserts its agents"),
];

/// The tables the schema creates (views and the store's own table aside).
fn tables() -> BTreeSet<String> {
    let text = std::fs::read_to_string(SCHEMA).unwrap();
    let re = Regex::new(r"(?i)CREATE TABLE (?:IF NOT EXISTS )?([a-z_]+)\b").unwrap();
    re.captures_iter(&text)
        .map(|c| c[1].to_lowercase())
        .filter(|t| t != "kernel_state")
        .collect()
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// The room a kernel file belongs to: its first path component under src/.
fn room_of(file: &Path) -> String {
    let rel = file.strip_prefix(KERNEL).unwrap();
    let first = rel
        .components()
        .next()
        .unwrap()
        .as_os_str()
        .to_string_lossy();
    first.trim_end_matches(".rs").to_owned()
}

/// Every table `text` writes, by name (SQL in string literals, comments blanked),
/// with the columns an `UPDATE` sets (none for an insert or a delete).
fn written(text: &str, tables: &BTreeSet<String>) -> Vec<(String, Vec<String>)> {
    let re = Regex::new(r"(?i)\b(INSERT\s+INTO|UPDATE|DELETE\s+FROM)\s+([a-z_]+)").unwrap();
    let text = blank_comments(text);
    re.captures_iter(&text)
        .filter(|c| tables.contains(&c[2].to_lowercase()))
        .map(|c| {
            let set = if c[1].eq_ignore_ascii_case("update") {
                set_columns(&text[c.get(0).unwrap().end()..])
            } else {
                Vec::new()
            };
            (c[2].to_lowercase(), set)
        })
        .collect()
}

/// The columns an `UPDATE`'s `SET` clause (at the start of `rest`) assigns: each
/// `name =` at the clause's top level, up to `WHERE`, `RETURNING` or the string's end.
fn set_columns(rest: &str) -> Vec<String> {
    let Some(set) = Regex::new(r#"(?is)^\s*SET\b(.*?)(?:\bWHERE\b|\bRETURNING\b|"|$)"#)
        .unwrap()
        .captures(rest)
    else {
        return Vec::new();
    };
    let (mut depth, mut top) = (0i32, String::new());
    for ch in set[1].chars() {
        match ch {
            '(' => depth += 1,
            ')' => depth -= 1,
            _ if depth == 0 => top.push(ch),
            _ => {}
        }
    }
    let col = Regex::new(r"(?i)(?:^|,)\s*([a-z_]+)\s*=").unwrap();
    col.captures_iter(&top)
        .map(|c| c[1].to_lowercase())
        .collect()
}

/// The room a write belongs to: the owner of every column an `UPDATE` sets when
/// they all have one, else the table's.
fn write_owner(table: &str, set: &[String], owners: &BTreeMap<&str, &str>) -> String {
    let of = |c: &String| {
        COLUMNS
            .iter()
            .find(|(t, col, _)| *t == table && col == c)
            .map(|(_, _, r)| *r)
    };
    let rooms: BTreeSet<&str> = set
        .iter()
        .filter(|c| c.as_str() != "updated_at")
        .map(|c| of(c).unwrap_or(owners.get(table).copied().unwrap_or("?")))
        .collect();
    match rooms.len() {
        1 => rooms.into_iter().next().unwrap().to_owned(),
        _ => owners.get(table).copied().unwrap_or("?").to_owned(),
    }
}

/// `text` with its line comments (`//` to the end of the line) blanked.
fn blank_comments(text: &str) -> String {
    text.lines()
        .map(|l| l.find("//").map_or(l, |i| &l[..i]))
        .collect::<Vec<_>>()
        .join("\n")
}

/// (table, writing room) -> (the write's owner, where), for every write in the
/// kernel's rooms.
fn writers() -> BTreeMap<(String, String), Vec<(String, String)>> {
    let tables = tables();
    let owners: BTreeMap<&str, &str> = OWNERS.iter().copied().collect();
    let mut files = Vec::new();
    rust_files(Path::new(KERNEL), &mut files);
    let mut out: BTreeMap<(String, String), Vec<(String, String)>> = BTreeMap::new();
    for f in files {
        let room = room_of(&f);
        if room == "sql_states" || room == "testing" || f.to_string_lossy().contains("tests") {
            continue;
        }
        let text = std::fs::read_to_string(&f).unwrap();
        for (t, set) in written(&text, &tables) {
            let rel = f.strip_prefix(KERNEL).unwrap().display().to_string();
            let owner = write_owner(&t, &set, &owners);
            out.entry((t, room.clone())).or_default().push((owner, rel));
        }
    }
    out
}

#[test]
fn every_table_is_written_by_its_owning_room_alone() {
    let owners: BTreeMap<&str, &str> = OWNERS.iter().copied().collect();
    let tables = tables();
    for t in &tables {
        assert!(
            owners.contains_key(t.as_str()),
            "table {t} has no owning room: add it to OWNERS in tests/tidy_tables.rs"
        );
    }
    let allowed: BTreeSet<(&str, &str)> = EXCEPTIONS.iter().map(|(t, r, _)| (*t, *r)).collect();
    let writers = writers();
    let mut wrong = Vec::new();
    let mut crossing = BTreeSet::new();
    for ((table, room), writes) in &writers {
        for (owner, file) in writes.iter().filter(|(owner, _)| owner != room) {
            crossing.insert((table.as_str(), room.as_str()));
            if !allowed.contains(&(table.as_str(), room.as_str())) {
                wrong.push(format!(
                    "{room} writes {table} (owned by {owner}) in {file}"
                ));
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "a room writes a table it does not own; ask the owning room (a method taking the \
         transaction) instead:\n{}",
        wrong.join("\n")
    );
    for (table, room, _) in EXCEPTIONS {
        assert!(
            crossing.contains(&(*table, *room)),
            "{room} no longer writes {table}'s rows or columns of another room: remove the pair \
             from EXCEPTIONS"
        );
    }
    assert!(
        writers.len() >= tables.len() - 2,
        "the scan found too few writes: {writers:?}"
    );
}

#[test]
fn the_scan_reads_each_form_of_write() {
    let tables: BTreeSet<String> = ["agents", "runs", "deliveries"].map(String::from).into();
    let text = r#"
        // UPDATE runs SET x = 1 (a comment, not a write)
        c.execute("INSERT INTO agents (name) VALUES (?1)", ..);
        c.execute("update deliveries set state = 'acked'", ..);
        c.execute("DELETE FROM
            runs WHERE id = ?1", ..);
        c.execute("UPDATE nowhere SET a = 1", ..);
    "#;
    let got: Vec<(String, Vec<String>)> = written(text, &tables);
    let want = [
        ("agents", vec![]),
        ("deliveries", vec!["state"]),
        ("runs", vec![]),
    ];
    assert_eq!(got.len(), want.len(), "{got:?}");
    for ((t, set), (wt, wset)) in got.iter().zip(want) {
        assert_eq!(
            (t.as_str(), set.clone()),
            (wt, wset.iter().map(|c| c.to_string()).collect())
        );
    }
}

#[test]
fn an_update_belongs_to_the_owner_of_the_columns_it_sets() {
    let owners: BTreeMap<&str, &str> = OWNERS.iter().copied().collect();
    let check = |sql: &str, want: &str| {
        let tables: BTreeSet<String> = ["agents", "workflows"].map(String::from).into();
        let w = written(sql, &tables);
        assert_eq!(write_owner(&w[0].0, &w[0].1, &owners), want, "{sql}");
    };
    check(
        "UPDATE workflows SET hops = hops + ?2 WHERE id = ?1",
        "messaging",
    );
    check(
        "UPDATE workflows SET hops = 0, state = 'x' WHERE id = ?1",
        "registry",
    );
    check(
        "UPDATE agents SET state = 'idle', resume_at = NULL, updated_at = ?2 WHERE id = ?1",
        "runtime",
    );
    check(
        "UPDATE agents SET state = (SELECT a, b = 1 FROM x) WHERE id = ?1",
        "runtime",
    );
    check("UPDATE agents SET model = ?2 WHERE id = ?1", "registry");
    check("INSERT INTO agents (state) VALUES ('idle')", "registry");
}
