//! What particular programs run besides themselves (see the parent module's docs).
//! Each function adds the runs of one command and returns whether it is plain.

use super::options::{AWK, INTERPS, OTHER, WATCH, XARGS, scan};
use super::wrappers::{WRAPPERS, Wrap};
use super::{Run, Word, analyze_text, is_assignment, join, resolve};

const SHELLS: &[&str] = &[
    "sh", "bash", "dash", "zsh", "ksh", "mksh", "ash", "yash", "posh", "rbash", "fish", "csh",
    "tcsh",
];
/// Interpreters, by name or versioned name (`python3.12`).
const INTERPRETERS: &[&str] = &[
    "python",
    "pypy",
    "perl",
    "ruby",
    "node",
    "nodejs",
    "deno",
    "bun",
    "php",
    "lua",
    "luajit",
    "Rscript",
    "tclsh",
    "wish",
    "julia",
    "pwsh",
    "powershell",
    "osascript",
    "irb",
    "jshell",
];
const AWKS: &[&str] = &["awk", "gawk", "mawk", "nawk"];
const DELETERS: &[&str] = &["unlink", "shred", "rmdir"];

pub(super) fn special(run: Run, args: &[Word], depth: usize, out: &mut Vec<Run>) -> bool {
    let name = run.program.clone().unwrap_or_default();
    let n = name.as_str();
    if let Some(w) = WRAPPERS.iter().find(|w| w.names.contains(&n)) {
        return wrapped(w, run, args, depth, out);
    }
    if DELETERS.contains(&n) {
        let rest = join(args);
        let sep = if rest.is_empty() { "" } else { " " };
        out.push(Run {
            alias: Some(format!("rm{sep}{rest}")),
            ..run
        });
        return true;
    }
    let known = SHELLS.contains(&n)
        || AWKS.contains(&n)
        || is_interpreter(n)
        || matches!(
            n,
            "su" | "runuser"
                | "script"
                | "eval"
                | "trap"
                | "source"
                | "."
                | "alias"
                | "find"
                | "xargs"
                | "watch"
                | "parallel"
                | "expect"
        );
    if !known {
        out.push(run);
        return true;
    }
    if run.tail || (run.dynamic && !is_interpreter(n)) {
        return unknown(run, out);
    }
    out.push(run.clone());
    match n {
        _ if SHELLS.contains(&n) => shell(run, args, depth, out),
        _ if AWKS.contains(&n) => awk(run, args, out),
        _ if is_interpreter(n) => interpreter(run, args, out),
        "su" | "runuser" | "script" => command_option(run, args, depth, out),
        "eval" => analyze_text(&join(args), depth + 1, out),
        "trap" => match args.first() {
            Some(a) if !a.text.starts_with('-') => analyze_text(&a.text, depth + 1, out),
            _ => true,
        },
        "alias" if !args.iter().any(|a| a.text.contains('=')) => true,
        "find" => find(run, args, depth, out),
        "xargs" => xargs(run, args, depth, out),
        "watch" => watch(run, args, depth, out),
        _ => unknown(run, out),
    }
}

fn is_interpreter(n: &str) -> bool {
    INTERPRETERS.iter().any(|i| versioned(n, i))
}

/// `n` is `name` or a version of it (`python3.12`).
fn versioned(n: &str, name: &str) -> bool {
    n.strip_prefix(name)
        .is_some_and(|v| v.chars().all(|c| c.is_ascii_digit() || c == '.'))
}

/// The line does not say what runs: replaces `run` (if it was added) with an unknown one.
fn unknown(run: Run, out: &mut Vec<Run>) -> bool {
    if out.last() == Some(&run) {
        out.pop();
    }
    out.push(Run::unknown(run.text));
    true
}

