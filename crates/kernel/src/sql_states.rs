//! The state words SQL spells out (`state = 'paused'`, `status IN ('failed',
//! 'lost')`, a column's `DEFAULT`) are held to the texts of the enums in
//! `domain::states`: a word no variant has is a typo, or a state the enums lack.

use regex::Regex;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

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

/// Every quoted word SQL compares a `state` or `status` column with, or gives one
/// as its default, in `text`.
fn state_words(text: &str) -> Vec<String> {
    let one = Regex::new(r"(?i)\b(?:state|status)\s*(?:=|<>|!=)\s*'([a-z_]*)'").unwrap();
    let list = Regex::new(r"(?i)\b(?:state|status)\s+(?:NOT\s+)?IN\s*\(([^)]*)\)").unwrap();
    let default =
        Regex::new(r"(?i)\b(?:state|status)\s+TEXT\s+NOT\s+NULL\s+DEFAULT\s+'([a-z_]*)'").unwrap();
    let quoted = Regex::new(r"'([^']*)'").unwrap();
    let mut words: Vec<String> = one
        .captures_iter(text)
        .chain(default.captures_iter(text))
        .map(|c| c[1].to_owned())
        .collect();
    for c in list.captures_iter(text) {
        words.extend(quoted.captures_iter(&c[1]).map(|q| q[1].to_owned()));
    }
    words
}

#[test]
fn every_state_word_in_sql_is_a_variant() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    rust_files(&root.join("src"), &mut files);
    let store = root.join("../store/src");
    files.push(store.join("schema.rs"));
    files.push(store.join("postgres/schema.rs"));
    let known: BTreeSet<&str> = domain::states::all_state_texts().collect();
    let (mut seen, mut unknown) = (0, Vec::new());
    for f in files.iter().filter(|f| !f.ends_with("sql_states.rs")) {
        let text = std::fs::read_to_string(f).unwrap();
        for w in state_words(&text) {
            seen += 1;
            if !known.contains(w.as_str()) {
                unknown.push(format!("{}: '{w}'", f.display()));
            }
        }
    }
    assert!(seen > 50, "the scan found only {seen} state words");
    assert!(unknown.is_empty(), "not a state: {unknown:#?}");
}

#[test]
fn the_scan_reads_each_form() {
    let words = state_words(
        "WHERE a.state = 'paused' AND d.state <> 'acked' AND r.status NOT IN ('failed', 'lost')
         state TEXT NOT NULL DEFAULT 'idle', state_reason = 'x'",
    );
    assert_eq!(words, ["paused", "acked", "idle", "failed", "lost"]);
}
