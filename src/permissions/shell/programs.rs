//! What particular programs run besides themselves (see the parent module's docs).
//! Each function adds the runs of one command and returns whether it is plain.

use super::{Run, Word, analyze_text, is_assignment, join, resolve};

/// A program that runs the command after its options: the options that take a
/// value, the words between its options and the command, and whether `NAME=VALUE`
/// words may come first.
struct Wrap {
    names: &'static [&'static str],
    takes: &'static [&'static str],
    skip: usize,
    assigns: bool,
}

const fn wrap(names: &'static [&'static str], takes: &'static [&'static str]) -> Wrap {
    Wrap {
        names,
        takes,
        skip: 0,
        assigns: false,
    }
}

const WRAPPERS: &[Wrap] = &[
    wrap(
        &[
            "command", "builtin", "nohup", "setsid", "nocache", "unbuffer", "fakeroot", "busybox",
            "toybox", "unshare", "exec",
        ],
        &["-a"],
    ),
    wrap(&["nice"], &["-n", "--adjustment"]),
    wrap(
        &["stdbuf"],
        &["-i", "-o", "-e", "--input", "--output", "--error"],
    ),
    wrap(
        &["ionice"],
        &["-c", "-n", "-p", "-P", "-u", "--class", "--classdata"],
    ),
    wrap(&["time"], &["-o", "-f", "--output", "--format"]),
    wrap(
        &["strace", "ltrace"],
        &["-o", "-e", "-p", "-s", "-u", "-E", "-a", "-n"],
    ),
    Wrap {
        skip: 1,
        ..wrap(&["timeout"], &["-s", "-k", "--signal", "--kill-after"])
    },
    Wrap {
        skip: 1,
        ..wrap(&["chroot"], &["--userspec", "--groups"])
    },
    Wrap {
        skip: 1,
        ..wrap(&["taskset", "chrt", "flock"], &["-w", "-E", "--timeout"])
    },
    Wrap {
        assigns: true,
        ..wrap(&["env"], &["-u", "-C", "--unset", "--chdir"])
    },
    Wrap {
        assigns: true,
        ..wrap(
            &["sudo", "doas", "pkexec", "run0"],
            &[
                "-u", "-g", "-h", "-p", "-C", "-D", "-r", "-t", "-T", "-U", "--user", "--group",
                "--host", "--prompt", "--chdir", "--role", "--type",
            ],
        )
    },
];

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
const CODE_FLAGS: &[&str] = &[
    "-c",
    "-e",
    "-E",
    "-r",
    "-p",
    "--eval",
    "--print",
    "-Command",
    "-command",
    "-EncodedCommand",
    "-ec",
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
        "xargs" => xargs(args, depth, out),
        "watch" => watch(args, depth, out),
        _ => unknown(run, out),
    }
}

fn is_interpreter(n: &str) -> bool {
    INTERPRETERS.iter().any(|i| {
        n.strip_prefix(i)
            .is_some_and(|v| v.chars().all(|c| c.is_ascii_digit() || c == '.'))
    })
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
    let c = args
        .iter()
        .position(|a| a.text == "-c" || a.text == "--command");
    if let (Some("flock"), Some(c)) = (run.program.as_deref(), c) {
        out.push(run);
        return command_string(args.get(c + 1), depth, out);
    }
    let mut i = 0;
    while let Some(a) = args.get(i) {
        let t = a.text.as_str();
        let program = run.program.as_deref();
        if a.dynamic || (program == Some("env") && (t.starts_with("-S") || t.starts_with("--s"))) {
            return unknown(run, out);
        }
        if program == Some("command") && (t == "-v" || t == "-V") {
            out.push(run);
            return true;
        }
        if t == "--" {
            i += 1;
            break;
        }
        if !t.starts_with('-') || t == "-" {
            break;
        }
        i += if w.takes.contains(&t) { 2 } else { 1 };
    }
    while w.assigns && args.get(i).is_some_and(is_assignment) {
        i += 1;
    }
    i += w.skip;
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
/// program but keeps its name; one running a script is judged by its name.
fn interpreter(mut run: Run, args: &[Word], out: &mut Vec<Run>) -> bool {
    let n = run.program.clone().unwrap_or_default();
    let written = run.text.split(' ').next().unwrap_or_default().to_owned();
    let python = n.starts_with("python") || n.starts_with("pypy");
    let mut i = 0;
    while let Some(a) = args.get(i) {
        let t = a.text.as_str();
        if a.dynamic {
            return unknown(run, out);
        }
        let bundle = t
            .strip_prefix('-')
            .filter(|b| b.len() > 1 && b.chars().all(|c| c.is_ascii_alphabetic()));
        let code = CODE_FLAGS.contains(&t)
            || bundle.is_some_and(|b| b.contains(if python { 'c' } else { 'e' }))
            || (n == "deno" && t == "eval");
        if code {
            out.pop();
            run.code = Some(format!("{written} {t}"));
            out.push(run);
            return true;
        }
        if !t.starts_with('-') || t == "-m" || t == "-" {
            return t != "-" || unknown(run, out);
        }
        i += if matches!(t, "-W" | "-X" | "--require") {
            2
        } else {
            1
        };
    }
    if !args.is_empty() && args.iter().all(|a| is_info(&a.text)) {
        return true;
    }
    unknown(run, out)
}

/// awk's program is code: unknown if it can run commands or write files.
fn awk(run: Run, args: &[Word], out: &mut Vec<Run>) -> bool {
    let mut i = 0;
    while let Some(a) = args.get(i) {
        let t = a.text.as_str();
        if t == "-f" || t.starts_with("--file") || (t.starts_with("-f") && t.len() > 2) {
            return true;
        }
        if !t.starts_with('-') || t == "--" {
            let prog = if t == "--" { args.get(i + 1) } else { Some(a) };
            let risky = prog.is_none_or(|p| {
                p.dynamic
                    || ["system", "|", ">", "getline"]
                        .iter()
                        .any(|x| p.text.contains(x))
            });
            return !risky || unknown(run, out);
        }
        i += if matches!(t, "-F" | "-v") { 2 } else { 1 };
    }
    unknown(run, out)
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
fn xargs(args: &[Word], depth: usize, out: &mut Vec<Run>) -> bool {
    const TAKES: &[&str] = &[
        "-a",
        "-d",
        "-E",
        "-I",
        "-L",
        "-n",
        "-P",
        "-s",
        "--arg-file",
        "--delimiter",
        "--eof",
        "--max-lines",
        "--max-args",
        "--max-procs",
        "--max-chars",
        "--process-slot-var",
    ];
    let mut i = 0;
    while let Some(t) = args.get(i).map(|a| a.text.as_str()) {
        if t == "--" {
            i += 1;
            break;
        }
        if !t.starts_with('-') {
            break;
        }
        i += if TAKES.contains(&t) { 2 } else { 1 };
    }
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
fn watch(args: &[Word], depth: usize, out: &mut Vec<Run>) -> bool {
    let mut i = 0;
    let mut exec = false;
    while let Some(t) = args.get(i).map(|a| a.text.as_str()) {
        if !t.starts_with('-') {
            break;
        }
        exec |= t == "-x" || t == "--exec";
        i += if matches!(t, "-n" | "--interval") {
            2
        } else {
            1
        };
    }
    let rest = args.get(i..).unwrap_or_default();
    if exec {
        resolve(rest, depth + 1, false, out)
    } else {
        analyze_text(&join(rest), depth + 1, out)
    }
}
