//! Setup steps: shell commands run before a workflow starts, their output kept
//! for `${{ }}`.
//!
//! Each step runs as `sh -c` through [`os::process::supervise`]: its own
//! process group, stdin null, and on a timeout (or too much output) SIGTERM then
//! SIGKILL to the whole group; after every step the group is swept, so a
//! command's background children die with it. The command text is interpolated
//! as is (no shell quoting), as in the original, when params come from the lead;
//! params from a hook's payload are put in only when no shell would read them
//! ([`interpolate_shell`]).

use domain::workflow_yaml::{SetupStep, Vars, interpolate_shell};
use std::path::Path;
use std::time::Duration;
use tokio::process::Command;

/// Most stdout a step may print: an output is meant for a prompt, not a payload.
pub const MAX_SETUP_OUTPUT: usize = 1024 * 1024;

/// Runs the steps in order in `cwd`; each output goes into `vars` under its `as`.
pub async fn run_setup(steps: &[SetupStep], vars: &mut Vars, cwd: &Path) -> Result<(), String> {
    for (i, step) in steps.iter().enumerate() {
        let name = match &step.as_name {
            Some(a) => format!("setup step {} (as: {a})", i + 1),
            None => format!("setup step {}", i + 1),
        };
        let command = interpolate_shell(&step.shell, vars).map_err(|e| format!("{name}: {e}"))?;
        let out = run_step(&command, step.timeout, cwd)
            .await
            .map_err(|e| format!("{name} failed: `{}` {e}", shown(&step.shell)))?;
        if let Some(a) = &step.as_name {
            vars.set_output(a, out);
        }
    }
    Ok(())
}

/// The command as written (not interpolated: values may be secrets), shortened.
fn shown(shell: &str) -> String {
    let one_line = shell.split_whitespace().collect::<Vec<_>>().join(" ");
    if one_line.chars().count() > 200 {
        format!("{}…", one_line.chars().take(200).collect::<String>())
    } else {
        one_line
    }
}