fn wrapped(w: &Wrap, run: Run, args: &[Word], depth: usize, out: &mut Vec<Run>) -> bool {
    let Some((mut i, seen)) = scan(&w.opts, args) else {
        return unknown(run, out);
    };
    let program = run.program.as_deref();
    if program == Some("command") && seen.iter().any(|(o, _)| matches!(*o, "-v" | "-V")) {
        out.push(run);
        return true;
    }
    if seen
        .iter()
        .any(|(o, _)| *o == "--help" || *o == "--version")
    {
        out.push(run);
        return true;
    }
    while w.assigns && args.get(i).is_some_and(is_assignment) {
        i += 1;
    }
    i += w.skip;
    if program == Some("flock")
        && let Some(c) = args
            .get(i)
            .filter(|c| matches!(c.text.as_str(), "-c" | "--command"))
    {
        out.push(run);
        return c.dynamic || command_string(args.get(i + 1), depth, out);
    }
    let nested = args.get(i..).unwrap_or_default();
    let tail = run.tail;
    if nested.is_empty() && tail {
        return unknown(run, out);
    }
    out.push(run);
    nested.is_empty() || resolve(nested, depth + 1, tail, out)
}

/// A command line given as one word (`-c 'rm x'`): read, or unknown if missing or
/// only known when it runs.
fn command_string(w: Option<&Word>, depth: usize, out: &mut Vec<Run>) -> bool {
    match w {
        Some(w) if !w.dynamic => analyze_text(&w.text, depth + 1, out),
        _ => {
            out.push(Run::unknown(w.map(|w| w.text.clone()).unwrap_or_default()));
            true
        }
    }
}

/// `sh -c STRING` is read; a shell reading a script or its input is unknown.
fn shell(run: Run, args: &[Word], depth: usize, out: &mut Vec<Run>) -> bool {
    let mut i = 0;
    let mut code = false;
    while let Some(a) = args.get(i) {
        let t = a.text.as_str();
        if t == "--" || t == "-" {
            i += 1;
            break;
        }
        if !(t.starts_with('-') || t.starts_with('+')) {
            break;
        }
        if matches!(t, "-o" | "+o" | "-O" | "+O" | "--rcfile" | "--init-file") {
            i += 2;
            continue;
        }
        code |= !t.starts_with("--") && t[1..].contains('c');
        i += 1;
    }
    if code {
        return command_string(args.get(i), depth, out);
    }
    if args.get(i).is_none() && !args.is_empty() && args.iter().all(|a| is_info(&a.text)) {
        return true;
    }
    unknown(run, out)
}

/// `--version`, `--help`: runs nothing.
fn is_info(t: &str) -> bool {
    matches!(t, "--version" | "-V" | "--help" | "-h" | "-v")
}

/// `su -c CMD`, `script -c CMD`: read; without it they start a shell (unknown).
fn command_option(run: Run, args: &[Word], depth: usize, out: &mut Vec<Run>) -> bool {
    for (i, a) in args.iter().enumerate() {
        if let Some(cmd) = a.text.strip_prefix("--command=") {
            let w = Word {
                text: cmd.to_owned(),
                ..a.clone()
            };
            return command_string(Some(&w), depth, out);
        }
        if matches!(a.text.as_str(), "-c" | "--command" | "--session-command") {
            return command_string(args.get(i + 1), depth, out);
        }
    }
    unknown(run, out)
}

/// An interpreter running code from its line or its input is unknown by its
/// program but keeps its name; one running a script is judged by its name. An
/// option it does not know makes it unknown.
fn interpreter(mut run: Run, args: &[Word], out: &mut Vec<Run>) -> bool {
    let n = run.program.clone().unwrap_or_default();
    let written = run.text.split(' ').next().unwrap_or_default().to_owned();
    let opts = INTERPS
        .iter()
        .find(|i| i.names.iter().any(|p| versioned(&n, p)))
        .map_or(&OTHER, |i| &i.opts);
    if args.iter().any(|a| a.dynamic && a.text.starts_with('-')) {
        return unknown(run, out);
    }
    let Some((i, seen)) = scan(opts, args) else {
        return unknown(run, out);
    };
    let code = seen
        .last()
        .filter(|(o, _)| *o != "-m" && opts.ends.contains(o))
        .map(|(o, _)| *o)
        .or_else(|| {
            (n == "deno" && args.get(i).is_some_and(|a| a.text == "eval")).then_some("eval")
        });
    if let Some(o) = code {
        out.pop();
        let flag = args[..i.min(args.len())]
            .iter()
            .rev()
            .find(|a| a.text.starts_with(o) || a.text.starts_with('-') && a.text.ends_with(&o[1..]))
            .map_or(o, |a| a.text.split('=').next().unwrap_or(o));
        run.code = Some(format!("{written} {flag}"));
        out.push(run);
        return true;
    }
    if seen.last().is_some_and(|(o, _)| *o == "-m") {
        return true;
    }
    match args.get(i) {
        Some(a) if a.text != "-" => true,
        None if !args.is_empty() && args.iter().all(|a| is_info(&a.text)) => true,
        _ => unknown(run, out),
    }
}

