//! Where a supervised process stands among the caller's: a group of its own, a
//! session of its own, or the caller's group.

use tokio::process::Command;

/// Whether the supervised process leads its own process group.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Group {
    /// A new group: signals and the final sweep reach every descendant.
    Own,
    /// A new session, so a new group too whose id is the process's (signals and
    /// the sweep as [`Group::Own`]), without a controlling terminal: no descendant
    /// opens `/dev/tty`, nor types into the user's shell with TIOCSTI (which needs
    /// the caller's controlling terminal). The kernel runs each worker like this.
    Session,
    /// Stay in the caller's group, so that whoever supervises the caller reaches this
    /// process too; signals go to the process alone. The worker runs a CLI like this,
    /// and the kernel's sweep of the worker's group takes the CLI's descendants.
    Inherit,
}

impl Group {
    /// Sets up `cmd` to start where this says.
    pub(crate) fn set(self, cmd: &mut Command) {
        match self {
            Group::Own => {
                cmd.process_group(0);
            }
            // setsid(2) alone: it fails in a process that leads a group already,
            // as process_group(0) would have made the child before this runs.
            // SAFETY: setsid is async-signal-safe and touches no memory.
            Group::Session => unsafe {
                cmd.pre_exec(|| nix::unistd::setsid().map(drop).map_err(Into::into));
            },
            Group::Inherit => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::process::{Held, Limits, supervise};
    use std::time::Duration;
    use tokio_util::sync::CancellationToken;

    /// A process started in a group or a session of its own leads it (so that
    /// killpg of its pid reaches its descendants); one left in the caller's
    /// does not.
    #[tokio::test]
    async fn a_process_leads_the_group_or_session_it_was_given() {
        let check = |group: Group, expect: &'static str| async move {
            let mut cmd = Command::new("sh");
            // pid, then its group and session (fields 5 and 6 of its stat).
            let script = "s=$(cut -d' ' -f5,6 /proc/$$/stat); set -- $s; \
                          [ $1 = $$ ] && g=leads || g=joins; [ $2 = $$ ] && s=leads || s=joins; \
                          echo group $g session $s";
            cmd.args(["-c", script]);
            let limits = Limits {
                startup: Duration::from_secs(20),
                idle: Duration::from_secs(20),
                total: Duration::from_secs(30),
                grace: Duration::from_secs(1),
                held: Held::default(),
            };
            let mut out = Vec::new();
            let stop = CancellationToken::new();
            supervise(cmd, limits, group, stop, |_| {}, |l| out.push(l))
                .await
                .unwrap();
            assert_eq!(out, [expect], "{group:?}");
        };
        check(Group::Own, "group leads session joins").await;
        check(Group::Session, "group leads session leads").await;
        check(Group::Inherit, "group joins session joins").await;
    }
}
