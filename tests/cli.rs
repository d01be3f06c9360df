//! The command line: `--help` and `--version` answer on stdout with exit 0 (so
//! `agent-worker --help | less` works); a bad argument is said on stderr with
//! exit 2, and nothing reaches stdout.

use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_agent-worker");

fn run(args: &[&str]) -> (Option<i32>, String, String) {
    let out = Command::new(BIN)
        .args(args)
        .env_remove("AGENT_WORKER_FOREGROUND")
        .output()
        .unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn help_and_version_answer_on_stdout() {
    for flag in ["--help", "-h"] {
        let (code, out, err) = run(&[flag]);
        assert_eq!(code, Some(0), "{flag}: {err}");
        assert!(
            out.contains("usage:") && out.contains("--token-env"),
            "{out}"
        );
        assert_eq!(err, "", "{flag}");
    }
    let (code, out, err) = run(&["--version"]);
    assert_eq!(code, Some(0));
    assert_eq!(out, format!("agent-worker {}\n", env!("CARGO_PKG_VERSION")));
    assert_eq!(err, "");
}

#[test]
fn errors_stay_on_stderr() {
    for args in [&["--bogus"][..], &["--http", "0.0.0.0:1"], &["--token-env"]] {
        let (code, out, err) = run(args);
        assert_eq!(code, Some(2), "{args:?}");
        assert_eq!(out, "", "{args:?}");
        assert!(err.starts_with("agent-worker: "), "{args:?}: {err}");
    }
}