/// awk's program is code: unknown if it can run commands or write files, or if
/// it comes from a file.
fn awk(run: Run, args: &[Word], out: &mut Vec<Run>) -> bool {
    let Some((i, seen)) = scan(&AWK, args) else {
        return unknown(run, out);
    };
    let mut programs: Vec<Option<&Word>> = Vec::new();
    for (o, v) in &seen {
        match *o {
            "-f" | "-E" | "-i" | "-l" | "--file" | "--exec" | "--include" | "--load" => {
                return unknown(run, out);
            }
            "-e" | "--source" => programs.push(*v),
            _ => {}
        }
    }
    if programs.is_empty() {
        programs.push(args.get(i));
    }
    let risky = programs.iter().any(|p| {
        p.is_none_or(|p| {
            p.dynamic
                || ["system", "|", ">", "getline", "@"]
                    .iter()
                    .any(|x| p.text.contains(x))
        })
    });
    !risky || unknown(run, out)
}

/// find: `-exec`-like actions run their command; `-delete` is also `rm -rf` on its
/// paths; `-delete`, `-fprint*`, `-fls` keep it from an allow.
fn find(mut run: Run, args: &[Word], depth: usize, out: &mut Vec<Run>) -> bool {
    let mut i = 0;
    while let Some(t) = args.get(i).map(|a| a.text.as_str()) {
        match t {
            "-H" | "-L" | "-P" => i += 1,
            "-D" => i += 2,
            _ if t.starts_with("-O") => i += 1,
            _ => break,
        }
    }
    let paths: Vec<&str> = args[i.min(args.len())..]
        .iter()
        .map(|a| a.text.as_str())
        .take_while(|t| !t.starts_with(['-', '(', '!', ')']))
        .collect();
    let paths = if paths.is_empty() {
        ".".to_owned()
    } else {
        paths.join(" ")
    };
    let mut plain = true;
    let mut nested = Vec::new();
    while let Some(a) = args.get(i) {
        match a.text.as_str() {
            "-delete" => {
                run.effect = true;
                run.alias = Some(format!("rm -rf {paths}"));
            }
            "-fprint" | "-fprint0" | "-fprintf" | "-fls" => run.effect = true,
            "-exec" | "-execdir" | "-ok" | "-okdir" => {
                let end = args[i + 1..]
                    .iter()
                    .position(|w| w.text == ";" || w.text == "+")
                    .map_or(args.len(), |e| i + 1 + e);
                nested.push(&args[i + 1..end]);
                i = end;
            }
            _ => {}
        }
        i += 1;
    }
    out.pop();
    out.push(run);
    for words in nested {
        plain &= resolve(words, depth + 1, false, out);
    }
    plain
}

/// xargs runs its command (echo by default) with more arguments from its input.
fn xargs(run: Run, args: &[Word], depth: usize, out: &mut Vec<Run>) -> bool {
    let Some((i, _)) = scan(&XARGS, args) else {
        return unknown(run, out);
    };
    let echo = [Word {
        text: "echo".into(),
        ..Word::default()
    }];
    let nested = match args.get(i..) {
        Some(n) if !n.is_empty() => n,
        _ => &echo,
    };
    resolve(nested, depth + 1, true, out)
}

/// watch runs its words as a command line (`-x`: as a command).
fn watch(run: Run, args: &[Word], depth: usize, out: &mut Vec<Run>) -> bool {
    let Some((i, seen)) = scan(&WATCH, args) else {
        return unknown(run, out);
    };
    let rest = args.get(i..).unwrap_or_default();
    if seen.iter().any(|(o, _)| matches!(*o, "-x" | "--exec")) {
        resolve(rest, depth + 1, false, out)
    } else {
        analyze_text(&join(rest), depth + 1, out)
    }
}
