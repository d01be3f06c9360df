//! Tidy: every table of the kernel has one room that writes it. Another room that
//! needs a row changed asks the owner (inside the same transaction where the two
//! writes must be atomic), so a table's rules live in one place. This reads every
//! `INSERT INTO`, `UPDATE` and `DELETE FROM` in the kernel's rooms and fails when
//! a room writes a table it does not own, unless the pair is listed below with its
//! reason; a listed pair that no longer writes fails too, so the list only shrinks.

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
    ("documents", "context"),
    ("proposals", "context"),
    ("votes", "context"),
    ("runs", "runtime"),
    ("schedules", "runtime"),
    ("nodes", "runtime"),
    ("steps", "workflows"),
];

/// Writes by a room that does not own the table, each with its reason. Only
/// shrinks: a pair that no longer writes must leave the list.
const EXCEPTIONS: &[(&str, &str, &str)] = &[
    (
        "agents",
        "messaging",
        "the broadcast mark kept per agent (broadcast.rs)",
    ),
    (
        "agents",
        "runtime",
        "an agent's run state, session, lease and node",
    ),
    (
        "agents",
        "workflows",
        "a workflow's agents made at its start, paused at its stop",
    ),
    (
        "contracts",
        "workflows",
        "a workflow's own contracts replaced at its start",
    ),
    (
        "deliveries",
        "runtime",
        "a failed run's or a lost node's reads back to pending",
    ),
    (
        "deliveries",
        "workflows",
        "a step's trigger deliveries dropped when the step moves",
    ),
    ("member_status", "runtime", "a deleted agent's status"),
    ("read_cursors", "runtime", "a deleted agent's cursor"),
    (
        "schedules",
        "workflows",
        "a workflow's schedules made at its start",
    ),
    (
        "tokens",
        "runtime",
        "a run's token minted and revoked with its record",
    ),
    (
        "workflows",
        "context",
        "the instance's document provider and owner",
    ),
    (
        "workflows",
        "messaging",
        "the instance's hop count (the send guard)",
    ),
    (
        "workflows",
        "runtime",
        "hops reset after a run, the document owner released",
    ),
    (
        "workflows",
        "workflows",
        "an instance's state, reason, params and step variables",
    ),
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

/// Every table `text` writes, by name (SQL in string literals, comments blanked).
fn written(text: &str, tables: &BTreeSet<String>) -> Vec<String> {
    let re = Regex::new(r"(?i)\b(?:INSERT\s+INTO|UPDATE|DELETE\s+FROM)\s+([a-z_]+)").unwrap();
    re.captures_iter(&blank_comments(text))
        .map(|c| c[1].to_lowercase())
        .filter(|t| tables.contains(t))
        .collect()
}

/// `text` with its line comments (`//` to the end of the line) blanked.
fn blank_comments(text: &str) -> String {
    text.lines()
        .map(|l| l.find("//").map_or(l, |i| &l[..i]))
        .collect::<Vec<_>>()
        .join("\n")
}

/// (table, room) -> where, for every write in the kernel's rooms.
fn writers() -> BTreeMap<(String, String), Vec<String>> {
    let tables = tables();
    let mut files = Vec::new();
    rust_files(Path::new(KERNEL), &mut files);
    let mut out: BTreeMap<(String, String), Vec<String>> = BTreeMap::new();
    for f in files {
        let room = room_of(&f);
        if room == "sql_states" || room == "testing" || f.to_string_lossy().contains("tests") {
            continue;
        }
        let text = std::fs::read_to_string(&f).unwrap();
        for t in written(&text, &tables) {
            let rel = f.strip_prefix(KERNEL).unwrap().display().to_string();
            out.entry((t, room.clone())).or_default().push(rel);
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
    for ((table, room), files) in &writers {
        let owner = owners.get(table.as_str()).copied().unwrap_or("?");
        if owner != room && !allowed.contains(&(table.as_str(), room.as_str())) {
            wrong.push(format!(
                "{room} writes {table} (owned by {owner}) in {files:?}"
            ));
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
            writers.contains_key(&(table.to_string(), room.to_string())),
            "{room} no longer writes {table}: remove the pair from EXCEPTIONS"
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
    assert_eq!(written(text, &tables), ["agents", "deliveries", "runs"]);
}
