//! Fuzzing every parser an outsider reaches: mentions and the addressed rule,
//! targets, durations and times, cron and `every`, document paths, workflow YAML
//! with `${{ }}`, and JSON-RPC framing (the checks, and the real binary over
//! stdio).
//!
//! A small mutation fuzzer, deterministic per seed: each case takes an entry of
//! the corpus in tests/fuzz-corpus/<target>/ (or a fresh random string) and
//! mutates it (byte flips, inserted syntax from a dictionary, splices of two
//! entries, repetition). Each target checks that the parser never panics, answers
//! quickly, and keeps the invariants its module documents. A failing input is
//! saved as tests/fuzz-corpus/<target>/failed-<hash> (commit it: it then runs every
//! time) and the test fails naming it.
//!
//! `cargo test --test suite fuzz::` runs a short round (CI); longer on demand:
//! `FUZZ_CASES=200000 cargo test --release --test suite fuzz:: -- --ignored fuzz`.
//! `FUZZ_SEED` picks the seed (printed by every run).

use agent_worker::clock;
use agent_worker::kernel::context::documents::DocPath;
use agent_worker::kernel::messaging::mentions;
use agent_worker::mcp::jsonrpc;
use agent_worker::names::{AgentRef, WorkflowRef};
use agent_worker::trigger::Trigger;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Cases per target in the quick round (CI).
const QUICK: usize = 400;
/// The longest one case may take.
const SLOW: Duration = Duration::from_millis(1500);

fn corpus_dir(target: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fuzz-corpus")
        .join(target)
}

