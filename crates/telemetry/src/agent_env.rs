//! An agent's `OTEL_*` variables are for its CLI, not for the worker that starts
//! it: the worker's own exporter (the SDK reads `OTEL_BSP_*`, `OTEL_SERVICE_NAME`,
//! `OTEL_RESOURCE_ATTRIBUTES`, `OTEL_TRACES_SAMPLER`, `OTEL_EXPORTER_OTLP_HEADERS`,
//! … from its process's environment) takes the kernel's. So they travel to the
//! worker under a reserved prefix, and the worker gives them back their names in
//! each process it starts for the agent.

use std::ffi::OsString;

/// What an agent's `OTEL_X` is called in its worker's environment (`AW_` names
/// are reserved: no agent sets one).
pub const HELD_PREFIX: &str = "AW_AGENT_ENV_";

/// Whether an agent's variable is held from its worker.
fn held(name: &str) -> bool {
    name.starts_with("OTEL_")
}

/// An agent's `env` as its worker's environment: each `OTEL_*` variable under
/// [`HELD_PREFIX`], every other one as it is.
pub fn for_worker<'a, K, V>(
    env: impl IntoIterator<Item = (&'a K, &'a V)>,
) -> impl Iterator<Item = (String, &'a V)>
where
    K: AsRef<str> + ?Sized + 'a,
    V: ?Sized + 'a,
{
    env.into_iter().map(|(k, v)| {
        let k = k.as_ref();
        let name = if held(k) {
            format!("{HELD_PREFIX}{k}")
        } else {
            k.to_owned()
        };
        (name, v)
    })
}

/// The agent's variables this worker holds: (the held name, to remove; the
/// agent's name and value, to set) for a process started for the agent.
pub fn held_here() -> Vec<(OsString, String, OsString)> {
    held_in(std::env::vars_os())
}

fn held_in(vars: impl Iterator<Item = (OsString, OsString)>) -> Vec<(OsString, String, OsString)> {
    vars.filter_map(|(k, v)| {
        let name = k.to_str()?.strip_prefix(HELD_PREFIX)?;
        held(name).then(|| (k.clone(), name.to_owned(), v))
    })
    .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    #[test]
    fn an_agents_otel_variables_are_held_and_given_back() {
        let agent: BTreeMap<String, String> = [
            ("OTEL_BSP_MAX_QUEUE_SIZE", "100000000"),
            ("OTEL_SERVICE_NAME", "my-cli"),
            ("ANTHROPIC_API_KEY", "sk-x"),
            ("PATH", "/bin"),
            ("XOTEL_Y", "z"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect();
        let worker: BTreeMap<String, String> =
            for_worker(&agent).map(|(k, v)| (k, v.clone())).collect();
        let names: Vec<&str> = worker.keys().map(String::as_str).collect();
        assert_eq!(
            names,
            [
                "ANTHROPIC_API_KEY",
                "AW_AGENT_ENV_OTEL_BSP_MAX_QUEUE_SIZE",
                "AW_AGENT_ENV_OTEL_SERVICE_NAME",
                "PATH",
                "XOTEL_Y"
            ]
        );
        // The worker's environment: its kernel's OTEL_* and the agent's, held.
        let mut seen: Vec<(OsString, OsString)> = worker
            .into_iter()
            .map(|(k, v)| (k.into(), v.into()))
            .collect();
        seen.push(("OTEL_BSP_MAX_QUEUE_SIZE".into(), "512".into()));
        seen.push(("AW_AGENT_ENV_PATH".into(), "/not-held".into()));
        let back = held_in(seen.into_iter());
        let shown: Vec<(&str, &str, &str)> = back
            .iter()
            .map(|(h, k, v)| (h.to_str().unwrap(), k.as_str(), v.to_str().unwrap()))
            .collect();
        assert_eq!(
            shown,
            [
                (
                    "AW_AGENT_ENV_OTEL_BSP_MAX_QUEUE_SIZE",
                    "OTEL_BSP_MAX_QUEUE_SIZE",
                    "100000000"
                ),
                (
                    "AW_AGENT_ENV_OTEL_SERVICE_NAME",
                    "OTEL_SERVICE_NAME",
                    "my-cli"
                ),
            ]
        );
    }
}
