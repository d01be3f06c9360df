//! The options of programs that run others: which take a value, and which end the
//! options (`-c CODE`). An option a table does not know makes the run unknown, so a
//! value it takes is never read as the program it runs.

use super::Word;

/// One program's options. Short ones may be bundled (`-fo FILE`, `-uNAME`); long
/// ones may carry `=VALUE`.
pub(super) struct Opts {
    /// Options taking no value (`-v`, `--verbose`); `-NUM` allows `-10`.
    pub flags: &'static [&'static str],
    /// Options taking a value (`-u NAME`, `-uNAME`, `--user NAME`, `--user=NAME`).
    pub takes: &'static [&'static str],
    /// Options taking a value after which no option follows (`-c CODE`).
    pub ends: &'static [&'static str],
    /// Short options whose value, if any, is attached (`-i{}`).
    pub optional: &'static [&'static str],
    /// An unknown option takes no value (awk: its program is judged anyway).
    pub lenient: bool,
}

pub(super) const fn opts(flags: &'static [&'static str], takes: &'static [&'static str]) -> Opts {
    Opts {
        flags,
        takes,
        ends: &[],
        optional: &[],
        lenient: false,
    }
}

/// What the options say: the index of the first operand and the options seen
/// (with the word holding the value of each that takes one: the next one, or the
/// option's own for `-uNAME`); None if one is unknown or dynamic.
pub(super) type Scan<'a> = Option<(usize, Vec<(&'static str, Option<&'a Word>)>)>;

pub(super) fn scan<'a>(o: &Opts, args: &'a [Word]) -> Scan<'a> {
    let find = |list: &[&'static str], t: &str| list.iter().copied().find(|x| *x == t);
    let mut seen = Vec::new();
    let mut i = 0;
    while let Some(a) = args.get(i) {
        let t = a.text.as_str();
        if t == "--" {
            return Some((i + 1, seen));
        }
        if !t.starts_with('-') || t == "-" {
            break;
        }
        if a.dynamic {
            return None;
        }
        let next = args.get(i + 1);
        // The whole word first (`-Command`, `--user`, `-10`).
        let name = t.split_once('=').map_or(t, |(n, _)| n);
        let long = t.starts_with("--") || t.len() == 2;
        let numeric = t[1..].chars().all(|c| c.is_ascii_digit()) && o.flags.contains(&"-NUM");
        if let Some(f) = find(o.flags, t).or(find(o.optional, t)) {
            seen.push((f, None));
            i += 1;
            continue;
        }
        if numeric {
            i += 1;
            continue;
        }
        if let Some(f) = find(o.takes, t).or(find(o.ends, t)) {
            seen.push((f, next));
            if find(o.ends, t).is_some() {
                return Some((i + 2, seen));
            }
            i += 2;
            continue;
        }
        if t.starts_with("--") && t.contains('=') {
            let known = find(o.takes, name).or(find(o.flags, name));
            if let Some(f) = known.or(find(o.ends, name)) {
                seen.push((f, Some(a)));
                if find(o.ends, name).is_some() {
                    return Some((i + 1, seen));
                }
                i += 1;
                continue;
            }
        }
        if long {
            if o.lenient {
                i += 1;
                continue;
            }
            return None;
        }
        // A bundle of short options: `-fo FILE`, `-uNAME`.
        let mut step = 1;
        for (k, c) in t.char_indices().skip(1) {
            let s = format!("-{c}");
            let rest = &t[k + c.len_utf8()..];
            if let Some(f) = find(o.optional, &s) {
                seen.push((f, Some(a)));
                break;
            }
            let end = find(o.ends, &s);
            if let Some(f) = find(o.takes, &s).or(end) {
                seen.push((f, if rest.is_empty() { next } else { Some(a) }));
                step = if rest.is_empty() { 2 } else { 1 };
                if end.is_some() {
                    return Some((i + step, seen));
                }
                break;
            }
            match find(o.flags, &s) {
                Some(f) => seen.push((f, None)),
                None if o.lenient => {}
                None => return None,
            }
        }
        i += step;
    }
    Some((i, seen))
}

pub(super) const INFO: &[&str] = &["--help", "--version"];

/// An interpreter: its options, and those whose value is code it runs.
pub(super) struct Interp {
    pub names: &'static [&'static str],
    pub opts: Opts,
}

const fn interp(
    names: &'static [&'static str],
    flags: &'static [&'static str],
    takes: &'static [&'static str],
    ends: &'static [&'static str],
) -> Interp {
    Interp {
        names,
        opts: Opts {
            flags,
            takes,
            ends,
            optional: &[],
            lenient: false,
        },
    }
}

/// Options whose value is code (or a module run by its name, `-m`).
pub(super) const CODE: &[&str] = &[
    "-c",
    "-e",
    "-E",
    "-r",
    "-R",
    "-B",
    "-F",
    "-p",
    "--eval",
    "--print",
    "-Command",
    "-command",
    "-EncodedCommand",
    "-ec",
];

