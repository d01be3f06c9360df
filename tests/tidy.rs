//! The house's rules that the compiler cannot keep, kept by reading the tree:
//! which crate may depend on which (from `cargo metadata`), where a database engine
//! may be named, who may write to stdout, how long a source file may be, that
//! the kernel's rooms never name `Kernel` (only its façade does), that no state or
//! backend word is compared or matched as a string, that every test file is in
//! the suite, that the binary declares only the dependencies its source uses,
//! that building a test or an example and then the binary compiles nothing twice,
//! and that each crate can be published (one version, no file embedded from
//! outside it). Beside it: `tidy_functions.rs` (no function over 100 lines),
//! `tidy_rooms.rs` (the kernel's room order), `tidy_map.rs` (the map in
//! `src/lib.rs` matches the files), `tidy_sleeps.rs` (fixed sleeps in tests).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

/// Each workspace crate and the workspace crates it may depend on: arrows point
/// down only. `domain` and `os` are the ground floor; the binary crate is the top.
const LAYERS: &[(&str, &[&str])] = &[
    ("agent-worker-domain", &[]),
    ("agent-worker-os", &[]),
    ("agent-worker-telemetry", &[]),
    (
        "agent-worker-store",
        &["agent-worker-domain", "agent-worker-os"],
    ),
    (
        "agent-worker-kernel",
        &[
            "agent-worker-domain",
            "agent-worker-os",
            "agent-worker-store",
            "agent-worker-telemetry",
        ],
    ),
    (
        "agent-worker-worker",
        &[
            "agent-worker-domain",
            "agent-worker-os",
            "agent-worker-telemetry",
        ],
    ),
    (
        "agent-worker-mcp",
        &[
            "agent-worker-domain",
            "agent-worker-kernel",
            "agent-worker-store",
            "agent-worker-telemetry",
        ],
    ),
    (
        "agent-worker",
        &[
            "agent-worker-domain",
            "agent-worker-os",
            "agent-worker-store",
            "agent-worker-kernel",
            "agent-worker-worker",
            "agent-worker-mcp",
            "agent-worker-telemetry",
        ],
    ),
];