fn corpus(target: &str) -> Vec<Vec<u8>> {
    let mut v: Vec<(PathBuf, Vec<u8>)> = std::fs::read_dir(corpus_dir(target))
        .map(|d| {
            d.flatten()
                .map(|e| (e.path(), std::fs::read(e.path()).unwrap_or_default()))
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v.into_iter().map(|(_, b)| b).collect()
}

const LONG_WORD: &str = "zzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzz";

const DICT: &[&str] = &[
    "@",
    "@all",
    "@user",
    ":",
    "::",
    "-",
    "- ",
    "\n",
    "\r\n",
    "\t",
    " ",
    "[",
    "]",
    "{",
    "}",
    "${{",
    "}}",
    "${{ params.x }}",
    "'",
    "\"",
    "\\",
    "#",
    "&a",
    "*a",
    "|",
    ">",
    "..",
    "/",
    "./",
    "~",
    "\u{0}",
    "\u{fffd}",
    "é",
    "日本",
    "0",
    "-1",
    "99999999999999999999",
    "1e309",
    "NaN",
    "*/0",
    "MON-FRI",
    "JAN",
    "ms",
    "h",
    "d",
    "y",
    "T",
    "Z",
    "+",
    "null",
    "true",
    ",",
    ";",
    "&&",
    "$(",
    "`",
    "%",
    "\u{202e}",
    LONG_WORD,
];

fn mutate(rng: &mut StdRng, seeds: &[Vec<u8>]) -> Vec<u8> {
    let mut b = if seeds.is_empty() || rng.random_ratio(1, 10) {
        (0..rng.random_range(0..40)).map(|_| rng.random()).collect()
    } else {
        seeds[rng.random_range(0..seeds.len())].clone()
    };
    for _ in 0..rng.random_range(1..6) {
        let at = if b.is_empty() {
            0
        } else {
            rng.random_range(0..=b.len())
        };
        match rng.random_range(0..6) {
            0 if !b.is_empty() => {
                let i = rng.random_range(0..b.len());
                b[i] ^= 1 << rng.random_range(0..8);
            }
            1 => {
                let w = DICT[rng.random_range(0..DICT.len())].as_bytes();
                b.splice(at..at, w.iter().copied());
            }
            2 if !b.is_empty() => {
                let end = rng.random_range(at..=b.len());
                b.drain(at..end);
            }
            3 if !seeds.is_empty() => {
                let other = &seeds[rng.random_range(0..seeds.len())];
                let from = rng.random_range(0..=other.len());
                b.splice(at..at, other[from..].iter().copied());
            }
            4 if !b.is_empty() => {
                let end = rng.random_range(at..=b.len().min(at + 8));
                let chunk = b[at..end].to_vec();
                for _ in 0..rng.random_range(1..64) {
                    b.splice(at..at, chunk.iter().copied());
                }
            }
            _ => b.push(rng.random()),
        }
    }
    b.truncate(64 * 1024);
    b
}

/// Runs `cases` mutated inputs through `check`; a panic or an Err fails the test
/// after the input is saved.
fn fuzz(target: &str, cases: usize, check: impl Fn(&[u8]) -> Result<(), String>) {
    let seed: u64 = std::env::var("FUZZ_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(rand::random);
    eprintln!("fuzz {target}: {cases} cases, FUZZ_SEED={seed}");
    let mut rng = StdRng::seed_from_u64(seed);
    let seeds = corpus(target);
    // Every corpus entry as it is first, then mutations.
    let inputs = seeds
        .iter()
        .cloned()
        .chain((0..cases).map(|_| mutate(&mut rng, &seeds)));
    for input in inputs {
        let t = Instant::now();
        let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| check(&input)));
        let problem = match outcome {
            Err(_) => Some("panicked".to_owned()),
            Ok(Err(e)) => Some(e),
            Ok(Ok(())) if t.elapsed() > SLOW => Some(format!("took {:?}", t.elapsed())),
            Ok(Ok(())) => None,
        };
        if let Some(p) = problem {
            let name = format!("failed-{:016x}", fxhash(&input));
            let _ = std::fs::write(corpus_dir(target).join(&name), &input);
            panic!(
                "fuzz {target} (FUZZ_SEED={seed}): {p} on input saved as tests/fuzz-corpus/{target}/{name}: {:?}",
                String::from_utf8_lossy(&input)
            );
        }
    }
}

fn fxhash(b: &[u8]) -> u64 {
    b.iter().fold(0xcbf29ce484222325u64, |h, x| {
        (h ^ *x as u64).wrapping_mul(0x100000001b3)
    })
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn cases() -> usize {
    std::env::var("FUZZ_CASES")
        .ok()
        .and_then(|c| c.parse().ok())
        .unwrap_or(QUICK)
}

// ---- the targets ---------------------------------------------------------------

fn mentions_target(b: &[u8]) -> Result<(), String> {
    let t = text(b);
    let m = mentions::parse(&t);
    let members: Vec<String> = ["alice", "Bob", "user", "carol-2"]
        .map(String::from)
        .to_vec();
    let agents: Vec<String> = members.iter().filter(|m| *m != "user").cloned().collect();
    let (rec, unknown) = mentions::recipients(&m, &members, &agents, "alice");
    for r in &rec {
        if !members.contains(r) {
            return Err(format!("recipient {r} is not a member"));
        }
        if r == "alice" {
            return Err("the sender received its own message".into());
        }
    }
    for u in &unknown {
        if members.iter().any(|m| m.eq_ignore_ascii_case(u)) || u.eq_ignore_ascii_case("all") {
            return Err(format!("{u} is a member but reported unknown"));
        }
    }
    // The addressed rule: when the leading mentions reach someone (a member other
    // than the sender, or @all), only they get it; when they reach nobody (typos,
    // the sender itself) the body's mentions decide. @all is every agent, and a
    // member named beside it (the lead, `@user`) gets it too.
    let all = m.leading.iter().any(|l| l.eq_ignore_ascii_case("all"));
    let resolved: Vec<&String> = members
        .iter()
        .filter(|x| {
            (all && agents.contains(x)) || m.leading.iter().any(|l| l.eq_ignore_ascii_case(x))
        })
        .collect();
    let resolved: Vec<&String> = resolved.into_iter().filter(|r| *r != "alice").collect();
    if !resolved.is_empty() {
        for r in &rec {
            if !resolved.contains(&r) {
                return Err(format!(
                    "{r} got it though the message is addressed to {:?}",
                    m.leading
                ));
            }
        }
    }
    let _ = mentions::priority(&m, &t);
    Ok(())
}

fn targets_target(b: &[u8]) -> Result<(), String> {
    let t = text(b);
    if let Ok(w) = WorkflowRef::parse(&t) {
        let again = WorkflowRef::parse(&w.to_string())
            .map_err(|e| format!("{w} does not re-parse: {e}"))?;
        if again != w {
            return Err(format!("{w} re-parses as {again}"));
        }
    }
    if let Ok(a) = AgentRef::parse(&t) {
        let again =
            AgentRef::parse(&a.to_string()).map_err(|e| format!("{a} does not re-parse: {e}"))?;
        if again != a {
            return Err(format!("{a} re-parses as {again}"));
        }
        if a.name.is_empty() || a.name.contains('@') {
            return Err(format!("agent name {:?}", a.name));
        }
    }
    Ok(())
}

fn durations_target(b: &[u8]) -> Result<(), String> {
    let t = text(b);
    if let Ok(d) = clock::parse_duration(&t, "x")
        && d > clock::MAX_DURATION
    {
        return Err(format!("{t:?} parsed as {d:?}"));
    }
    let _ = clock::parse_when(&t, "x", clock::now_ms());
    if let Ok(trig) = Trigger::every(&t) {
        let now = clock::now_ms();
        match trig.next_after(now) {
            Some(n) if n <= now => return Err(format!("every {t:?} fires in the past")),
            _ => {}
        }
    }
    Ok(())
}

fn cron_target(b: &[u8]) -> Result<(), String> {
    let t = text(b);
    for trig in [Trigger::cron(&t), Trigger::wakeup(&t)]
        .into_iter()
        .flatten()
    {
        let now = clock::now_ms();
        if let Some(n) = trig.next_after(now)
            && n <= now
        {
            return Err(format!("{t:?} fires in the past"));
        }
        let stored = Trigger::stored(trig.kind(), &trig.spec())
            .map_err(|e| format!("{t:?} does not survive storage: {e}"))?;
        if stored.spec() != trig.spec() {
            return Err(format!("{t:?} stored as {}", stored.spec()));
        }
    }
    Ok(())
}

fn docpaths_target(b: &[u8]) -> Result<(), String> {
    let t = text(b);
    let Ok(p) = DocPath::parse(&t) else {
        return Ok(());
    };
    let s = p.as_str();
    let bad = s.is_empty()
        || s.starts_with('/')
        || s.len() > 256
        || s.split('/').count() > 8
        || s.split('/')
            .any(|c| c.is_empty() || c == "." || c == ".." || c.starts_with('.'))
        || s.contains('\\')
        || s.contains('\0');
    if bad {
        return Err(format!("{t:?} was accepted as {s:?}"));
    }
    Ok(())
}

fn yaml_target(b: &[u8]) -> Result<(), String> {
    let t = text(b);
    let dir = std::env::temp_dir();
    match agent_worker::workflow_yaml::parse(&t, None, &dir) {
        Ok(_) => Ok(()),
        Err(e) => {
            // YAML breaks lines at \n, \r\n and a lone \r.
            let lines = t
                .replace("\r\n", "\n")
                .replace('\r', "\n")
                .lines()
                .count()
                .max(1)
                + 1;
            if e.line == 0 || e.line > lines || e.column == 0 {
                return Err(format!(
                    "error position {}:{} outside the text: {e}",
                    e.line, e.column
                ));
            }
            if e.message.is_empty() {
                return Err("an error without a message".into());
            }
            Ok(())
        }
    }
}

fn jsonrpc_target(b: &[u8]) -> Result<(), String> {
    match jsonrpc::check_bytes(b) {
        Ok(v) => {
            if !v.is_object() {
                return Err(format!("accepted a non-object {v}"));
            }
            Ok(())
        }
        Err(r) => {
            let j = r.to_json();
            if j["error"]["code"].as_i64().is_none() || j["jsonrpc"] != "2.0" {
                return Err(format!("malformed refusal {j}"));
            }
            Ok(())
        }
    }
}

macro_rules! targets {
    ($($name:ident, $long:ident, $target:literal, $f:path;)*) => {$(
        #[test]
        fn $name() {
            fuzz($target, cases(), $f);
        }
        #[test]
        #[ignore = "long fuzzing, on demand: cargo test --release --test suite fuzz:: -- --ignored fuzz"]
        fn $long() {
            fuzz($target, cases().max(50_000), $f);
        }
    )*};
}

targets! {
    fuzz_mentions, fuzz_mentions_long, "mentions", mentions_target;
    fuzz_targets, fuzz_targets_long, "targets", targets_target;
    fuzz_durations, fuzz_durations_long, "durations", durations_target;
    fuzz_cron, fuzz_cron_long, "cron", cron_target;
    fuzz_docpaths, fuzz_docpaths_long, "docpaths", docpaths_target;
    fuzz_yaml, fuzz_yaml_long, "yaml", yaml_target;
    fuzz_jsonrpc_checks, fuzz_jsonrpc_checks_long, "jsonrpc", jsonrpc_target;
}

/// The real binary over stdio: mutated lines, each request answered or refused,
/// never a hang, and it still answers a ping at the end.
#[test]
fn fuzz_jsonrpc_over_stdio() {
    stdio_round(cases() / 4);
}

#[test]
#[ignore = "long fuzzing, on demand"]
fn fuzz_jsonrpc_over_stdio_long() {
    stdio_round(cases().max(20_000));
}

fn stdio_round(n: usize) {
    use std::io::{BufRead, BufReader, Write};
    let dir = tempfile::tempdir().unwrap();
    /// Kills and reaps the server however the test ends.
    struct Reaped(std::process::Child);
    impl Drop for Reaped {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_agent-worker"))
        .arg("--data-dir")
        .arg(dir.path())
        .arg("--foreground")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .map(Reaped)
        .unwrap();
    let mut stdin = child.0.stdin.take().unwrap();
    let out = BufReader::new(child.0.stdout.take().unwrap());
    let (tx, rx) = std::sync::mpsc::channel::<String>();
    std::thread::spawn(move || {
        for l in out.lines().map_while(Result::ok) {
            if tx.send(l).is_err() {
                return;
            }
        }
    });
    let seed: u64 = rand::random();
    eprintln!("fuzz jsonrpc over stdio: {n} lines, seed {seed}");
    let mut rng = StdRng::seed_from_u64(seed);
    let seeds = corpus("jsonrpc");
    writeln!(stdin, "{}", String::from_utf8_lossy(&seeds[1])).unwrap();
    writeln!(stdin, "{}", String::from_utf8_lossy(&seeds[2])).unwrap();
    for _ in 0..n {
        let mut line = mutate(&mut rng, &seeds);
        line.retain(|b| *b != b'\n');
        stdin.write_all(&line).unwrap();
        stdin.write_all(b"\n").unwrap();
    }
    writeln!(
        stdin,
        r#"{{"jsonrpc":"2.0","id":"last-ping","method":"ping"}}"#
    )
    .unwrap();
    stdin.flush().unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut answered = false;
    while Instant::now() < deadline {
        match rx.recv_timeout(Duration::from_secs(5)) {
            Ok(l) => {
                let v: serde_json::Value = serde_json::from_str(&l)
                    .unwrap_or_else(|e| panic!("a line on stdout that is not JSON ({e}): {l}"));
                if v["id"] == "last-ping" {
                    answered = true;
                    break;
                }
            }
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => continue,
            Err(_) => break,
        }
    }
    drop(child);
    assert!(
        answered,
        "the server stopped answering after the fuzzed lines (seed {seed})"
    );
}
