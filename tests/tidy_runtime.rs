//! The runtime stays a set of services: no type of the kernel grows past
//! [`MAX_METHODS`] methods (counted over all its inherent `impl` blocks), and the
//! runtime's modules use one another without a cycle (a service is built from the
//! ones below it; what goes up goes through a trait the lower one defines).

use crate::tidy_functions::blank_literals;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

const KERNEL: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/crates/kernel/src");

/// Most methods a type of the kernel may have.
const MAX_METHODS: usize = 50;

/// Types over the limit for now, with their count: it may only shrink. `Kernel`
/// (the façade) loses its pass-through methods as the rooms are called directly.
const ALLOWED: &[(&str, usize)] = &[];

/// The code of a file: literals and comments blanked, what is only for tests cut
/// (from the first `#[cfg(test)]` on: test modules and helpers come last).
fn code_of(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap();
    let code = blank_literals(&text);
    code.split("#[cfg(test)]")
        .next()
        .unwrap_or(&code)
        .to_owned()
}

#[test]
fn no_type_of_the_kernel_has_more_than_fifty_methods() {
    let mut counts: BTreeMap<String, (usize, BTreeSet<String>)> = BTreeMap::new();
    for path in rust_files(Path::new(KERNEL)) {
        let rel = path.strip_prefix(KERNEL).unwrap().display().to_string();
        if rel.ends_with("tests.rs") {
            continue; // a test module's fixtures
        }
        for (ty, n) in inherent_methods(&code_of(&path)) {
            let e = counts.entry(ty).or_default();
            e.0 += n;
            e.1.insert(rel.clone());
        }
    }
    let allowed = |t: &str| {
        ALLOWED
            .iter()
            .find(|(a, _)| *a == t)
            .map_or(MAX_METHODS, |a| a.1)
    };
    let over: Vec<String> = counts
        .iter()
        .filter(|(t, (n, _))| *n > allowed(t))
        .map(|(t, (n, files))| format!("{t}: {n} methods, in {files:?}"))
        .collect();
    assert!(
        over.is_empty(),
        "a type of the kernel has more than {MAX_METHODS} methods (or more than ALLOWED says): \
         split it into services that own their state:\n{}",
        over.join("\n")
    );
}

/// Each inherent `impl` block of the code (`impl T {`, not `impl X for T {`) as
/// its type's last name and the number of `fn`s directly inside it.
fn inherent_methods(code: &str) -> Vec<(String, usize)> {
    let header = regex::Regex::new(r"(?m)^\s*impl\b(\s*<[^{;]*?>)?\s+([\w:]+)[^{;]*\{").unwrap();
    let func = regex::Regex::new(r"\bfn\s+\w+").unwrap();
    let trait_for = regex::Regex::new(r"\bfor\b").unwrap();
    let mut out = Vec::new();
    for m in header.captures_iter(code) {
        let whole = m.get(0).unwrap();
        if trait_for.is_match(whole.as_str()) {
            continue;
        }
        let ty = m[2].rsplit("::").next().unwrap().to_owned();
        let body = block_at(code, whole.end() - 1);
        let top = depth_one(body);
        out.push((ty, func.find_iter(&top).count()));
    }
    out
}

/// The text from the `{` at `open` to its matching `}`.
fn block_at(code: &str, open: usize) -> &str {
    let mut depth = 0;
    for (i, c) in code[open..].char_indices() {
        match c {
            '{' => depth += 1,
            '}' => {
                depth -= 1;
                if depth == 0 {
                    return &code[open..open + i + 1];
                }
            }
            _ => {}
        }
    }
    &code[open..]
}

/// A block's text at its own depth (what nested braces hold is left out).
fn depth_one(block: &str) -> String {
    let mut depth = 0;
    let mut out = String::new();
    for c in block.chars() {
        match c {
            '{' => depth += 1,
            '}' => depth -= 1,
            _ if depth == 1 => out.push(c),
            _ => {}
        }
    }
    out
}