/// Runs one command; its trimmed stdout, or why it failed (after the command).
async fn run_step(command: &str, timeout: Duration, cwd: &Path) -> Result<String, String> {
    let mut cmd = Command::new("sh");
    cmd.arg("-c").arg(command).current_dir(cwd);
    os::bounded::output(cmd, timeout, MAX_SETUP_OUTPUT)
        .await
        .map_err(|e| match e.strip_prefix("could not start `sh`") {
            Some(why) => format!("could not start `sh` in {}{why}", cwd.display()),
            None => e,
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn step(shell: &str, as_name: Option<&str>, timeout_ms: u64) -> SetupStep {
        SetupStep {
            shell: shell.into(),
            as_name: as_name.map(Into::into),
            timeout: Duration::from_millis(timeout_ms),
        }
    }

    fn vars(dir: &Path) -> Vars {
        Vars::new(
            "wf",
            "main",
            dir,
            BTreeMap::from([("pr".to_owned(), "42".to_owned())]),
        )
    }

    /// Live (not zombie) processes whose command line holds `needle`.
    fn running(needle: &str) -> Vec<u32> {
        let Ok(entries) = std::fs::read_dir("/proc") else {
            return vec![];
        };
        entries
            .flatten()
            .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
            .filter(|pid| {
                std::fs::read(format!("/proc/{pid}/cmdline"))
                    .map(|c| {
                        String::from_utf8_lossy(&c)
                            .replace('\0', " ")
                            .contains(needle)
                    })
                    .unwrap_or(false)
                    && os::process::proc_stat(*pid).is_some_and(|s| s.alive())
            })
            .collect()
    }

    async fn none_left(needle: &str) -> bool {
        for _ in 0..40 {
            if running(needle).is_empty() {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        false
    }

    #[tokio::test]
    async fn outputs_are_captured_trimmed_and_chained() {
        let dir = tempfile::tempdir().unwrap();
        let mut v = vars(dir.path());
        let steps = [
            step(
                "printf '  diff of %s \\n\\n' ${{ params.pr }}",
                Some("diff"),
                5000,
            ),
            step(
                "echo \"[${{ diff }}]\"; echo ignored >&2",
                Some("wrapped"),
                5000,
            ),
            step("pwd", Some("here"), 5000),
            step("true", None, 5000),
        ];
        run_setup(&steps, &mut v, dir.path()).await.unwrap();
        assert_eq!(v.output("diff"), Some("diff of 42"));
        assert_eq!(v.output("wrapped"), Some("[diff of 42]"));
        let here = std::fs::canonicalize(v.output("here").unwrap()).unwrap();
        assert_eq!(here, std::fs::canonicalize(dir.path()).unwrap());
    }

    #[tokio::test]
    async fn a_failing_step_is_named_with_its_stderr() {
        let dir = tempfile::tempdir().unwrap();
        let mut v = vars(dir.path());
        let steps = [
            step("echo ok", Some("first"), 5000),
            step("echo partial; echo boom >&2; exit 3", Some("diff"), 5000),
            step("echo never", Some("third"), 5000),
        ];
        let e = run_setup(&steps, &mut v, dir.path()).await.unwrap_err();
        assert_eq!(
            e,
            "setup step 2 (as: diff) failed: `echo partial; echo boom >&2; exit 3` exited with status 3: boom"
        );
        assert_eq!(v.output("third"), None);
        let e = run_setup(&[step("exit 1", None, 5000)], &mut v, dir.path())
            .await
            .unwrap_err();
        assert_eq!(e, "setup step 1 failed: `exit 1` exited with status 1");
        let e = run_setup(&[step("echo ${{ nope }}", None, 5000)], &mut v, dir.path())
            .await
            .unwrap_err();
        assert!(e.starts_with("setup step 1: unknown name `nope`"), "{e}");
        let gone = dir.path().join("gone");
        let e = run_setup(&[step("true", None, 5000)], &mut v, &gone)
            .await
            .unwrap_err();
        assert!(e.contains("could not start"), "{e}");
    }

    #[tokio::test]
    async fn a_timeout_kills_the_whole_group_quickly() {
        let dir = tempfile::tempdir().unwrap();
        let mut v = vars(dir.path());
        // A background child and a foreground one: both in the step's group.
        let steps = [step("sleep 7.3101 & sleep 7.3102; wait", Some("slow"), 300)];
        let started = std::time::Instant::now();
        let e = run_setup(&steps, &mut v, dir.path()).await.unwrap_err();
        assert!(
            started.elapsed() < Duration::from_secs(3),
            "{:?}",
            started.elapsed()
        );
        assert!(e.starts_with("setup step 1 (as: slow) failed: `sleep 7.3101 & sleep 7.3102; wait` timed out after 300ms"), "{e}");
        assert!(none_left("sleep 7.310").await, "a sleep outlived its step");
    }

    #[tokio::test]
    async fn background_children_of_a_finished_step_are_swept() {
        let dir = tempfile::tempdir().unwrap();
        let mut v = vars(dir.path());
        let steps = [step("sleep 7.3201 & echo started", Some("bg"), 5000)];
        run_setup(&steps, &mut v, dir.path()).await.unwrap();
        assert_eq!(v.output("bg"), Some("started"));
        assert!(
            none_left("sleep 7.320").await,
            "a background sleep outlived its step"
        );
    }

    #[tokio::test]
    async fn too_much_output_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let mut v = vars(dir.path());
        let steps = [step(
            "head -c 3000000 /dev/zero | tr '\\0' 'x'",
            Some("big"),
            10_000,
        )];
        let e = run_setup(&steps, &mut v, dir.path()).await.unwrap_err();
        assert!(
            e.contains("printed more than 1024 KiB") && e.contains("file"),
            "{e}"
        );
        let steps = [step("seq 1 300000", Some("many"), 10_000)];
        let e = run_setup(&steps, &mut v, dir.path()).await.unwrap_err();
        assert!(e.contains("printed more than"), "{e}");
    }
}
