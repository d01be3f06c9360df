//! What a command line runs, and whether a command pattern covers it (pure). Every
//! place that judges a shell command (a profile's `shell:<glob>`, a contract's
//! `match` on `tool: shell`) asks [`deny_matches`] or [`allow_matches`].
//!
//! A line is read as the shell reads it ([`parse`]), then each simple command is
//! resolved to the programs it runs ([`Run`]):
//!
//! - the program by name as well as as written: `/bin/rm`, `\rm`, `'rm'`, `"rm"` are `rm`;
//! - wrappers are unwrapped and both the wrapper and what it runs count: `command`,
//!   `builtin`, `exec`, `env` (options, `VAR=x`), `nice`, `nohup`, `setsid`, `stdbuf`,
//!   `timeout`, `sudo`, `doas`, `pkexec`, `chroot`, `ionice`, `taskset`, `chrt`,
//!   `unshare`, `setpriv`, `eatmydata`, `time`, `strace`, `ltrace`, `nocache`,
//!   `unbuffer`, `fakeroot`, `busybox`, `toybox`, `flock`, `watch`, `xargs` (its
//!   command gets more arguments from input), `find -exec/-execdir/-ok/-okdir`;
//!   their options are read as each program reads them (`options.rs`, `wrappers.rs`:
//!   bundled, attached or separate values), and an option their table does not
//!   know makes the run unknown;
//! - `coproc CMD` runs CMD; a function's body (`function f { …; }`, `f() { …; }`)
//!   is read as commands; `NAME=VALUE` before a program is an assignment when its
//!   name is unquoted, whatever the value's quoting;
//! - command strings are read as command lines: `sh -c`, `bash -c` (any shell),
//!   `su -c`, `flock -c`, `script -c`, `watch`, `trap`, `eval` of literal words;
//! - programs that delete by other means are also seen as `rm`: `unlink x`,
//!   `shred x`, `rmdir x` as `rm x`, `find P… -delete` as `rm -rf P…`.
//!
//! What the line does not show is unknown: a program that is a variable, a
//! substitution, a glob or `{}`; a shell reading a script or its input; `source`
//! and `.`; `eval` of anything but literal words; `alias` definitions; awk
//! programs that run commands or write (`system`, `|`, `>`) or come from a file;
//! an interpreter (python, perl, ruby, node, php, …) running code from its line
//! (`-c`, `-e`, `--eval=`, `php -R`, …) or from its input, or given an option its
//! table does not know; `parallel`, `expect`; arithmetic (`((…))`, `$((…))`,
//! `$[…]`, `let`, `[[ … -eq … ]]`) naming anything but numbers, since a variable's
//! value is evaluated and an array subscript in it runs its substitutions; an
//! unquoted here-document body holding a substitution. A line that cannot be read
//! (including a `case` inside `$(…)`) is unknown as a whole.
//!
//! **Deny** (fail closed): a pattern matches a line if it matches any run, by its
//! text as written, by name, or as `rm`; a run with an argument only known when it
//! runs matches if the pattern's first word matches its program; an unknown run
//! or code matches every pattern.
//!
//! **Allow**: a line is covered only if every run matches an allowed pattern by its
//! text as written, and the line has no redirection or substitution, no argument
//! only known when it runs, nothing unknown, and nothing that deletes or writes by
//! an option (`find -delete`, `-fprint`, `-fls`). Code on an interpreter's line is
//! covered only by a pattern that spells out its option (`python3 -c*`).
//!
//! A program that runs other programs in its own way (a script, `make`, `npm run`,
//! git aliases and hooks, `sed`'s `e` command) is judged by its own name only.

mod options;
mod parse;
mod programs;
mod wrappers;

pub use parse::{Line, Simple, Word, parse};

use super::glob;

