//! One run, from spawn to settlement: the worker supervised under the process
//! limits, its report lines folded into the run (progress, usage, session, the
//! groups it started, what its permissions refused), then the single transaction
//! that closes the run, and the scheduler told what it means.

use super::{Spec, Workers};
use crate::events::Event;
use crate::runtime::runs::{self, RunEnd};
use domain::protocol::{ErrorClass, Outcome, Report};
use os::process::{self, Ended};
use std::path::Path;
use std::sync::Arc;
use tokio::sync::{broadcast, watch};
use tokio_util::sync::CancellationToken;

impl Workers {
    pub(super) async fn supervise_run(
        self: Arc<Self>,
        spec: Spec,
        run_id: String,
        cmd: os::process::Launch,
        stop: CancellationToken,
        progress: broadcast::Sender<String>,
        done: watch::Sender<bool>,
    ) {
        let mut limits = self.limits.clone();
        limits.held = process::Held::Flag(spec.held.clone());
        limits.idle = self.idle_limit(&spec);
        let mut folded = Folded::default();
        let (pid_tx, pid_rx) = tokio::sync::oneshot::channel();
        let k = self.clone();
        let rid = run_id.clone();
        let record_pid = tokio::spawn(async move {
            if let Ok(s) = pid_rx.await {
                let s: process::Spawned = s;
                let _ = k
                    .base
                    .store
                    .write(move |c| runs::set_pid_tx(c, &rid, s.pid, s.start_time))
                    .await;
            }
        });
        let git = cmd.cmd.as_std().get_current_dir().map(Path::to_owned);
        let git = git.and_then(|cwd| super::sandbox::git_watch(&spec, &cwd));
        let (cgroup, watched) = self.watch_cgroup(&spec, &run_id);
        let cgroup_dir = cgroup.as_ref().map(|(d, _)| d.clone());
        let finished = process::supervise(
            cmd,
            limits.clone(),
            process::Group::Session,
            stop,
            |s| {
                self.base.events.publish(Event::RunStarted {
                    workflow_id: spec.workflow_id,
                    agent: spec.name.clone(),
                    run_id: run_id.clone(),
                });
                // At once, while the worker starts (see os::cgroup::enter).
                if let Some(d) = cgroup_dir {
                    let pid = s.pid;
                    tokio::task::spawn_blocking(move || os::cgroup::enter(&d, pid));
                }
                let _ = pid_tx.send(s);
            },
            |line| folded.fold(&line, &progress),
        )
        .await;
        let _ = record_pid.await;
        watched.cancel();
        let over = self.drop_cgroup(cgroup).await;
        let Folded {
            mut end,
            outcome,
            groups,
        } = folded;
        // Commands the run started in groups of their own (sdk run_command) go with it.
        for (pid, start) in groups {
            process::kill_run_group(pid, start);
        }
        // The worker removes its scratch folder; a worker killed before it could
        // (SIGKILL after the grace period, a crash) leaves it, with the run's token in it.
        let _ = tokio::fs::remove_dir_all(self.scratch_dir(&run_id)).await;
        // Its CLI's refreshed login goes back to the user's (however the run ended).
        if let Some(home) = super::home::Home::of(&spec, &self.base.data_dir) {
            let _ = tokio::task::spawn_blocking(move || home.sync_logins()).await;
        }
        conclude(&mut end, finished, outcome, &limits);
        if let Some(w) = git {
            sweep_git(w, &mut end, &progress).await;
        }
        if let Some(why) = over {
            end.ok = false;
            end.error_class = Some(ErrorClass::Crash);
            end.error = Some(why);
        }
        self.commit_run(&spec, &run_id, &mut end).await;
        let again = self.close_run(&spec, &run_id, &mut end).await;
        if let Some(span) = &spec.trace {
            traced_end(span, &end);
        }
        // The scheduler settles the outcome (retry, pause, guards) and, unless the
        // run failed (its retry serves the wake), starts the remembered run before this
        // one reports done, so a waiter that wants "the run after this one" finds it.
        if let Some(after) = self.after.get().and_then(std::sync::Weak::upgrade) {
            after
                .settle_run(spec.agent_id, spec.workflow_id, end, again)
                .await;
        }
        let _ = done.send(true);
    }

