//! One clock in the kernel: every room reads the injected `timing::Clock`, so a
//! test on a manual clock sees one time everywhere, and no decision reads two
//! clocks. This fails when kernel code reads the system's time itself: a free
//! `now_ms` (`domain::clock::now_ms()`, `clock::now_ms`, a `use` of it, the
//! function passed as a value) or `SystemTime::now()`. `self.clock.now_ms()` and
//! `clock.now_ms()` on a `Clock` are what rooms call. It also fails when the name
//! of the variable that once shifted the process's clock comes back in `crates/` or
//! `src/`.

use crate::tidy_functions::blank_literals;
use std::path::{Path, PathBuf};

const ROOT: &str = env!("CARGO_MANIFEST_DIR");
const KERNEL: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/crates/kernel/src");

/// The clock itself: the one kernel file that reads the system's time.
const THE_CLOCK: &str = "timing.rs";

/// Paths under `crates/kernel/src/` not checked yet: the runtime moves to the
/// injected clock with its services. Empty it then.
const NOT_YET: &[&str] = &[];

/// The variable that shifted every clock of a process, built here so that this
/// file does not name it.
fn shift_variable() -> String {
    ["AGENT_WORKER", "CLOCK", "SHIFT_MS"].join("_")
}

fn files(dir: &Path, keep: &dyn Fn(&Path) -> bool, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            if p.file_name()
                .is_some_and(|n| n != "node_modules" && n != "target")
            {
                files(&p, keep, out);
            }
        } else if keep(&p) {
            out.push(p);
        }
    }
}

/// The lines (1-based) of `code` (literals blanked) that read the system's time.
fn system_time_reads(code: &str) -> Vec<usize> {
    let free_now = regex::Regex::new(r"(^|[^.\w])now_ms\b").unwrap();
    let system_now = regex::Regex::new(r"\bSystemTime\s*::\s*now\b").unwrap();
    let mut out = Vec::new();
    for (i, line) in code.lines().enumerate() {
        let defines = line.trim_start().starts_with("pub fn now_ms")
            || line.trim_start().starts_with("fn now_ms");
        let free = free_now
            .find_iter(line)
            .any(|m| !line[..m.start() + 1].trim_end().ends_with("fn"));
        if (free && !defines) || system_now.is_match(line) {
            out.push(i + 1);
        }
    }
    out
}

#[test]
fn the_kernel_reads_one_clock() {
    let mut all = Vec::new();
    files(
        Path::new(KERNEL),
        &|p| p.extension().is_some_and(|e| e == "rs"),
        &mut all,
    );
    assert!(all.len() > 50, "the kernel's source was not found");
    let mut found = Vec::new();
    for path in all {
        let rel = path
            .strip_prefix(KERNEL)
            .unwrap()
            .to_string_lossy()
            .replace('\\', "/");
        if rel == THE_CLOCK || NOT_YET.iter().any(|p| rel.starts_with(p)) {
            continue;
        }
        let code = blank_literals(&std::fs::read_to_string(&path).unwrap());
        for line in system_time_reads(&code) {
            found.push(format!("crates/kernel/src/{rel}:{line}"));
        }
    }
    assert!(
        found.is_empty(),
        "kernel code reads the system's time instead of the injected clock (a room has \
         `self.clock`; a function inside a store job takes `now: i64` from its caller):\n{}",
        found.join("\n")
    );
}

#[test]
fn nothing_names_the_variable_that_shifted_the_clock() {
    let name = shift_variable();
    let mut all = Vec::new();
    let text = |p: &Path| {
        p.extension().and_then(|e| e.to_str()).is_some_and(|e| {
            [
                "rs", "md", "toml", "py", "js", "ts", "html", "yml", "yaml", "sh", "json",
            ]
            .contains(&e)
        })
    };
    for dir in ["crates", "src"] {
        files(&Path::new(ROOT).join(dir), &text, &mut all);
    }
    let named: Vec<String> = all
        .iter()
        .filter(|p| std::fs::read_to_string(p).is_ok_and(|t| t.contains(&name)))
        .map(|p| p.strip_prefix(ROOT).unwrap().display().to_string())
        .collect();
    assert!(
        named.is_empty(),
        "{name} is gone (a test moves a manual clock instead), yet these name it: {named:?}"
    );
}

#[test]
fn what_reads_the_system_time() {
    let check = |src: &str, expect: &[usize]| {
        assert_eq!(system_time_reads(&blank_literals(src)), expect, "{src}");
    };
    check("let t = domain::clock::now_ms();", &[1]);
    check("use domain::clock::{fmt_ms, now_ms};", &[1]);
    check(".map_or_else(domain::clock::now_ms, |m| m.at)", &[1]);
    check("let t = now_ms();", &[1]);
    check("let t = std::time::SystemTime::now();", &[1]);
    check("let t = self.clock.now_ms();\nlet u = clock.now_ms();", &[]);
    check("pub fn now_ms(&self) -> i64 {", &[]);
    check("// now_ms() in a comment\nlet s = \"now_ms()\";", &[]);
}
