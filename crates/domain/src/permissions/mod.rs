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
mod input;
mod requests;
pub mod shell;

pub use input::{ClassArg, Detailed, PermissionsArg};
pub use requests::request_of;

use crate::sandbox::{Mode, Network};
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
    /// A path outside the agent's folder its sandbox opens (`read:~/.aws`,
    /// `edit:/srv/cache`): what the sandbox hides or keeps read-only otherwise.
    Path {
        write: bool,
        path: String,
    },
}

const CLASS_HELP: &str = "read, edit, read:<path>, edit:<path>, shell, shell:<command glob>, web, \
     mcp:<server> or mcp:<server>:<tool>";

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
            ("read" | "edit", Some(p)) => {
                let p = p.trim();
                if !(p.starts_with('/') || p.starts_with("~/")) || p.len() > 1000 {
                    return Err(format!(
                        "{s:?}: a granted path is absolute or starts with ~/, e.g. \"{head}:~/.aws\""
                    ));
                }
                if p.split('/').any(|c| c == "..") {
                    return Err(format!(
                        "{s:?}: a granted path may not hold `..` (it could lead anywhere): name \
                         the folder itself, e.g. \"{head}:~/projects/app\""
                    ));
                }
                Ok(Class::Path {
                    write: head == "edit",
                    path: p.to_owned(),
                })
            }
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
            Class::Path { write: false, .. } => Kind::Read,
            Class::Path { write: true, .. } => Kind::Edit,
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
            Class::Path { write, path } => {
                write!(f, "{}:{path}", if *write { "edit" } else { "read" })
            }
        }
    }
}

/// An agent's permissions: a profile refined by allow and deny lists, and how
/// its OS sandbox holds them (see [`crate::sandbox`]).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Permissions {
    pub profile: Profile,
    pub allow: Vec<Class>,
    pub deny: Vec<Class>,
    /// None: the profile's default ([`Permissions::sandbox_mode`]).
    pub sandbox: Option<Mode>,
    pub network: Option<Network>,
    /// The sandbox's resource limits, as given (None: the defaults).
    pub limits: Option<crate::sandbox::LimitsArg>,
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
        !matches!(c, Class::Path { .. }) && self.profile.grants(c.kind())
    }

    /// The sandbox's mode: as set, else `required` below `full`, `best_effort` for it.
    pub fn sandbox_mode(&self) -> Mode {
        self.sandbox.unwrap_or(match self.profile {
            Profile::Full => Mode::BestEffort,
            _ => Mode::Required,
        })
    }

    /// Where the run may connect: as set, else `model` below `full`, `any` for it.
    pub fn network_reach(&self) -> Network {
        self.network.unwrap_or(match self.profile {
            Profile::Full => Network::Any,
            _ => Network::Model,
        })
    }

    /// The sandbox's resource limits: as given, the defaults for the rest.
    pub fn sandbox_limits(&self) -> crate::sandbox::Limits {
        self.limits.and_then(|l| l.read().ok()).unwrap_or_default()
    }

    /// The paths its definition grants (`read:<path>`, `edit:<path>`).
    pub fn granted_paths(&self) -> impl Iterator<Item = (bool, &str)> {
        self.allow.iter().filter_map(|c| match c {
            Class::Path { write, path } => Some((*write, path.as_str())),
            _ => None,
        })
    }

    /// Whether any request of this kind can be allowed at all (to decide which
    /// tools a backend offers).
    pub fn may(&self, kind: Kind) -> bool {
        kind == Kind::Team
            || ((self.profile.grants(kind)
                || self
                    .allow
                    .iter()
                    .any(|c| c.kind() == kind && !matches!(c, Class::Path { .. })))
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

/// Permissions as tools show them: the profile, the lists, and what they mean.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema, PartialEq)]
pub struct PermissionsView {
    /// read, edit or full.
    pub profile: String,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub allow: Vec<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub deny: Vec<String>,
    /// The OS sandbox: required, best_effort or off.
    pub sandbox: String,
    /// Where it may connect: any, model or none.
    pub network: String,
    /// Its sandbox's resource limits.
    pub limits: crate::sandbox::Limits,
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
            sandbox: p.sandbox_mode().as_str().to_owned(),
            network: p.network_reach().as_str().to_owned(),
            limits: p.sandbox_limits(),
            means: p.describe(),
        }
    }
}

#[cfg(test)]
mod tests;