/// The workspace's packages as `cargo metadata` describes them (no registry).
fn metadata() -> serde_json::Value {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = std::process::Command::new(cargo)
        .args([
            "metadata",
            "--no-deps",
            "--format-version",
            "1",
            "--offline",
        ])
        .current_dir(ROOT)
        .output()
        .expect("run cargo metadata");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn no_crate_depends_on_one_above_it() {
    let meta = metadata();
    let allowed: BTreeMap<&str, &[&str]> = LAYERS.iter().copied().collect();
    let mut seen = BTreeSet::new();
    for package in meta["packages"].as_array().unwrap() {
        let name = package["name"].as_str().unwrap();
        let may = allowed.get(name).unwrap_or_else(|| {
            panic!("{name} is a workspace crate this test does not place: add it to LAYERS")
        });
        seen.insert(name);
        for dep in package["dependencies"].as_array().unwrap() {
            let dep_name = dep["name"].as_str().unwrap();
            let internal = dep["path"].is_string();
            let dev = dep["kind"].as_str() == Some("dev");
            if internal && !dev {
                assert!(
                    may.contains(&dep_name),
                    "{name} depends on {dep_name}, which it may not (allowed: {may:?})"
                );
            }
        }
    }
    assert_eq!(
        seen.len(),
        LAYERS.len(),
        "a crate of LAYERS is missing from the workspace"
    );
}

/// Our crates are published together at one version, each asking for exactly
/// that version of the others (crates.io needs a version beside each path), so a
/// release bumps them all at once and nothing mixes two releases.
#[test]
fn our_crates_ask_for_each_other_at_the_one_version() {
    let meta = metadata();
    let packages = meta["packages"].as_array().unwrap();
    let version = packages[0]["version"].as_str().unwrap();
    let mut wrong = Vec::new();
    for package in packages {
        let name = package["name"].as_str().unwrap();
        if package["version"] != version {
            wrong.push(format!("{name} is at {}", package["version"]));
        }
        for dep in package["dependencies"].as_array().unwrap() {
            let req = dep["req"].as_str().unwrap();
            if dep["path"].is_string() && req != format!("={version}") {
                wrong.push(format!("{name} asks for {} {req}", dep["name"]));
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "every crate at {version}, asking for the others at ={version} \
         ([workspace.dependencies] of Cargo.toml):\n{}",
        wrong.join("\n")
    );
}

/// A published crate holds only the files under its own folder, so what a crate
/// embeds (`include_str!`, `include_bytes!`) must be there: a link in the crate's
/// folder to a file elsewhere in the repository is packaged as the file.
#[test]
fn no_crate_embeds_a_file_outside_its_folder() {
    let include = regex::Regex::new(r#"include_(str|bytes)!\(\s*"([^"]+)""#).unwrap();
    let mut found = Vec::new();
    for path in source_files() {
        let name = relative(&path);
        // The folder each file ships in: its crate's, or src/ for the binary's.
        let home = match name.strip_prefix("crates/") {
            Some(rest) => format!("crates/{}/", rest.split('/').next().unwrap()),
            None => "src/".to_owned(),
        };
        let text = std::fs::read_to_string(&path).unwrap();
        for (i, line) in text.lines().enumerate() {
            for m in include.captures_iter(line) {
                let mut at: Vec<&str> = name.split('/').collect();
                at.pop(); // the file itself
                for part in m[2].split('/') {
                    match part {
                        ".." => drop(at.pop()),
                        "." => {}
                        part => at.push(part),
                    }
                }
                if !at.join("/").starts_with(&home) {
                    found.push(format!("{name}:{}: {}", i + 1, line.trim()));
                }
            }
        }
    }
    assert!(
        found.is_empty(),
        "embedded from outside the crate, so its published package cannot build:\n{}",
        found.join("\n")
    );
}

/// The binary crate's [dependencies] are what its src/ names: what only the tests
/// and examples use (a client, the engines) is a dev-dependency, so the build of
/// the binary neither compiles nor declares it.
#[test]
fn the_binary_depends_only_on_what_its_source_names() {
    let meta = metadata();
    let root = meta["packages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "agent-worker")
        .expect("the binary's package");
    let files: Vec<String> = files_under(&Path::new(ROOT).join("src"))
        .iter()
        .map(|p| {
            let text = std::fs::read_to_string(p).unwrap();
            text.lines().map(code_of).collect::<Vec<_>>().join("\n")
        })
        .collect();
    let mut unused = Vec::new();
    for dep in root["dependencies"].as_array().unwrap() {
        if !dep["kind"].is_null() {
            continue; // dev or build
        }
        let name = dep["rename"].as_str().or(dep["name"].as_str()).unwrap();
        let name = name.replace('-', "_");
        let re = |pattern: String| regex::Regex::new(&pattern).unwrap();
        // `use name::..`, or a path `name::..` where no `use` of the file has
        // brought in a module of that name (`use mcp::{http, ..}` then `http::app`).
        let used = re(format!(r"\buse\s+{name}\b|\bextern crate {name}\b"));
        let path = re(format!(r"(^|[^\w:]){name}::"));
        let shadowed = re(format!(r"\buse\s+[^;]*?[:{{,]\s*{name}\s*[,}};]"));
        let names = |text: &String| {
            used.is_match(text) || (path.is_match(text) && !shadowed.is_match(text))
        };
        if !files.iter().any(names) {
            unused.push(name);
        }
    }
    assert!(
        unused.is_empty(),
        "src/ never names {unused:?}: drop them from the root package's [dependencies] \
         (a dev-dependency if the tests or examples use them)"
    );
}

/// Each package `cargo tree` shows over these edges (`normal,build` for the
/// binary's build, with `dev` for a test's or an example's), with the feature sets
/// it is built with.
fn features_over(edges: &str) -> BTreeMap<String, BTreeSet<String>> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = std::process::Command::new(cargo)
        .args(["tree", "--workspace", "--offline", "--prefix", "none"])
        .args(["-e", edges, "-f", "{p} [{f}]"])
        .current_dir(ROOT)
        .output()
        .expect("run cargo tree");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut packages: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for line in String::from_utf8(out.stdout).unwrap().lines() {
        let line = line.trim_end_matches(" (*)");
        if let Some((package, features)) = line.rsplit_once(" [") {
            let features = features.trim_end_matches(']').to_owned();
            packages
                .entry(package.to_owned())
                .or_default()
                .insert(features);
        }
    }
    assert!(packages.len() > 100, "cargo tree listed too little");
    packages
}

/// `cargo build` after `cargo run --example demo` (or `cargo test`) compiles no
/// crate again: no dev-dependency turns on a feature of a package the binary's
/// build also has, since a package built with other features is a new build of it
/// and of every crate above it (bitflags, then nix, rusqlite, rmcp.. and ours).
#[test]
fn building_an_example_then_the_binary_compiles_nothing_twice() {
    let binary = features_over("normal,build");
    let with_dev = features_over("normal,build,dev");
    let differ: Vec<String> = binary
        .iter()
        .filter_map(|(package, features)| {
            let dev = with_dev.get(package)?;
            (dev != features).then(|| format!("{package}: {features:?} -> {dev:?}"))
        })
        .collect();
    assert!(
        differ.is_empty(),
        "the dev-dependencies change these packages' features, so `cargo build` after \
         an example or a test compiles them and all above them again (give the normal \
         dependencies those features, or drop them from the dev-dependencies):\n{}",
        differ.join("\n")
    );
}

/// Every `.rs` file under `dir`.
fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                out.push(path);
            }
        }
    }
    out
}

