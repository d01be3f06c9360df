//! The run's sandbox step: the plan made off the async threads, from the
//! agent's permissions (what the contracts leave of them), its places, its
//! contracts' held paths and its home, with the run's pids cgroup.

use super::*;

impl super::super::Workers {
    /// The run's OS sandbox, from its agent's permissions and places, off the async
    /// threads (it reads the user database and a worktree's git folder, makes a cgroup).
    pub(in crate::runtime::workers) async fn sandbox_plan(
        &self,
        spec: &Spec,
        governed: domain::permissions::Profile,
        run_id: &str,
        (cwd, state_dir): (&std::path::Path, &std::path::Path),
        skills: &[domain::protocol::SkillRef],
        url: &str,
    ) -> Result<Option<domain::sandbox::Sandbox>> {
        let (mut spec, mut permissions) = (spec.clone(), spec.config.permissions.clone());
        spec.trace = None;
        // What the contracts leave of the profile is what the sandbox holds: a CLI
        // whose edits a contract holds (Codex, narrowed to read) cannot write by
        // any other way either.
        permissions.profile = permissions.profile.min(governed);
        let all = self.base.contracts.all();
        let in_force =
            crate::governance::contracts::in_force(&all, spec.workflow_id, &spec.workflow);
        let held = domain::contracts::edit_path_denials(in_force, &spec.name);
        let (cwd, state_dir, url) = (cwd.to_owned(), state_dir.to_owned(), url.to_owned());
        let (scratch, data_dir) = (self.scratch_dir(run_id), self.base.data_dir.clone());
        let skills: Vec<PathBuf> = skills.iter().map(|s| s.dir.clone()).collect();
        let (cgroups, run_id) = (self.cgroups.clone(), run_id.to_owned());
        tokio::task::spawn_blocking(move || {
            let places = Places {
                cwd: &cwd,
                state_dir: &state_dir,
                scratch,
                data_dir: &data_dir,
                home: &super::super::home::dir(&data_dir, spec.agent_id),
                skills,
                kernel_url: &url,
                held,
            };
            let mut plan = plan(&spec, &permissions, &places)?;
            plan.cgroup = cgroups.as_ref().and_then(|c| {
                c.make(&run_id, plan.limits.processes)
                    .inspect_err(|e| tracing::warn!(run = run_id, "no pids cgroup: {e}"))
                    .ok()
            });
            Some(plan)
        })
        .await
        .map_err(|e| Error::internal(e.to_string()))
    }
}