/// One program a command line would run.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Run {
    /// Its name (the last part of its path); None when the line does not say.
    pub program: Option<String>,
    /// Its words, quotes removed, joined by spaces (the program as written).
    pub text: String,
    /// The same, the program by name (`/bin/rm x` → `rm x`).
    pub named: String,
    /// Some argument is only known when it runs.
    pub dynamic: bool,
    /// More arguments come from input (xargs).
    pub tail: bool,
    /// What deny patterns also see it as (`unlink x` → `rm x`).
    pub alias: Option<String>,
    /// It deletes or writes by an option (find -delete, -fprint).
    pub effect: bool,
    /// It runs code from its line (python -c): what an allow pattern must spell out.
    pub code: Option<String>,
}

impl Run {
    fn unknown(text: String) -> Self {
        Run {
            text,
            ..Run::default()
        }
    }
}

/// The programs a line runs, and whether anything in it keeps it from an allow.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Analysis {
    pub runs: Vec<Run>,
    /// Redirections or substitutions (or the line could not be read).
    pub plain: bool,
}

/// How deep command strings and wrappers may nest before a run counts as unknown.
const MAX_NEST: usize = 8;
/// Stands for the arguments xargs adds.
const TAIL: &str = " \u{0}";

/// Resolves a command line to the programs it runs.
pub fn analyze(command: &str) -> Analysis {
    let mut runs = Vec::new();
    let line = parse(command);
    let plain = analyze_line(&line, 0, &mut runs);
    Analysis { runs, plain }
}

/// Adds the runs of `line`; false if it is not plain.
fn analyze_line(line: &Line, depth: usize, out: &mut Vec<Run>) -> bool {
    if line.broken {
        out.push(Run::unknown("(a command line that cannot be read)".into()));
        return false;
    }
    let mut plain = !line.substituted;
    for c in &line.commands {
        plain &= !c.redirected;
        plain &= resolve(&c.words, depth, false, out);
    }
    plain
}

/// Reads `text` as a command line run by another (`sh -c`, `eval`, …).
fn analyze_text(text: &str, depth: usize, out: &mut Vec<Run>) -> bool {
    if depth > MAX_NEST {
        out.push(Run::unknown(text.to_owned()));
        return false;
    }
    analyze_line(&parse(text), depth, out)
}

const KEYWORDS: &[&str] = &[
    "if", "then", "else", "elif", "fi", "do", "done", "while", "until", "!", "{", "}", "[[", "]]",
];
/// Clauses whose words are not a command (their substitutions are read anyway).
const CLAUSES: &[&str] = &["for", "case", "select", "esac", "in"];

