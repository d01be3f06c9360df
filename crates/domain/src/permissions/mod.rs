//! Permission profiles: how much an agent may do on the machine, in one vocabulary
//! for every backend (pure: parsing, the decision for one request, descriptions).
//!
//! An agent has a profile, `read` < `edit` (the default) < `full`, refined by
//! `allow` and `deny` lists of tool classes:
//!
//! | class | what it covers |
//! |---|---|
//! | `read` | reading, listing and searching files in the agent's folder |
//! | `edit` | creating and changing files inside the agent's folder |
//! | `shell` | running commands; `shell:<pattern>` only commands matching the glob |
//! | `web` | fetching pages and searching the web |
//! | `mcp:<server>`, `mcp:<server>:<tool>` | the agent's own MCP servers (its `mcp_servers`) |
//! | `team` | our own tools (channel, inbox, documents…): always allowed |
//!
//! `read` grants `read`; `edit` adds `edit`; `full` adds `shell` and `web`. The
//! agent's own MCP servers are allowed under every profile (the lead gave them to
//! it); `deny` takes them away. A request is decided in this order: team tools are
//! allowed; a matching `deny` refuses (deny beats allow); the profile or a matching
//! `allow` grants; anything else is refused, with the reason.
//!
//! Shell patterns are globs on a command's words (`*` matches anything), judged on
//! what the line runs, not its text ([`shell`]): a deny pattern refuses a line if
//! any program it would run matches, through wrappers, `sh -c` and `find -exec`
//! included (`rm *` also refuses `/bin/rm x`, `env rm x`, `unlink x`,
//! `find . -delete`), and anything whose programs the line does not show; an
//! allow pattern grants a line only if every program it runs matches an allowed
//! pattern, with no redirections, substitutions or unknowns, so `npm test*` never
//! lets `npm test; rm -rf ~` through. No pattern sees inside a script or a
//! program that runs others its own way: the profile (no `shell`) is the fence.
//!
//! How each backend expresses a profile, and what it cannot, is in [`backends`].

pub mod backends;
pub mod governed;
mod requests;
pub mod shell;

pub use requests::request_of;

use serde::{Deserialize, Serialize};
use std::fmt;

/// The three profiles, least to most.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Profile {
    Read,
    #[default]
    Edit,
    Full,
}

impl Profile {
    pub const NAMES: &[&str] = &["read", "edit", "full"];

    fn parse(s: &str) -> Result<Self, String> {
        match s.trim() {
            "read" => Ok(Profile::Read),
            "edit" => Ok(Profile::Edit),
            "full" => Ok(Profile::Full),
            other => Err(format!(
                "unknown permission profile {other:?}: use read, edit or full"
            )),
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Profile::Read => "read",
            Profile::Edit => "edit",
            Profile::Full => "full",
        }
    }

    /// Whether the profile itself grants a class (before allow and deny).
    fn grants(self, kind: Kind) -> bool {
        match kind {
            Kind::Team | Kind::Mcp | Kind::Read => true,
            Kind::Edit => self >= Profile::Edit,
            Kind::Shell | Kind::Web => self == Profile::Full,
        }
    }
}

/// The kind of a tool, without its details.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Kind {
    Read,
    Edit,
    Shell,
    Web,
    Mcp,
    Team,
}

impl Kind {
    /// Reads what [`Kind::as_str`] writes.
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "read" => Kind::Read,
            "edit" => Kind::Edit,
            "shell" => Kind::Shell,
            "web" => Kind::Web,
            "mcp" => Kind::Mcp,
            "team" => Kind::Team,
            _ => return None,
        })
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Read => "read",
            Kind::Edit => "edit",
            Kind::Shell => "shell",
            Kind::Web => "web",
            Kind::Mcp => "mcp",
            Kind::Team => "team",
        }
    }
}

/// One entry of an `allow` or `deny` list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Class {
    Read,
    Edit,
    /// Every command, or those matching a glob.
    Shell(Option<String>),
    Web,
    /// A server of the agent's own, or one tool of it.
    Mcp {
        server: String,
        tool: Option<String>,
    },
}

const CLASS_HELP: &str =
    "read, edit, shell, shell:<command glob>, web, mcp:<server> or mcp:<server>:<tool>";