#[test]
fn no_cycle_between_the_runtime_s_modules() {
    let runtime = Path::new(KERNEL).join("runtime");
    let graph = uses_between(&modules_of(&runtime));
    if let Some(cycle) = a_cycle(&graph) {
        panic!(
            "the runtime's modules use one another in a cycle: {}\n(a service names only the \
             services below it; tell one above through a trait the lower one defines)",
            cycle.join(" -> ")
        );
    }
}

/// A runtime module: its name (`mod` for the runtime's root, `runtime/mod.rs`)
/// and its files' code, each with its depth below the runtime.
struct Module {
    name: String,
    files: Vec<(usize, String)>,
}

fn modules_of(runtime: &Path) -> Vec<Module> {
    let mut out: BTreeMap<String, Vec<(usize, String)>> = BTreeMap::new();
    for path in rust_files(runtime) {
        let rel = path.strip_prefix(runtime).unwrap();
        let parts: Vec<String> = rel
            .iter()
            .map(|p| p.to_string_lossy().trim_end_matches(".rs").to_owned())
            .collect();
        let name = parts[0].clone();
        if name == "mod" || parts.last().is_some_and(|p| p == "tests") {
            if name == "mod" {
                out.entry(name).or_default().push((0, code_of(&path)));
            }
            continue;
        }
        // A file's depth below the runtime: how many `super`s climb to it.
        let depth = parts.len() - usize::from(parts.last().is_some_and(|p| p == "mod"));
        out.entry(name).or_default().push((depth, code_of(&path)));
    }
    out.into_iter()
        .map(|(name, files)| Module { name, files })
        .collect()
}

/// Which module uses which: by path (`crate::runtime::x`, `runtime::x::`,
/// `super::x` climbing to the runtime) and by the types a module defines.
fn uses_between(modules: &[Module]) -> BTreeMap<String, BTreeSet<String>> {
    let names: BTreeSet<&str> = modules.iter().map(|m| m.name.as_str()).collect();
    let owners = type_owners(modules);
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for m in modules {
        let uses = graph.entry(m.name.clone()).or_default();
        for (depth, code) in &m.files {
            for named in paths_named(code, *depth, &names) {
                if named != m.name {
                    uses.insert(named);
                }
            }
            for word in bare_words(code) {
                match owners.get(word) {
                    Some(owner) if *owner != m.name => {
                        uses.insert(owner.clone());
                    }
                    _ => {}
                }
            }
        }
    }
    graph
}

/// The words of the code that stand alone (not after `::` nor `.`): the types it
/// names itself, among others.
fn bare_words(code: &str) -> BTreeSet<&str> {
    let word = regex::Regex::new(r"(^|[^\w:.])([A-Z]\w*)").unwrap();
    word.captures_iter(code)
        .map(|c| c.get(2).unwrap().as_str())
        .collect()
}

/// The runtime modules a file's paths name (`mod` for an item of the runtime's
/// root, such as `Runtime`).
fn paths_named(code: &str, depth: usize, modules: &BTreeSet<&str>) -> Vec<String> {
    let supers = "super::".repeat(depth.max(1));
    let path = regex::Regex::new(&format!(
        r"(?:\bcrate::runtime::|(?:^|[^:\w])runtime::|(?:^|[^:\w]){})(\{{|\w+)",
        regex::escape(&supers)
    ))
    .unwrap();
    let mut heads = Vec::new();
    for m in path.captures_iter(code) {
        let next = m.get(1).unwrap();
        if next.as_str() == "{" {
            heads.extend(group_heads(&code[next.start()..]));
        } else {
            heads.push(next.as_str().to_owned());
        }
    }
    heads
        .into_iter()
        .map(|h| {
            if modules.contains(h.as_str()) {
                h
            } else {
                "mod".to_owned()
            }
        })
        .collect()
}