/// Every `.rs` file of the shipped code (the crates and the binary's `src/`).
fn source_files() -> Vec<PathBuf> {
    let mut out = files_under(&Path::new(ROOT).join("src"));
    out.extend(files_under(&Path::new(ROOT).join("crates")));
    assert!(
        out.len() > 100,
        "the source tree was not found under {ROOT}"
    );
    out
}

fn relative(path: &Path) -> String {
    path.strip_prefix(ROOT).unwrap().display().to_string()
}

/// A line's code: without its comment and its string literals (roughly: enough
/// for names, which is all the rules below look for).
fn code_of(line: &str) -> String {
    let line = line.split("//").next().unwrap_or("");
    let mut out = String::new();
    let mut in_string = false;
    let mut escaped = false;
    for c in line.chars() {
        match (in_string, c) {
            (true, '\\') if !escaped => escaped = true,
            (true, '"') if !escaped => in_string = false,
            (true, _) => escaped = false,
            (false, '"') => in_string = true,
            (false, c) => out.push(c),
        }
    }
    out
}

#[test]
fn only_the_store_names_a_database_engine() {
    let engine = regex::Regex::new(
        r"\b(rusqlite|tokio_postgres|postgres|sqlite)::|Location::(Sqlite|Postgres)\b|\bSqliteProvider\b",
    )
    .unwrap();
    let mut found = Vec::new();
    for path in source_files() {
        let name = relative(&path);
        if name.starts_with("crates/store/") {
            continue;
        }
        let text = std::fs::read_to_string(&path).unwrap();
        for (i, line) in text.lines().enumerate() {
            if engine.is_match(&code_of(line)) {
                found.push(format!("{name}:{}: {}", i + 1, line.trim()));
            }
        }
    }
    assert!(
        found.is_empty(),
        "engine names outside the store crate:\n{}",
        found.join("\n")
    );
}

/// The files that may write to stdout: the stdio transport and the bridge that
/// relays it, `--help`/`--version`, the worker's report lines and the probe's line.
const STDOUT_WRITERS: &[&str] = &[
    "crates/mcp/src/stdio.rs",
    "src/bridge/mod.rs",
    "src/main.rs",
    "crates/worker/src/lib.rs",
    "crates/worker/src/probe.rs",
];

#[test]
fn nothing_but_the_transport_writes_to_stdout() {
    let writes = regex::Regex::new(r"\bprintln!|\bprint!|\bstdout\(\)|stdio_pipes\(").unwrap();
    let mut found = Vec::new();
    for path in source_files() {
        let name = relative(&path);
        if STDOUT_WRITERS.contains(&name.as_str()) {
            continue;
        }
        let text = std::fs::read_to_string(&path).unwrap();
        for (i, line) in text.lines().enumerate() {
            if writes.is_match(&code_of(line)) {
                found.push(format!("{name}:{}: {}", i + 1, line.trim()));
            }
        }
    }
    assert!(
        found.is_empty(),
        "stdout written outside the transport:\n{}",
        found.join("\n")
    );
}

#[test]
fn no_source_file_is_over_600_lines() {
    let long: Vec<String> = source_files()
        .iter()
        .filter_map(|p| {
            let n = std::fs::read_to_string(p).unwrap().lines().count();
            (n > 600).then(|| format!("{}: {n} lines", relative(p)))
        })
        .collect();
    assert!(long.is_empty(), "split these files:\n{}", long.join("\n"));
}

/// The one mappings between the typed states and backends and their words, and
/// the other texts that spell one of those words for what it is themselves.
const STATE_WORD_MAPPINGS: &[&str] = &[
    "crates/domain/src/states.rs",
    "crates/domain/src/backends.rs",
    // The `on:` events of a step workflow (`<step>.failed`), whose own mapping
    // this is: a word of the workflow YAML, not a stored state.
    "crates/domain/src/steps/mod.rs",
];