    /// The run's pids cgroup, when it has one, watched for a refused fork.
    fn watch_cgroup(&self, spec: &Spec, run_id: &str) -> (Option<Watched>, CancellationToken) {
        let done = CancellationToken::new();
        let dir = self.cgroups.as_ref().map(|c| c.dir(run_id));
        let watch = dir.filter(|d| d.exists()).map(|d| {
            let max = spec.config.permissions.sandbox_limits().processes;
            let task = tokio::spawn(super::sandbox::watch_forks(d.clone(), max, done.clone()));
            (d, task)
        });
        (watch, done)
    }

    /// Kills what is left in the run's cgroup and removes it; why the run was
    /// ended, when its process limit did.
    async fn drop_cgroup(&self, watched: Option<Watched>) -> Option<String> {
        let (dir, task) = watched?;
        let over = task.await.ok().flatten();
        let kernel = self.cgroups.clone();
        let _ = tokio::task::spawn_blocking(move || {
            os::cgroup::remove(&dir);
            if let Some(k) = kernel {
                k.close();
            }
        })
        .await;
        over
    }

    /// Records the run's end in one transaction (with the refusals the kernel kept
    /// for it), forgets its token and approvals, frees the agent, tells everyone and
    /// applies run_end contracts; the wake that arrived during the run, if any.
    async fn close_run(
        self: &Arc<Self>,
        spec: &Spec,
        run_id: &str,
        end: &mut RunEnd,
    ) -> Option<(domain::states::Wake, Option<String>)> {
        {
            let mut kept = spec.denials.lock().unwrap();
            for d in kept.drain(..) {
                if end.denials.len() < runs::MAX_DENIALS {
                    end.denials.push(d);
                }
            }
        }
        let (rid, aid, wid, name) = (
            run_id.to_owned(),
            spec.agent_id,
            spec.workflow_id,
            spec.name.clone(),
        );
        let (end2, now) = (end.clone(), self.base.clock.now_ms());
        if let Err(e) = self
            .base
            .store
            .write(move |c| runs::finish_tx(c, &rid, aid, wid, &name, (&end2, now)))
            .await
        {
            tracing::error!(run = %run_id, "cannot record the end of the run: {e}");
        }
        self.base.registry.tokens.forget_agent(spec.agent_id);
        self.approvals.lose_of(run_id).await;
        tracing::info!(run = %run_id, agent = %spec.name, ok = end.ok, class = ?end.error_class, "run ended");
        let again = self.running.finish(spec.agent_id);
        self.base.events.publish(Event::RunEnded {
            workflow_id: spec.workflow_id,
            agent: spec.name.clone(),
            run_id: run_id.to_owned(),
            ok: end.ok,
        });
        if let Err(e) = self
            .spending
            .run_end_contracts(
                spec.agent_id,
                &spec.name,
                &spec.workflow,
                spec.workflow_id,
                end.status(),
            )
            .await
        {
            tracing::warn!(run = %run_id, "run_end contracts: {e}");
        }
        again
    }
}

/// A run's pids cgroup and the task watching it.
type Watched = (std::path::PathBuf, tokio::task::JoinHandle<Option<String>>);

/// What a run's report lines said, folded in as they come.
#[derive(Default)]
struct Folded {
    end: RunEnd,
    outcome: Option<Outcome>,
    /// Process groups the run started of its own (sdk run_command).
    groups: Vec<(u32, Option<u64>)>,
}