impl Class {
    /// Parses `read`, `shell:npm test*`, `mcp:github:create_issue`, ...
    pub fn parse(s: &str) -> Result<Self, String> {
        let s = s.trim();
        let (head, rest) = match s.split_once(':') {
            Some((h, r)) => (h.trim(), Some(r)),
            None => (s, None),
        };
        match (head, rest) {
            ("read", None) => Ok(Class::Read),
            ("edit", None) => Ok(Class::Edit),
            ("web", None) => Ok(Class::Web),
            ("shell", None) => Ok(Class::Shell(None)),
            ("shell", Some(p)) => {
                let p = p.trim();
                if p.is_empty() {
                    return Err(
                        "shell: needs a command pattern after the colon, e.g. \"shell:npm test*\""
                            .into(),
                    );
                }
                if p.len() > 500 {
                    return Err("a shell pattern is at most 500 characters".into());
                }
                Ok(Class::Shell(Some(p.to_owned())))
            }
            ("mcp", Some(r)) => {
                let (server, tool) = match r.split_once(':') {
                    Some((s, t)) => (s.trim(), Some(t.trim())),
                    None => (r.trim(), None),
                };
                let ok = |x: &str| {
                    !x.is_empty()
                        && x.len() <= 64
                        && x.chars()
                            .all(|c| c.is_ascii_alphanumeric() || "_-.".contains(c))
                };
                if !ok(server) || tool.is_some_and(|t| !ok(t)) {
                    return Err(format!(
                        "{s:?}: write mcp:<server> or mcp:<server>:<tool> with names of letters, digits, '_', '-' or '.'"
                    ));
                }
                Ok(Class::Mcp {
                    server: server.to_owned(),
                    tool: tool.map(str::to_owned),
                })
            }
            ("team", _) => Err("team tools are always allowed; leave \"team\" out".into()),
            _ => Err(format!("unknown tool class {s:?}: use {CLASS_HELP}")),
        }
    }

    pub fn kind(&self) -> Kind {
        match self {
            Class::Read => Kind::Read,
            Class::Edit => Kind::Edit,
            Class::Shell(_) => Kind::Shell,
            Class::Web => Kind::Web,
            Class::Mcp { .. } => Kind::Mcp,
        }
    }

    fn matches(&self, req: &Request, as_deny: bool) -> bool {
        match (self, req) {
            (Class::Read, Request::Read { .. }) => true,
            (Class::Edit, Request::Edit { .. }) => true,
            (Class::Web, Request::Web { .. }) => true,
            (Class::Shell(None), Request::Shell { .. }) => true,
            (Class::Shell(Some(p)), Request::Shell { command }) => {
                if as_deny {
                    shell::deny_matches(p, command)
                } else {
                    shell::allow_matches(&[p], command)
                }
            }
            (Class::Mcp { server, tool }, Request::Mcp { server: s, tool: t }) => {
                server == s && tool.as_ref().is_none_or(|x| x == t)
            }
            _ => false,
        }
    }
}

impl fmt::Display for Class {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Class::Read => f.write_str("read"),
            Class::Edit => f.write_str("edit"),
            Class::Web => f.write_str("web"),
            Class::Shell(None) => f.write_str("shell"),
            Class::Shell(Some(p)) => write!(f, "shell:{p}"),
            Class::Mcp { server, tool: None } => write!(f, "mcp:{server}"),
            Class::Mcp {
                server,
                tool: Some(t),
            } => write!(f, "mcp:{server}:{t}"),
        }
    }
}

/// An agent's permissions: a profile refined by allow and deny lists.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Permissions {
    pub profile: Profile,
    pub allow: Vec<Class>,
    pub deny: Vec<Class>,
}

/// What an agent is about to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Request {
    Read { path: String },
    Edit { path: String },
    Shell { command: String },
    Web { target: String },
    Mcp { server: String, tool: String },
    Team { tool: String },
}

impl Request {
    pub fn kind(&self) -> Kind {
        match self {
            Request::Read { .. } => Kind::Read,
            Request::Edit { .. } => Kind::Edit,
            Request::Shell { .. } => Kind::Shell,
            Request::Web { .. } => Kind::Web,
            Request::Mcp { .. } => Kind::Mcp,
            Request::Team { .. } => Kind::Team,
        }
    }

    /// What the request is about, for messages: the path, command or tool.
    pub fn detail(&self) -> &str {
        match self {
            Request::Read { path } | Request::Edit { path } => path,
            Request::Shell { command } => command,
            Request::Web { target } => target,
            Request::Mcp { tool, .. } | Request::Team { tool } => tool,
        }
    }
}

/// The answer to a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    Allow,
    /// Refused, with a reason the model can act on.
    Deny(String),
}

impl Permissions {
    pub fn profile(profile: Profile) -> Self {
        Self {
            profile,
            ..Self::default()
        }
    }

    /// Decides one request (see the module docs for the order).
    pub fn decide(&self, req: &Request) -> Decision {
        if req.kind() == Kind::Team {
            return Decision::Allow;
        }
        if let Some(d) = self.deny.iter().find(|c| c.matches(req, true)) {
            return Decision::Deny(format!(
                "refused: this agent's permissions deny {d} ({} {:?}); do without it, or ask the lead",
                req.kind().as_str(),
                clip(req.detail())
            ));
        }
        if self.profile.grants(req.kind())
            || self.allow.iter().any(|c| c.matches(req, false))
            || self.patterns_allow(req)
        {
            return Decision::Allow;
        }
        let hint = match req {
            Request::Shell { .. } if self.allows_some_shell() => {
                " (with a command pattern, every command in the line, and every command it runs, \
                 must match an allowed pattern as written, with no redirections, substitutions, \
                 variables or globs, and nothing that deletes, writes or runs code by an option)"
            }
            _ => "",
        };
        Decision::Deny(format!(
            "refused: the {} profile does not allow {} ({:?}){hint}; do without it, or ask the lead to \
             grant it (agent_update permissions)",
            self.profile.as_str(),
            req.kind().as_str(),
            clip(req.detail())
        ))
    }