/// `NAME=VALUE`, as a program reads it (`env`, `sudo`: quotes are gone).
fn is_assignment(w: &Word) -> bool {
    let Some((name, _)) = w.text.split_once('=') else {
        return false;
    };
    !name.is_empty()
        && !name.starts_with(|c: char| c.is_ascii_digit())
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// `NAME=VALUE` as the shell reads it: the name and `=` unquoted (`X='' rm`).
fn shell_assignment(w: &Word) -> bool {
    is_assignment(w)
        && w.quote_at
            .is_none_or(|q| w.text.find('=').is_some_and(|e| e < q))
}

/// Arithmetic may evaluate a variable's value, and an array subscript there runs
/// its substitutions: `let` and `[[ … -eq … ]]` on anything but numbers are unknown.
fn unknown_arithmetic(words: &[Word]) -> bool {
    let plain = |w: &Word| !w.dynamic && !w.quoted && parse::plain_arithmetic(&w.text);
    let bare = |w: &Word, t: &str| !w.quoted && !w.dynamic && w.text == t;
    if let Some(p) = command_words(words).and_then(|w| w.first())
        && bare(p, "let")
    {
        let args = command_words(words).unwrap_or_default();
        return !args[1..].iter().all(plain);
    }
    const OPS: &[&str] = &["-eq", "-ne", "-lt", "-le", "-gt", "-ge"];
    words.iter().any(|w| bare(w, "[["))
        && words.iter().enumerate().any(|(i, w)| {
            OPS.iter().any(|o| bare(w, o))
                && !(i > 0 && plain(&words[i - 1]) && words.get(i + 1).is_some_and(plain))
        })
}

/// The words from the program on: keywords and assignments before it skipped;
/// None for a clause that is not a command.
fn command_words(words: &[Word]) -> Option<&[Word]> {
    let mut i = 0;
    while let Some(w) = words.get(i) {
        let bare = !w.quoted && !w.dynamic;
        if bare && CLAUSES.contains(&w.text.as_str()) {
            return None;
        }
        // `function NAME { BODY; }`: the body runs (when it is called).
        if bare && w.text == "function" {
            i += 2;
            continue;
        }
        // `coproc CMD`, `coproc NAME { BODY; }`.
        if bare && w.text == "coproc" {
            let named = words.get(i + 2).is_some_and(|b| !b.quoted && b.text == "{");
            i += if named { 2 } else { 1 };
            continue;
        }
        if !(bare && KEYWORDS.contains(&w.text.as_str()) || shell_assignment(w)) {
            break;
        }
        i += 1;
    }
    Some(words.get(i..).unwrap_or_default())
}

fn basename(s: &str) -> &str {
    s.rsplit('/').next().unwrap_or(s)
}

fn join(words: &[Word]) -> String {
    words
        .iter()
        .map(|w| w.text.as_str())
        .collect::<Vec<_>>()
        .join(" ")
}

/// Adds the runs of one simple command (and of what it runs); false if something
/// in it is not plain. `tail`: more arguments come from input.
fn resolve(words: &[Word], depth: usize, tail: bool, out: &mut Vec<Run>) -> bool {
    if unknown_arithmetic(words) {
        out.push(Run::unknown(join(words)));
        return true;
    }
    let Some(words) = command_words(words) else {
        return true;
    };
    let Some(first) = words.first() else {
        return true;
    };
    if depth > MAX_NEST || first.dynamic || first.text == "{}" {
        out.push(Run::unknown(join(words)));
        return true;
    }
    let name = basename(&first.text).to_owned();
    let rest = join(&words[1..]);
    let sep = if rest.is_empty() { "" } else { " " };
    let run = Run {
        program: Some(name.clone()),
        text: join(words),
        named: format!("{name}{sep}{rest}"),
        dynamic: words[1..].iter().any(|w| w.dynamic),
        tail,
        ..Run::default()
    };
    programs::special(run, &words[1..], depth, out)
}

/// Whether a deny `pattern` covers `command` (see the module docs).
pub fn deny_matches(pattern: &str, command: &str) -> bool {
    analyze(command).runs.iter().any(|r| denies(pattern, r))
}

/// Whether `command` is covered by the allowed `patterns` (see the module docs).
pub fn allow_matches(patterns: &[&str], command: &str) -> bool {
    let a = analyze(command);
    a.plain && !a.runs.is_empty() && a.runs.iter().all(|r| allows(patterns, r))
}

fn denies(p: &str, r: &Run) -> bool {
    let Some(program) = &r.program else {
        return true;
    };
    if r.code.is_some() {
        return true;
    }
    let head = p.split(' ').next().unwrap_or(p);
    let written = r.text.split(' ').next().unwrap_or_default();
    let texts = [Some(&r.text), Some(&r.named), r.alias.as_ref()];
    texts.into_iter().flatten().any(|t| glob(p, t))
        || (r.dynamic || r.tail)
            && (glob(head, program)
                || glob(head, written)
                || r.alias.as_ref().is_some_and(|_| glob(head, "rm")))
}

fn allows(patterns: &[&str], r: &Run) -> bool {
    if r.program.is_none() || r.effect || r.dynamic {
        return false;
    }
    let text = if r.tail {
        format!("{}{TAIL}", r.text)
    } else {
        r.text.clone()
    };
    patterns.iter().any(|p| {
        glob(p, &text)
            && r.code
                .as_ref()
                .is_none_or(|c| p.split('*').next().unwrap_or(p).starts_with(c.as_str()))
    })
}

#[cfg(test)]
mod tests;