/// The first name of each path in a `{…}` use group starting at the text's start.
fn group_heads(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let (mut depth, mut head, mut word) = (0, true, String::new());
    for c in text.chars() {
        if c.is_alphanumeric() || c == '_' {
            word.push(c);
            continue;
        }
        if depth == 1 && head && !word.is_empty() {
            out.push(std::mem::take(&mut word));
            head = false;
        }
        word.clear();
        match c {
            '{' => depth += 1,
            '}' if depth == 1 => break,
            '}' => depth -= 1,
            ',' if depth == 1 => head = true,
            _ => {}
        }
    }
    out
}

/// The types (structs, enums, traits) each runtime module defines, by name: only
/// names no other module of the kernel defines, so that a name means one type.
fn type_owners(modules: &[Module]) -> BTreeMap<String, String> {
    let def =
        regex::Regex::new(r"(?m)^(?:pub(?:\([\w: ]+\))? )?(?:struct|enum|trait|type) ([A-Z]\w*)")
            .unwrap();
    let mut seen: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for m in modules {
        for (_, code) in &m.files {
            for d in def.captures_iter(code) {
                seen.entry(d[1].to_owned())
                    .or_default()
                    .insert(m.name.clone());
            }
        }
    }
    let mut elsewhere = BTreeSet::new();
    for path in rust_files(Path::new(KERNEL)) {
        if !path.starts_with(Path::new(KERNEL).join("runtime")) {
            for d in def.captures_iter(&code_of(&path)) {
                elsewhere.insert(d[1].to_owned());
            }
        }
    }
    seen.into_iter()
        .filter(|(t, owners)| owners.len() == 1 && !elsewhere.contains(t))
        .map(|(t, owners)| (t, owners.into_iter().next().unwrap()))
        .collect()
}

/// A cycle of the graph, as the modules along it (the first again at its end).
fn a_cycle(graph: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    fn visit(
        n: &str,
        graph: &BTreeMap<String, BTreeSet<String>>,
        done: &mut BTreeSet<String>,
        path: &mut Vec<String>,
    ) -> Option<Vec<String>> {
        if let Some(i) = path.iter().position(|p| p == n) {
            let mut cycle = path[i..].to_vec();
            cycle.push(n.to_owned());
            return Some(cycle);
        }
        if done.contains(n) {
            return None;
        }
        path.push(n.to_owned());
        for next in graph.get(n).into_iter().flatten() {
            if let Some(c) = visit(next, graph, done, path) {
                return Some(c);
            }
        }
        path.pop();
        done.insert(n.to_owned());
        None
    }
    let mut done = BTreeSet::new();
    graph
        .keys()
        .find_map(|n| visit(n, graph, &mut done, &mut Vec::new()))
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
    out.sort();
    out
}

#[test]
fn methods_are_counted_per_type_and_paths_read_per_depth() {
    let code = "impl<T> A<T> {\n    fn a() { fn inner() {} }\n    pub async fn b(&self) {}\n}\n\
                impl X for A {\n    fn c() {}\n}\nimpl super::B {\n    fn d() {}\n}\n";
    assert_eq!(
        inherent_methods(code),
        [("A".to_owned(), 2), ("B".to_owned(), 1)]
    );
    let uses = "use super::super::scheduler::Wake;\nuse crate::runtime::{base::Base, Runtime};\n\
                use tokio::runtime::Handle;\n";
    let modules = BTreeSet::from(["scheduler", "base", "mod"]);
    assert_eq!(paths_named(uses, 2, &modules), ["scheduler", "base", "mod"]);
    assert!(paths_named("use super::gate;", 2, &modules).is_empty());
    let graph: BTreeMap<String, BTreeSet<String>> = [
        ("a", vec!["b"]),
        ("b", vec!["c"]),
        ("c", vec!["a"]),
        ("d", vec![]),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v.into_iter().map(str::to_owned).collect()))
    .collect();
    assert_eq!(a_cycle(&graph).unwrap(), ["a", "b", "c", "a"]);
}
