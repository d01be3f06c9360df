//! The input form of permissions (agent_new, agent_update, the YAML): a profile
//! name or `{profile, allow, deny, sandbox, network}`, checked and normalised into
//! [`Permissions`], whose (de)serialisation goes through it.

use super::{Class, Permissions, Profile};
use crate::sandbox::{Mode, Network};
use serde::{Deserialize, Serialize};

/// The input form: a profile name, or `{profile, allow, deny}` whose entries are
/// class strings or `{shell: "<pattern>"}`. (Its schema is written out by hand, so
/// clients see the profile names as an enum.)
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(untagged)]
pub enum PermissionsArg {
    /// "read", "edit" or "full".
    Profile(String),
    Detailed(Detailed),
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Detailed {
    /// read, edit (default) or full.
    #[serde(default)]
    pub profile: Option<String>,
    /// Classes to grant beyond the profile: read, edit, shell, "shell:npm test*", web,
    /// "mcp:<server>", "mcp:<server>:<tool>" (or {"shell": "npm test*"}).
    #[serde(default)]
    pub allow: Vec<ClassArg>,
    /// Classes to refuse even if the profile or allow grants them (deny wins).
    #[serde(default)]
    pub deny: Vec<ClassArg>,
    /// required, best_effort or off (see [`Mode`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandbox: Option<String>,
    /// any, model or none (see [`Network`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network: Option<String>,
    /// {memory_mb, processes, file_mb, cpu_s} (see [`crate::sandbox::Limits`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limits: Option<crate::sandbox::LimitsArg>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(untagged)]
pub enum ClassArg {
    Name(String),
    Shell {
        /// A glob on the command line, e.g. "npm test*".
        shell: String,
    },
}

impl schemars::JsonSchema for PermissionsArg {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Permissions".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        let class = schemars::json_schema!({
            "anyOf": [
                {"type": "string", "description": "read, edit, shell, \"shell:<command glob>\", web, \"mcp:<server>\" or \"mcp:<server>:<tool>\""},
                {"type": "object", "properties": {"shell": {"type": "string", "description": "A glob on the command line, e.g. \"npm test*\"."}},
                 "required": ["shell"], "additionalProperties": false}
            ]
        });
        schemars::json_schema!({
            "description": "What the agent may do on the machine: \"read\" (read and search files in its folder), \"edit\" (the default: also create and edit files there) or \"full\" (also run commands and use the web); or {profile, allow, deny} to grant or refuse tool classes beyond the profile (deny wins).",
            "anyOf": [
                {"type": "string", "enum": Profile::NAMES},
                {"type": "object", "properties": {
                    "profile": {"type": "string", "enum": Profile::NAMES},
                    "allow": {"type": "array", "items": class.clone(), "description": "Classes granted beyond the profile."},
                    "deny": {"type": "array", "items": class, "description": "Classes refused even if granted (deny wins)."},
                    "sandbox": {"type": "string", "enum": Mode::NAMES},
                    "network": {"type": "string", "enum": Network::NAMES}
                 }, "additionalProperties": false}
            ]
        })
    }
}

impl PermissionsArg {
    /// Checks and normalises; the error names the entry at fault.
    pub fn read(&self) -> Result<Permissions, String> {
        match self {
            PermissionsArg::Profile(p) => Ok(Permissions::profile(Profile::parse(p)?)),
            PermissionsArg::Detailed(d) => {
                let profile = d.profile.as_deref().map(Profile::parse).transpose()?;
                let classes = |v: &[ClassArg], field: &str| -> Result<Vec<Class>, String> {
                    v.iter()
                        .map(|c| match c {
                            ClassArg::Name(n) => Class::parse(n),
                            ClassArg::Shell { shell } => Class::parse(&format!("shell:{shell}")),
                        })
                        .collect::<Result<Vec<_>, _>>()
                        .map_err(|e| format!("permissions.{field}: {e}"))
                };
                let p = Permissions {
                    profile: profile.unwrap_or_default(),
                    allow: classes(&d.allow, "allow")?,
                    deny: classes(&d.deny, "deny")?,
                    sandbox: d.sandbox.as_deref().map(Mode::parse).transpose()?,
                    network: d.network.as_deref().map(Network::parse).transpose()?,
                    limits: d.limits,
                };
                if let Some(c) = p.deny.iter().find(|c| matches!(c, Class::Path { .. })) {
                    return Err(format!(
                        "permissions.deny: {c}: a path is granted in allow; one not granted stays \
                         as the profile's sandbox has it"
                    ));
                }
                if p.allow.len() + p.deny.len() > 64 {
                    return Err("permissions: at most 64 allow and deny entries".into());
                }
                if let Some(l) = &p.limits {
                    l.read()?;
                }
                Ok(p)
            }
        }
    }
}

impl From<&Permissions> for PermissionsArg {
    fn from(p: &Permissions) -> Self {
        if p.allow.is_empty()
            && p.deny.is_empty()
            && p.sandbox.is_none()
            && p.network.is_none()
            && p.limits.is_none()
        {
            return PermissionsArg::Profile(p.profile.as_str().to_owned());
        }
        let names = |v: &[Class]| v.iter().map(|c| ClassArg::Name(c.to_string())).collect();
        PermissionsArg::Detailed(Detailed {
            profile: Some(p.profile.as_str().to_owned()),
            allow: names(&p.allow),
            deny: names(&p.deny),
            sandbox: p.sandbox.map(|m| m.as_str().to_owned()),
            network: p.network.map(|n| n.as_str().to_owned()),
            limits: p.limits,
        })
    }
}

impl Serialize for Permissions {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        PermissionsArg::from(self).serialize(s)
    }
}

impl<'de> Deserialize<'de> for Permissions {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        PermissionsArg::deserialize(d)?
            .read()
            .map_err(serde::de::Error::custom)
    }
}