impl Folded {
    fn fold(&mut self, line: &str, progress: &broadcast::Sender<String>) {
        let end = &mut self.end;
        match Report::parse(line) {
            Some(Report::Progress { message }) => {
                let _ = progress.send(message);
            }
            Some(Report::Usage(u)) => end.usage = u,
            Some(Report::Session { id }) => end.session_id = Some(id),
            Some(Report::SessionTotal(u)) => end.session_total = Some(u),
            Some(Report::Result(o)) => self.outcome = Some(o),
            Some(Report::Group { pid, start_time }) => self.groups.push((pid, start_time)),
            Some(Report::Denied {
                tool,
                detail,
                reason,
            }) => {
                if end.denials.len() < runs::MAX_DENIALS {
                    end.denials.push(runs::Denial {
                        tool,
                        detail,
                        reason,
                    });
                }
            }
            Some(Report::Started | Report::Alive) | None => {}
        }
    }
}

/// How the worker's process ended and what it reported, told into the run's end:
/// its exit, and the error class and words when it did not succeed.
/// The run's span, closed with what the run cost and how it ended.
fn traced_end(span: &telemetry::Span, end: &RunEnd) {
    span.set("gen_ai.usage.input_tokens", end.usage.input_tokens as i64);
    span.set("gen_ai.usage.output_tokens", end.usage.output_tokens as i64);
    if let Some(cost) = end.usage.cost_usd {
        span.set("agent_worker.cost_usd", cost);
    }
    span.set("agent_worker.outcome", end.status().as_str());
    if let Some(class) = end.error_class {
        span.set("error.type", class.as_str());
    }
    if !end.ok {
        // What leaves for the collector: cut, any credential masked.
        span.fail(domain::redact::shown(
            end.error.as_deref().unwrap_or("the run failed"),
        ));
    }
    span.end();
}

fn conclude(
    end: &mut RunEnd,
    finished: std::io::Result<process::Finished>,
    outcome: Option<Outcome>,
    limits: &process::Limits,
) {
    match finished {
        Err(e) => {
            end.error_class = Some(ErrorClass::Crash);
            end.error = Some(format!("cannot start the worker: {e}"));
        }
        Ok(f) => {
            end.exit_code = f.exit_code();
            end.signal = f.signal();
            end.stderr_tail = f.stderr_tail.clone();
            match (f.ended, outcome) {
                (Ended::Stopped, _) => {
                    end.error_class = Some(ErrorClass::Stopped);
                    end.error = Some("the run was stopped".into());
                }
                (Ended::Exited, Some(o)) => {
                    end.ok = o.ok;
                    end.final_text = o.final_text;
                    if !o.ok {
                        end.error_class = Some(o.error_class.unwrap_or(ErrorClass::Other));
                        end.error = o.error;
                    }
                }
                (Ended::Exited, None) => {
                    end.error_class = Some(ErrorClass::Crash);
                    end.error = Some(match (f.exit_code(), f.signal()) {
                        (_, Some(sig)) => match super::sandbox::limit_hit(sig) {
                            Some(limit) => format!("the worker hit its sandbox's {limit}"),
                            None => format!(
                                "the worker was killed by signal {sig} before it reported an outcome"
                            ),
                        },
                        (code, _) => format!(
                            "the worker exited with code {} before it reported an outcome",
                            code.unwrap_or(-1)
                        ),
                    });
                }
                (timeout, _) => {
                    end.error_class = Some(ErrorClass::Timeout);
                    end.error = Some(format!(
                        "the worker {}{}",
                        timeout.describe(limits),
                        if f.killed {
                            " (killed after ignoring SIGTERM)"
                        } else {
                            ""
                        }
                    ));
                }
            }
        }
    }
}

/// Removes what the run made of git's code in its plain repository's git folder
/// (its processes are gone), and says so in its progress and its refusals.
async fn sweep_git(
    w: super::sandbox::GitWatch,
    end: &mut RunEnd,
    progress: &broadcast::Sender<String>,
) {
    let removed = tokio::task::spawn_blocking(move || super::sandbox::git_sweep(&w))
        .await
        .unwrap_or_default();
    for path in removed {
        let reason =
            format!("removed {path} the run made: git would run what it names outside the sandbox");
        let _ = progress.send(reason.clone());
        end.denials.push(runs::Denial {
            tool: "sandbox".into(),
            detail: path,
            reason,
        });
    }
}
