//! The kernel's room order, read from the tree: a room's code names only itself,
//! the rooms below it and what is shared below them all, so that a room cannot
//! call one above it (signals go up as events).

use crate::tidy_functions::blank_literals;
use std::path::{Path, PathBuf};

const KERNEL: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/crates/kernel/src");

/// Each top-level name of the kernel crate and its floor, lowest first. Floor 0 is
/// shared below every room: the crate root's own items (`Caller`, `Scope`, …),
/// `events` (the bus rooms signal up through) and `timing` (the clock, `Setup`).
/// `feedback` (what members report) stands on the store alone, beside registry.
/// The store is a crate of its own, below them all. `facade` (`Kernel`) builds
/// every room and may name them all; `sql_states` is a test module.
const FLOORS: &[(&str, usize)] = &[
    ("events", 0),
    ("timing", 0),
    ("registry", 1),
    ("feedback", 1),
    ("governance", 2),
    ("messaging", 3),
    ("context", 4),
    ("runtime", 5),
    ("tasks", 6),
    ("workflows", 7),
    // Hooks start workflows and post to channels: above them all.
    ("hooks", 8),
    ("facade", 9),
    ("Kernel", 9),
];

/// Modules of the crate root that are no room: the façade, and tests (`testing`
/// builds the rooms for them).
const NOT_ROOMS: &[&str] = &["facade", "sql_states", "testing"];

#[test]
fn no_room_names_a_room_above_it() {
    let lib = std::fs::read_to_string(Path::new(KERNEL).join("lib.rs")).unwrap();
    let declared: Vec<&str> = lib
        .lines()
        .filter_map(|l| {
            let l = l
                .trim_start()
                .strip_prefix("pub ")
                .unwrap_or(l.trim_start());
            l.strip_prefix("mod ")?.strip_suffix(';')
        })
        .collect();
    for m in &declared {
        assert!(
            FLOORS.iter().any(|(n, _)| n == m) || NOT_ROOMS.contains(m),
            "the kernel's module {m} has no floor in tests/tidy_rooms.rs: place it in FLOORS"
        );
    }
    let mut found = Vec::new();
    for path in rust_files(Path::new(KERNEL)) {
        let rel = path.strip_prefix(KERNEL).unwrap();
        let module: Vec<String> = module_path(rel);
        let Some(top) = module.first() else {
            continue; // lib.rs: the crate root declares every module.
        };
        if NOT_ROOMS.contains(&top.as_str()) || rel.to_string_lossy().ends_with("tests.rs") {
            continue;
        }
        let floor = floor_of(top).unwrap_or(0);
        let text = std::fs::read_to_string(&path).unwrap();
        let code = blank_literals(&text);
        // Tests may build a whole kernel: only the code before the test module.
        let code = code.split("#[cfg(test)]").next().unwrap_or(&code);
        for (line, named) in named_tops(code, &module) {
            if floor_of(&named).is_some_and(|f| f > floor) {
                found.push(format!(
                    "crates/kernel/src/{}:{line}: {top} names {named}",
                    rel.display()
                ));
            }
        }
    }
    assert!(
        found.is_empty(),
        "a room names a room above it (store < registry < governance < messaging < context < \
         runtime < tasks < workflows < hooks; send an event up instead):\n{}",
        found.join("\n")
    );
}

fn floor_of(name: &str) -> Option<usize> {
    FLOORS.iter().find(|(n, _)| *n == name).map(|(_, f)| *f)
}

/// A file's module path inside the crate (`runtime/scheduler/gate.rs` is
/// `runtime::scheduler::gate`, a `mod.rs` its folder's module).
fn module_path(rel: &Path) -> Vec<String> {
    let mut parts: Vec<String> = rel
        .iter()
        .map(|p| p.to_string_lossy().trim_end_matches(".rs").to_owned())
        .collect();
    if parts.last().is_some_and(|p| p == "mod" || p == "lib") {
        parts.pop();
    }
    parts
}

/// Each top-level name of the crate a file's code names, with its line: after
/// `crate::`, at the root after enough `super::`s, or inside `crate::{…}`.
fn named_tops(code: &str, module: &[String]) -> Vec<(usize, String)> {
    let path = regex::Regex::new(r"\bcrate::(\{|\w+)|\b((?:super::)+)(\{|\w+)").unwrap();
    let line_at = |pos: usize| code[..pos].matches('\n').count() + 1;
    let mut out = Vec::new();
    for m in path.captures_iter(code) {
        let supers = m.get(2).map_or(0, |s| s.as_str().matches("super").count());
        // `super` from a file climbs from the module it is in.
        if m.get(2).is_some() && supers != module.len() {
            continue;
        }
        let next = m.get(1).or(m.get(3)).unwrap();
        let at = next.start();
        if next.as_str() == "{" {
            for name in group_heads(&code[at..]) {
                out.push((line_at(at), name));
            }
        } else {
            out.push((line_at(at), next.as_str().to_owned()));
        }
    }
    out
}

/// The first name of each path in a `{…}` use group starting at the text's start.
fn group_heads(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut depth = 0;
    let mut expect_head = true;
    let mut word = String::new();
    for c in text.chars() {
        if c.is_alphanumeric() || c == '_' {
            word.push(c);
            continue;
        }
        if depth == 1 && expect_head && !word.is_empty() {
            out.push(std::mem::take(&mut word));
            expect_head = false;
        }
        word.clear();
        match c {
            '{' => depth += 1,
            '}' => {
                depth -= 1;
                if depth == 0 {
                    break;
                }
            }
            ',' if depth == 1 => expect_head = true,
            _ => {}
        }
    }
    out
}

fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            out.extend(rust_files(&path));
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
    out
}

#[test]
fn use_groups_and_super_paths_are_read() {
    let code =
        "use crate::{Caller, runtime::{a, b}, messaging};\nuse super::super::workflows::X;\n";
    let module = ["context".to_owned(), "documents".to_owned()];
    let names: Vec<String> = named_tops(code, &module)
        .into_iter()
        .map(|(_, n)| n)
        .collect();
    assert_eq!(names, ["Caller", "runtime", "messaging", "workflows"]);
    let one_up = named_tops("use super::tally;", &module);
    assert!(one_up.is_empty(), "{one_up:?}");
}