    /// A line whose commands are each covered by some allowed pattern (`npm test*`
    /// and `ls*` together allow `npm test && ls`).
    fn patterns_allow(&self, req: &Request) -> bool {
        let Request::Shell { command } = req else {
            return false;
        };
        let patterns: Vec<&str> = self
            .allow
            .iter()
            .filter_map(|c| match c {
                Class::Shell(Some(p)) => Some(p.as_str()),
                _ => None,
            })
            .collect();
        !patterns.is_empty() && shell::allow_matches(&patterns, command)
    }

    fn allows_some_shell(&self) -> bool {
        self.allow.iter().any(|c| matches!(c, Class::Shell(_)))
    }

    /// Whether the profile alone grants a class's whole kind (delegation holds a
    /// sub-agent's allow list to what its parent may do).
    pub(crate) fn may_whole(&self, c: &Class) -> bool {
        self.profile.grants(c.kind())
    }

    /// Whether any request of this kind can be allowed at all (to decide which
    /// tools a backend offers).
    pub fn may(&self, kind: Kind) -> bool {
        kind == Kind::Team
            || ((self.profile.grants(kind) || self.allow.iter().any(|c| c.kind() == kind))
                && !self
                    .deny
                    .iter()
                    .any(|c| c.kind() == kind && c.is_whole_kind()))
    }

    /// One plain sentence, for agent_info and the docs.
    pub fn describe(&self) -> String {
        let mut s = match self.profile {
            Profile::Read => "may read and search files in its folder".to_owned(),
            Profile::Edit => "may read, create and edit files in its folder".to_owned(),
            Profile::Full => "may read and edit files, run commands and use the web".to_owned(),
        };
        if !self.allow.is_empty() {
            s.push_str(&format!(", and also {}", list(&self.allow)));
        }
        if !self.deny.is_empty() {
            s.push_str(&format!(", but never {}", list(&self.deny)));
        }
        s
    }
}

impl Class {
    /// True for a class without a pattern or tool (it covers its whole kind).
    fn is_whole_kind(&self) -> bool {
        !matches!(
            self,
            Class::Shell(Some(_)) | Class::Mcp { tool: Some(_), .. }
        )
    }
}

fn list(v: &[Class]) -> String {
    v.iter()
        .map(|c| c.to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

fn clip(s: &str) -> String {
    if s.chars().count() <= 200 {
        return s.to_owned();
    }
    format!("{}…", s.chars().take(200).collect::<String>())
}

/// A glob where `*` matches any run of characters (including none) and every other
/// character matches itself. Linear time (no backtracking blow-up).
pub fn glob(pattern: &str, text: &str) -> bool {
    let p: Vec<char> = pattern.chars().collect();
    let t: Vec<char> = text.chars().collect();
    let (mut pi, mut ti) = (0, 0);
    let (mut star, mut mark) = (None, 0);
    while ti < t.len() {
        if pi < p.len() && p[pi] != '*' && p[pi] == t[ti] {
            pi += 1;
            ti += 1;
        } else if pi < p.len() && p[pi] == '*' {
            star = Some(pi);
            mark = ti;
            pi += 1;
        } else if let Some(s) = star {
            pi = s + 1;
            mark += 1;
            ti = mark;
        } else {
            return false;
        }
    }
    while pi < p.len() && p[pi] == '*' {
        pi += 1;
    }
    pi == p.len()
}

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
                    "deny": {"type": "array", "items": class, "description": "Classes refused even if granted (deny wins)."}
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
                };
                if p.allow.len() + p.deny.len() > 64 {
                    return Err("permissions: at most 64 allow and deny entries".into());
                }
                Ok(p)
            }
        }
    }
}

impl From<&Permissions> for PermissionsArg {
    fn from(p: &Permissions) -> Self {
        if p.allow.is_empty() && p.deny.is_empty() {
            return PermissionsArg::Profile(p.profile.as_str().to_owned());
        }
        let names = |v: &[Class]| v.iter().map(|c| ClassArg::Name(c.to_string())).collect();
        PermissionsArg::Detailed(Detailed {
            profile: Some(p.profile.as_str().to_owned()),
            allow: names(&p.allow),
            deny: names(&p.deny),
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

/// Permissions as tools show them: the profile, the lists, and what they mean.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema, PartialEq)]
pub struct PermissionsView {
    /// read, edit or full.
    pub profile: String,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub allow: Vec<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub deny: Vec<String>,
    /// In words.
    pub means: String,
}

impl From<&Permissions> for PermissionsView {
    fn from(p: &Permissions) -> Self {
        let names = |v: &[Class]| v.iter().map(|c| c.to_string()).collect();
        Self {
            profile: p.profile.as_str().to_owned(),
            allow: names(&p.allow),
            deny: names(&p.deny),
            means: p.describe(),
        }
    }
}

#[cfg(test)]
mod tests;