#[test]
fn no_state_or_backend_is_compared_as_a_string() {
    // The words of the typed states and backends (`domain::states`,
    // `domain::backends`): outside that mapping, code compares or matches the
    // enums (`==`/`!=`, a `match` arm's pattern, `matches!`).
    let words = "idle|running|paused|failed|pending|acked|seen|deferred|succeeded|stopped|lost|\
                 completed|blocked|scheduled|active|resolved|approved|denied|timed_out|expired|\
                 cancelled|retry|resume|schedule|claude|codex|cursor|gemini|opencode|sdk|mock|\
                 external|human";
    let compared = regex::Regex::new(&format!(
        r#"(==|!=)\s*"({words})"|matches!\([^,]*,\s*"({words})""#
    ))
    .unwrap();
    let word = regex::Regex::new(&format!(r#""({words})""#)).unwrap();
    let guard = regex::Regex::new(r"\bif\b").unwrap();
    let mut found = Vec::new();
    for path in source_files() {
        let name = relative(&path);
        if STATE_WORD_MAPPINGS.contains(&name.as_str())
            || name.ends_with("tests.rs")
            || name.contains("/tests/")
        {
            continue;
        }
        let text = std::fs::read_to_string(&path).unwrap();
        for (i, line) in text.lines().enumerate() {
            let line_code = line.split("//").next().unwrap_or("");
            // A match arm's pattern: what is left of its `=>`, before its guard.
            let pattern = line_code
                .split_once("=>")
                .map(|(left, _)| guard.split(left).next().unwrap_or(left));
            if compared.is_match(line_code) || pattern.is_some_and(|p| word.is_match(p)) {
                found.push(format!("{name}:{}: {}", i + 1, line.trim()));
            }
        }
    }
    assert!(
        found.is_empty(),
        "compare the typed state or backend instead:\n{}",
        found.join("\n")
    );
}

/// The kernel's code before its test module (tests may build a whole kernel).
fn without_tests(text: &str) -> &str {
    text.split("#[cfg(test)]").next().unwrap_or(text)
}

#[test]
fn rooms_are_services_and_only_the_facade_is_the_kernel() {
    // Each room is a struct built from the store, the clock, the events and the
    // rooms below it; `Kernel` is the composition root and the façade over them.
    let names_kernel = regex::Regex::new(
        r"\bimpl Kernel\b|&(Arc<)?Kernel\b|\bcrate::Kernel\b|\bKernel,|, Kernel\b",
    )
    .unwrap();
    let mut found = Vec::new();
    for path in source_files() {
        let name = relative(&path);
        let in_facade =
            name.starts_with("crates/kernel/src/facade/") || name == "crates/kernel/src/lib.rs";
        // Test code (`*tests.rs`, and `testing.rs`, the kernel's test fixtures, a
        // `#[cfg(test)]` module) may open a whole kernel.
        let test_only = name.ends_with("tests.rs") || name == "crates/kernel/src/testing.rs";
        if !name.starts_with("crates/kernel/src/") || in_facade || test_only {
            continue;
        }
        let text = std::fs::read_to_string(&path).unwrap();
        for (i, line) in without_tests(&text).lines().enumerate() {
            if names_kernel.is_match(&code_of(line)) {
                found.push(format!("{name}:{}: {}", i + 1, line.trim()));
            }
        }
    }
    assert!(
        found.is_empty(),
        "a room names Kernel (give it what it needs instead, and its façade method to facade/):\n{}",
        found.join("\n")
    );
}

/// Cargo builds only the test targets Cargo.toml names (`autotests = false`), so a
/// file in tests/ that tests/suite.rs does not declare would never compile or run.
#[test]
fn every_test_file_is_a_module_of_the_suite() {
    let tests = Path::new(ROOT).join("tests");
    let suite = std::fs::read_to_string(tests.join("suite.rs")).unwrap();
    let declared: BTreeSet<String> = suite
        .lines()
        .filter_map(|l| l.strip_prefix("mod ")?.strip_suffix(';').map(str::to_owned))
        .collect();
    let own_targets = ["suite", "sqlite_allocator"];
    let missing: Vec<String> = std::fs::read_dir(&tests)
        .unwrap()
        .filter_map(|e| {
            let name = e.unwrap().file_name().into_string().unwrap();
            name.strip_suffix(".rs").map(str::to_owned)
        })
        .filter(|stem| !own_targets.contains(&stem.as_str()) && !declared.contains(stem))
        .collect();
    assert!(
        missing.is_empty(),
        "tests/{missing:?}.rs are not in tests/suite.rs: add `mod NAME;` there"
    );
    let manifest = std::fs::read_to_string(Path::new(ROOT).join("Cargo.toml")).unwrap();
    assert!(
        manifest.contains("path = \"tests/sqlite_allocator.rs\""),
        "sqlite_allocator is a test target of its own in Cargo.toml"
    );
}