pub(super) const INTERPS: &[Interp] = &[
    interp(
        &["python", "pypy"],
        &[
            "-b",
            "-bb",
            "-B",
            "-d",
            "-E",
            "-h",
            "-i",
            "-I",
            "-O",
            "-OO",
            "-P",
            "-q",
            "-s",
            "-S",
            "-u",
            "-v",
            "-V",
            "-x",
            "-?",
            "--version",
            "--help",
            "--help-all",
        ],
        &["-W", "-X", "--check-hash-based-pycs"],
        &["-c", "-m"],
    ),
    interp(
        &["perl"],
        &[
            "-a",
            "-c",
            "-n",
            "-p",
            "-s",
            "-S",
            "-t",
            "-T",
            "-u",
            "-U",
            "-w",
            "-W",
            "-X",
            "-v",
            "-V",
            "-h",
            "-l",
            "-0",
            "-i",
            "-C",
            "-d",
            "-D",
            "-x",
            "--version",
            "--help",
        ],
        &["-I", "-M", "-m"],
        &["-e", "-E"],
    ),
    interp(
        &["ruby", "irb"],
        &[
            "-a",
            "-c",
            "-d",
            "-l",
            "-n",
            "-p",
            "-s",
            "-S",
            "-v",
            "-w",
            "-W",
            "-y",
            "-h",
            "-U",
            "--version",
            "--help",
            "--verbose",
            "--disable-gems",
            "--jit",
            "--yjit",
        ],
        &["-C", "-E", "-I", "-r", "-F", "-K", "--encoding"],
        &["-e"],
    ),
    interp(
        &["node", "nodejs", "bun"],
        &[
            "-c",
            "--check",
            "-i",
            "--interactive",
            "-v",
            "--version",
            "-h",
            "--help",
            "--inspect",
            "--inspect-brk",
            "--enable-source-maps",
            "--experimental-vm-modules",
            "--no-warnings",
            "--trace-warnings",
            "--test",
            "--watch",
            "--expose-gc",
            "--preserve-symlinks",
            "--trace-uncaught",
            "--no-deprecation",
            "--throw-deprecation",
        ],
        &[
            "-r",
            "--require",
            "--import",
            "--loader",
            "--experimental-loader",
            "--input-type",
            "--inspect-port",
            "-C",
            "--conditions",
            "--title",
            "--env-file",
            "--max-old-space-size",
            "--stack-size",
        ],
        &["-e", "--eval", "-p", "--print"],
    ),
    interp(
        &["php"],
        &[
            "-h",
            "-i",
            "-l",
            "-m",
            "-n",
            "-q",
            "-s",
            "-v",
            "-w",
            "-e",
            "-H",
            "--version",
            "--help",
        ],
        &["-c", "-d", "-z", "-t"],
        &["-r", "-R", "-B", "-E", "-F", "-f"],
    ),
    interp(
        &["lua", "luajit"],
        &["-i", "-v", "-E", "-W"],
        &["-l"],
        &["-e"],
    ),
];

/// Any other interpreter: only its code options and `--version`/`--help` are known.
pub(super) const OTHER: Opts = Opts {
    flags: INFO,
    takes: &[],
    ends: CODE,
    optional: &[],
    lenient: false,
};

/// awk: `-f`/`-E`/`-i`/`-l` load code from a file (unknown); `-e`/`--source` are code.
pub(super) const AWK: Opts = Opts {
    flags: &[],
    takes: &[
        "-F",
        "-v",
        "-f",
        "-E",
        "-i",
        "-l",
        "-e",
        "--field-separator",
        "--assign",
        "--file",
        "--exec",
        "--include",
        "--load",
        "--source",
    ],
    ends: &[],
    optional: &[],
    lenient: true,
};

pub(super) const XARGS: Opts = Opts {
    flags: &[
        "-0",
        "-o",
        "-p",
        "-r",
        "-t",
        "-x",
        "--null",
        "--interactive",
        "--no-run-if-empty",
        "--verbose",
        "--exit",
        "--open-tty",
        "--show-limits",
        "--help",
        "--version",
        "--replace",
        "--eof",
        "--max-lines",
    ],
    takes: &[
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
        "--max-args",
        "--max-procs",
        "--max-chars",
        "--process-slot-var",
    ],
    ends: &[],
    optional: &["-i", "-e", "-l"],
    lenient: false,
};

pub(super) const WATCH: Opts = Opts {
    flags: &[
        "-b",
        "-c",
        "-C",
        "-d",
        "-e",
        "-f",
        "-g",
        "-p",
        "-r",
        "-t",
        "-w",
        "-x",
        "-h",
        "-v",
        "--beep",
        "--color",
        "--no-color",
        "--differences",
        "--errexit",
        "--chgexit",
        "--precise",
        "--no-title",
        "--no-wrap",
        "--exec",
        "--no-rerun",
        "--help",
        "--version",
    ],
    takes: &["-n", "--interval", "-q", "--equexit"],
    ends: &[],
    optional: &[],
    lenient: false,
};
