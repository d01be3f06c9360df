//! The map in `src/lib.rs` matches the files: each crate's section names every
//! file and folder at the top of that crate's `src/` (but `lib.rs`, the crate's
//! root), an entry at the start of a line is a file or folder there, and every
//! `.rs` file a section mentions exists.

use std::path::{Path, PathBuf};

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

/// One crate's part of the map: its `src/` (from the workspace root) and its text.
struct Section {
    src: String,
    text: String,
}

/// The sections of the map, from `src/lib.rs`'s top doc: each begins with a line
/// `--- <crate> (<path>/src/)…` whose header ends at the next `---`.
fn sections() -> Vec<Section> {
    let lib = std::fs::read_to_string(Path::new(ROOT).join("src/lib.rs")).unwrap();
    let doc: Vec<&str> = lib
        .lines()
        .filter_map(|l| l.strip_prefix("//!"))
        .map(|l| l.strip_prefix(' ').unwrap_or(l))
        .collect();
    let header = regex::Regex::new(r"^--- [\w-]+ \(([\w/]*src/)\)").unwrap();
    let mut out: Vec<Section> = Vec::new();
    let mut in_header = false;
    for line in doc.iter().take_while(|l| !l.starts_with("# Invariants")) {
        if let Some(m) = header.captures(line) {
            out.push(Section {
                src: m[1].to_owned(),
                text: String::new(),
            });
            in_header = !line.trim_end().ends_with("---") || line.matches("---").count() < 2;
        } else if in_header {
            in_header = !line.trim_end().ends_with("---");
        } else if let Some(s) = out.last_mut() {
            s.text.push_str(line);
            s.text.push('\n');
        }
    }
    out
}

/// Every `.rs` file under `dir`, relative to it.
fn rust_files(dir: &Path, rel: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let name = rel.join(path.file_name().unwrap());
        if path.is_dir() {
            rust_files(&path, &name, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(name);
        }
    }
}

#[test]
fn the_map_names_every_module_file_and_only_files_that_exist() {
    let sections = sections();
    let crates: Vec<&str> = sections.iter().map(|s| s.src.as_str()).collect();
    for src in ["src/", "crates/kernel/src/", "crates/domain/src/"] {
        assert!(
            crates.contains(&src),
            "no section for {src} in the map: {crates:?}"
        );
    }
    let mut all: Vec<(String, Vec<PathBuf>)> = Vec::new();
    for s in &sections {
        let mut files = Vec::new();
        rust_files(&Path::new(ROOT).join(&s.src), Path::new(""), &mut files);
        all.push((s.src.clone(), files));
    }
    let entry = regex::Regex::new(r"(?m)^ {0,2}(\w+(?:\.rs|/))\s").unwrap();
    let mention = regex::Regex::new(r"[\w/]*\w\.rs\b").unwrap();
    let mut wrong = Vec::new();
    for (s, (_, files)) in sections.iter().zip(&all) {
        // Every file and folder at the top of the crate's src/ is named.
        let mut tops: Vec<String> = files
            .iter()
            .map(|f| {
                let mut parts = f.iter();
                let first = parts.next().unwrap().to_string_lossy().into_owned();
                if parts.next().is_some() {
                    format!("{first}/")
                } else {
                    first
                }
            })
            .filter(|t| t != "lib.rs")
            .collect();
        tops.sort();
        tops.dedup();
        for top in &tops {
            let named =
                regex::Regex::new(&format!(r"(^|[^\w/]){}($|[^\w])", regex::escape(top))).unwrap();
            if !named.is_match(&s.text) {
                wrong.push(format!("{}{top} is not in the map", s.src));
            }
        }
        // An entry (a line's first word) is a file or folder at the top.
        for m in entry.captures_iter(&s.text) {
            let e = &m[1];
            if e != "lib.rs" && !tops.iter().any(|t| t == e) {
                wrong.push(format!(
                    "the map's entry {}{e} is no file or folder there",
                    s.src
                ));
            }
        }
        // A file mentioned is one of the crate's (or, with its folder, another's).
        for m in mention.find_iter(&s.text) {
            let word = m.as_str();
            let is = |f: &PathBuf| {
                let f = f.to_string_lossy();
                f == word || f.ends_with(&format!("/{word}"))
            };
            let here = files.iter().any(is);
            let elsewhere = word.contains('/') && all.iter().any(|(_, fs)| fs.iter().any(is));
            if !here && !elsewhere {
                wrong.push(format!(
                    "the map's section for {} names {word}, which is not there",
                    s.src
                ));
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "make src/lib.rs's map match the files:\n{}",
        wrong.join("\n")
    );
}
