//! The programs that run the command after their options (see the parent module's
//! docs), and their options.

use super::options::{INFO, Opts, opts};

/// A program that runs the command after its options: its options, the words
/// between them and the command, and whether `NAME=VALUE` words may come first.
pub(super) struct Wrap {
    pub names: &'static [&'static str],
    pub opts: Opts,
    pub skip: usize,
    pub assigns: bool,
}

const fn wrap(names: &'static [&'static str], opts: Opts) -> Wrap {
    Wrap {
        names,
        opts,
        skip: 0,
        assigns: false,
    }
}

pub(super) const WRAPPERS: &[Wrap] = &[
    wrap(
        &[
            "nohup",
            "nocache",
            "busybox",
            "toybox",
            "builtin",
            "eatmydata",
        ],
        opts(INFO, &[]),
    ),
    wrap(&["command"], opts(&["-p", "-v", "-V"], &[])),
    wrap(&["exec"], opts(&["-c", "-l"], &["-a"])),
    wrap(&["unbuffer"], opts(&["-p"], &[])),
    wrap(
        &["setsid"],
        opts(&["-c", "-f", "-w", "--ctty", "--fork", "--wait"], &[]),
    ),
    wrap(
        &["fakeroot"],
        opts(
            &["-u", "--unknown-is-real", "-h", "-v"],
            &["-l", "--lib", "--faked", "-s", "-i", "-b"],
        ),
    ),
    wrap(
        &["unshare"],
        opts(
            &[
                "-m",
                "-u",
                "-i",
                "-n",
                "-p",
                "-U",
                "-C",
                "-T",
                "-f",
                "-r",
                "-c",
                "--mount",
                "--uts",
                "--ipc",
                "--net",
                "--pid",
                "--user",
                "--cgroup",
                "--time",
                "--fork",
                "--map-root-user",
                "--map-current-user",
                "--kill-child",
                "--mount-proc",
                "--keep-caps",
            ],
            &[
                "-w",
                "--wd",
                "-R",
                "--root",
                "-S",
                "--setuid",
                "-G",
                "--setgid",
                "-l",
                "--load-interp",
                "--propagation",
                "--setgroups",
                "--map-user",
                "--map-group",
                "--map-users",
                "--map-groups",
                "--monotonic",
                "--boottime",
            ],
        ),
    ),
    wrap(
        &["setpriv"],
        opts(
            &[
                "-d",
                "--dump",
                "--nnp",
                "--no-new-privs",
                "--clear-groups",
                "--keep-groups",
                "--init-groups",
                "--reset-env",
            ],
            &[
                "--inh-caps",
                "--ambient-caps",
                "--bounding-set",
                "--ruid",
                "--euid",
                "--rgid",
                "--egid",
                "--reuid",
                "--regid",
                "--groups",
                "--securebits",
                "--pdeathsig",
                "--selinux-label",
                "--apparmor-profile",
                "--landlock-access",
                "--landlock-rule",
            ],
        ),
    ),
    wrap(&["nice"], opts(&["-NUM"], &["-n", "--adjustment"])),
    wrap(
        &["stdbuf"],
        opts(&[], &["-i", "-o", "-e", "--input", "--output", "--error"]),
    ),
    wrap(
        &["ionice"],
        opts(
            &["-t", "--ignore"],
            &["-c", "-n", "-p", "-P", "-u", "--class", "--classdata"],
        ),
    ),
    wrap(
        &["time"],
        opts(
            &[
                "-p",
                "-v",
                "-a",
                "-q",
                "--portability",
                "--verbose",
                "--append",
                "--quiet",
            ],
            &["-o", "-f", "--output", "--format"],
        ),
    ),
    wrap(
        &["strace"],
        opts(
            &[
                "-f", "-F", "-c", "-C", "-d", "-D", "-h", "-i", "-k", "-n", "-q", "-r", "-t", "-T",
                "-v", "-V", "-w", "-x", "-y", "-z", "-Z", "-A",
            ],
            &[
                "-o", "-e", "-p", "-s", "-u", "-E", "-a", "-b", "-I", "-O", "-S", "-P", "-X", "-U",
            ],
        ),
    ),
    wrap(
        &["ltrace"],
        opts(
            &[
                "-f", "-c", "-C", "-i", "-r", "-S", "-t", "-T", "-b", "-h", "-V",
            ],
            &[
                "-o", "-e", "-p", "-s", "-u", "-a", "-n", "-A", "-D", "-F", "-l", "-x", "-L",
            ],
        ),
    ),
    Wrap {
        skip: 1,
        ..wrap(
            &["timeout"],
            opts(
                &["-v", "--verbose", "--preserve-status", "--foreground"],
                &["-s", "-k", "--signal", "--kill-after"],
            ),
        )
    },
    Wrap {
        skip: 1,
        ..wrap(
            &["chroot"],
            opts(&["--skip-chdir"], &["--userspec", "--groups"]),
        )
    },
    Wrap {
        skip: 1,
        ..wrap(
            &["taskset"],
            opts(&["-a", "-c", "--all-tasks", "--cpu-list"], &[]),
        )
    },
    Wrap {
        skip: 1,
        ..wrap(
            &["chrt"],
            opts(
                &[
                    "-a",
                    "-b",
                    "-d",
                    "-e",
                    "-f",
                    "-i",
                    "-o",
                    "-r",
                    "-R",
                    "-v",
                    "--all-tasks",
                ],
                &[
                    "-T",
                    "-P",
                    "-D",
                    "--sched-runtime",
                    "--sched-period",
                    "--sched-deadline",
                ],
            ),
        )
    },
    Wrap {
        skip: 1,
        ..wrap(
            &["flock"],
            opts(
                &[
                    "-s",
                    "-x",
                    "-e",
                    "-u",
                    "-n",
                    "-o",
                    "-F",
                    "--shared",
                    "--exclusive",
                    "--unlock",
                    "--nonblock",
                    "--nb",
                    "--close",
                    "--no-fork",
                    "--verbose",
                ],
                &["-w", "-E", "--wait", "--timeout", "--conflict-exit-code"],
            ),
        )
    },
    Wrap {
        assigns: true,
        ..wrap(
            &["env"],
            opts(
                &[
                    "-i",
                    "-0",
                    "-v",
                    "--ignore-environment",
                    "--null",
                    "--debug",
                    "--default-signal",
                    "--ignore-signal",
                    "--block-signal",
                    "--list-signal-handling",
                ],
                &["-u", "-C", "--unset", "--chdir"],
            ),
        )
    },
    Wrap {
        assigns: true,
        ..wrap(
            &["sudo"],
            opts(
                &[
                    "-A",
                    "-b",
                    "-E",
                    "-H",
                    "-i",
                    "-K",
                    "-k",
                    "-n",
                    "-P",
                    "-S",
                    "-s",
                    "-B",
                    "-N",
                    "--askpass",
                    "--background",
                    "--preserve-env",
                    "--set-home",
                    "--login",
                    "--reset-timestamp",
                    "--non-interactive",
                    "--preserve-groups",
                    "--stdin",
                    "--shell",
                    "--bell",
                ],
                &[
                    "-u",
                    "-g",
                    "-p",
                    "-C",
                    "-D",
                    "-r",
                    "-t",
                    "-T",
                    "-U",
                    "-R",
                    "-c",
                    "-h",
                    "--user",
                    "--group",
                    "--host",
                    "--prompt",
                    "--chdir",
                    "--role",
                    "--type",
                    "--close-from",
                    "--command-timeout",
                    "--other-user",
                    "--chroot",
                ],
            ),
        )
    },
    wrap(&["doas"], opts(&["-n", "-s"], &["-u", "-C"])),
    wrap(
        &["pkexec"],
        opts(&["--disable-internal-agent", "--keep-cwd"], &["--user"]),
    ),
    Wrap {
        assigns: true,
        ..wrap(
            &["run0"],
            opts(
                &["--no-ask-password", "--background"],
                &[
                    "-u",
                    "-g",
                    "-D",
                    "--user",
                    "--group",
                    "--chdir",
                    "--setenv",
                    "--unit",
                    "--property",
                    "--description",
                    "--slice",
                    "--nice",
                    "--machine",
                ],
            ),
        )
    },
];
