//! Tidy: the suite's fixed sleeps stay short. A test that waits for something polls
//! it with a deadline (tests/common has the waits); a sleep that must stay (nothing
//! may happen for a while) is short. This sums every literal sleep in tests/ that is
//! not a polling loop's interval, and fails above the budget.
//!
//! A sleep counts as a poll's interval when it sits in a `loop`, `while` or `for`
//! whose body can end it early (`break`, `return`, `assert`, `panic!`); every other
//! `sleep(Duration::from_millis(N))` or `from_secs(N)` counts once, as written.

use std::path::{Path, PathBuf};
use std::time::Duration;

/// The most all fixed sleeps in the suite may add up to.
const BUDGET: Duration = Duration::from_secs(1);

#[test]
fn fixed_sleeps_in_tests_stay_within_the_budget() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests");
    let mut files = Vec::new();
    rust_files(&root, &mut files);
    let mut total = Duration::ZERO;
    let mut listed = Vec::new();
    for f in files {
        if f.ends_with("tidy_sleeps.rs") {
            continue; // its own examples
        }
        let text = std::fs::read_to_string(&f).unwrap();
        for (line, d) in fixed_sleeps(&text) {
            total += d;
            listed.push(format!(
                "{}:{line}: {d:?}",
                f.strip_prefix(&root).unwrap().display()
            ));
        }
    }
    eprintln!(
        "fixed sleeps in tests: {:.1} s in all\n{}",
        total.as_secs_f64(),
        listed.join("\n")
    );
    assert!(
        total <= BUDGET,
        "the tests' fixed sleeps add up to {total:?}, over {BUDGET:?}: poll a condition with a \
         deadline instead\n{}",
        listed.join("\n")
    );
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

/// How a block is entered: a `while` ends itself on its condition; a `loop` or
/// `for` only if its body says so.
#[derive(Clone, Copy, PartialEq)]
enum Head {
    While,
    Loop,
    Other,
}

/// A block: where its `{` and `}` are (byte offsets), and how it is entered.
struct Block {
    open: usize,
    close: usize,
    head: Head,
}

/// The blocks of a source, by matching braces outside strings, chars and comments.
fn blocks(src: &str) -> Vec<Block> {
    let b = src.as_bytes();
    let (mut out, mut stack) = (Vec::new(), Vec::new());
    // Where the statement being read began: after the last `;`, `{` or `}`.
    let mut stmt = 0;
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'/' if b.get(i + 1) == Some(&b'/') => {
                while i < b.len() && b[i] != b'\n' {
                    i += 1;
                }
            }
            b'"' => {
                i += 1;
                while i < b.len() && b[i] != b'"' {
                    i += if b[i] == b'\\' { 2 } else { 1 };
                }
            }
            b'\'' if b.get(i + 2) == Some(&b'\'') => i += 2,
            b';' => stmt = i + 1,
            b'{' => {
                stack.push((i, head(&src[stmt..i])));
                stmt = i + 1;
            }
            b'}' => {
                if let Some((open, head)) = stack.pop() {
                    out.push(Block {
                        open,
                        close: i,
                        head,
                    });
                }
                stmt = i + 1;
            }
            _ => {}
        }
        i += 1;
    }
    out
}

/// What the statement before a `{` starts (its comment lines aside).
fn head(stmt: &str) -> Head {
    let code: Vec<&str> = stmt
        .lines()
        .map(str::trim)
        .filter(|l| !l.starts_with("//"))
        .collect();
    let text = code.join(" ");
    let text = text.trim_start();
    let text = text.strip_prefix("let ").map_or(text, |h| {
        h.split_once('=').map_or(h, |(_, r)| r.trim_start())
    });
    if text.starts_with("while ") {
        Head::While
    } else if text.starts_with("loop") || text.starts_with("for ") {
        Head::Loop
    } else {
        Head::Other
    }
}

/// The fixed sleeps in a source: (line, duration).
fn fixed_sleeps(src: &str) -> Vec<(usize, Duration)> {
    let blocks = blocks(src);
    let mut out = Vec::new();
    for (at, _) in src.match_indices("sleep(") {
        let Some(d) = literal_duration(&src[at..]) else {
            continue;
        };
        let polled = blocks.iter().any(|b| {
            let body = &src[b.open..b.close];
            b.open < at
                && at < b.close
                && (b.head == Head::While
                    || b.head == Head::Loop
                        && ["break", "return", "assert", "panic!"]
                            .iter()
                            .any(|w| body.contains(w)))
        });
        if !polled {
            out.push((src[..at].lines().count(), d));
        }
    }
    out
}

/// `sleep(Duration::from_millis(300))` and the like: the literal duration, if any.
fn literal_duration(call: &str) -> Option<Duration> {
    let call = &call[..call.find(';').unwrap_or(call.len()).min(80)];
    for (unit, ms) in [("from_millis(", 1), ("from_secs(", 1000)] {
        if let Some(p) = call.find(unit) {
            let digits: String = call[p + unit.len()..]
                .chars()
                .take_while(|c| c.is_ascii_digit() || *c == '_')
                .filter(|c| *c != '_')
                .collect();
            return digits
                .parse::<u64>()
                .ok()
                .map(|n| Duration::from_millis(n * ms));
        }
    }
    None
}

#[test]
fn a_polling_loop_is_not_a_fixed_sleep() {
    let src = r#"
        async fn t() {
            tokio::time::sleep(Duration::from_millis(300)).await;
            loop {
                if done() { break; }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            for x in ["a", "b"] {
                send(x); // "{" in a string
                tokio::time::sleep(Duration::from_secs(2)).await;
            }
            let n = loop {
                assert!(Instant::now() < end);
                std::thread::sleep(Duration::from_millis(20));
            };
            // a while ends on its condition
            while Path::new(&format!("/proc/{pid}")).exists() {
                std::thread::sleep(Duration::from_millis(100));
            }
        }
    "#;
    let got: Vec<Duration> = fixed_sleeps(src).into_iter().map(|(_, d)| d).collect();
    assert_eq!(
        got,
        [Duration::from_millis(300), Duration::from_secs(2)],
        "a loop that cannot end early is a fixed wait, once per line"
    );
}
