//! The Skills extension (`io.modelcontextprotocol/skills`, SEP-2640): each
//! identity is served its own skills, as `skill://<name>/SKILL.md` and the
//! skill's other files, through `skills/list`, `skills/get` and `resources/read`.
//! An agent gets the skills it was given (as the kernel keeps them: read again
//! only when their folders change); the lead gets the know-how of running
//! teams (`agent-worker-teams`), which is also a resource and a prompt for clients
//! without the extension.

use kernel::{Caller, Kernel};
use rmcp::ErrorData as McpError;
use rmcp::model::{
    ReadResourceResult, ResourceContents, Skill, SkillFrontmatter, SkillResource, SkillResources,
};

const SCHEME: &str = "skill://";
/// The lead's skill, its name and its text.
pub const LEAD_SKILL: &str = "agent-worker-teams";
pub const LEAD_SKILL_MD: &str = include_str!("../skills/agent-worker-teams/SKILL.md");
/// A skill file read at most.
const MAX_READ: u64 = 4 * 1024 * 1024;

/// A skill as this server holds it: the entry, and where its files are (none:
/// the lead's, built in).
struct Held {
    entry: Skill,
    dir: Option<domain::skills::Skill>,
}

fn uri(name: &str, path: &str) -> String {
    format!("{SCHEME}{name}/{path}")
}

/// The caller's skills.
async fn held(kernel: &Kernel, caller: &Caller) -> Result<Vec<Held>, McpError> {
    let Caller::Agent(a) = caller else {
        return Ok(vec![lead_skill()]);
    };
    let target = format!("{}@{}:{}", a.name, a.workflow.name, a.workflow.tag);
    let skills = kernel
        .agent_skills(&target)
        .await
        .map_err(|e| McpError::internal_error(e.to_string(), None))?;
    Ok(skills.into_iter().map(agent_skill).collect())
}

fn lead_skill() -> Held {
    let md = uri(LEAD_SKILL, domain::skills::SKILL_MD);
    let description = LEAD_SKILL_MD
        .lines()
        .find_map(|l| l.strip_prefix("description: "))
        .unwrap_or_default();
    Held {
        entry: Skill::new(
            md.clone(),
            SkillFrontmatter::new(LEAD_SKILL, description),
            SkillResources::Files(vec![SkillResource::from_bytes(
                md,
                LEAD_SKILL_MD.as_bytes(),
            )]),
        ),
        dir: None,
    }
}

fn agent_skill(s: domain::skills::Skill) -> Held {
    let mut fm = SkillFrontmatter::new(&s.name, &s.description);
    for (k, v) in &s.frontmatter {
        if k != "name" && k != "description" {
            fm = fm.with_field(k.clone(), v.clone());
        }
    }
    let files = s
        .files
        .iter()
        .map(|f| SkillResource::new(uri(&s.name, &f.path), f.digest.clone(), f.size))
        .collect();
    Held {
        entry: Skill::new(
            uri(&s.name, domain::skills::SKILL_MD),
            fm,
            SkillResources::Files(files),
        ),
        dir: Some(s),
    }
}

/// `skills/list`: the caller's skills.
pub async fn list(kernel: &Kernel, caller: &Caller) -> Result<Vec<Skill>, McpError> {
    Ok(held(kernel, caller)
        .await?
        .into_iter()
        .map(|h| h.entry)
        .collect())
}

/// `skills/get`: one of the caller's skills by the URI of its SKILL.md.
pub async fn get(kernel: &Kernel, caller: &Caller, want: &str) -> Result<Skill, McpError> {
    held(kernel, caller)
        .await?
        .into_iter()
        .map(|h| h.entry)
        .find(|s| s.uri == want)
        .ok_or_else(|| unknown(want))
}

/// Whether `uri` is a skill's (this module reads it).
pub fn is_skill_uri(uri: &str) -> bool {
    uri.starts_with(SCHEME)
}

/// `resources/read` of a skill's file: the caller's skills only.
pub async fn read(
    kernel: &Kernel,
    caller: &Caller,
    want: &str,
) -> Result<ReadResourceResult, McpError> {
    let rest = want
        .strip_prefix(SCHEME)
        .ok_or_else(|| crate::resources::unknown_resource(want))?;
    let (name, path) = rest
        .split_once('/')
        .ok_or_else(|| crate::resources::unknown_resource(want))?;
    let h = held(kernel, caller)
        .await?
        .into_iter()
        .find(|h| h.entry.name() == name)
        .ok_or_else(|| crate::resources::unknown_resource(want))?;
    let bytes = match h.dir {
        None if path == domain::skills::SKILL_MD => LEAD_SKILL_MD.as_bytes().to_vec(),
        None => return Err(crate::resources::unknown_resource(want)),
        Some(skill) => {
            let path = path.to_owned();
            tokio::task::spawn_blocking(move || domain::skills::read_file(&skill, &path, MAX_READ))
                .await
                .map_err(|e| McpError::internal_error(e.to_string(), None))?
                .map_err(|_| crate::resources::unknown_resource(want))?
        }
    };
    let mime = if path.ends_with(".md") {
        "text/markdown"
    } else {
        "text/plain"
    };
    let contents = match String::from_utf8(bytes) {
        Ok(text) => ResourceContents::text(text, want).with_mime_type(mime),
        Err(e) => {
            use base64::Engine;
            let blob = base64::engine::general_purpose::STANDARD.encode(e.as_bytes());
            ResourceContents::blob(blob, want).with_mime_type("application/octet-stream")
        }
    };
    Ok(ReadResourceResult::new(vec![contents]))
}

/// `skills/get` of a skill the caller does not have: -32602, as SEP-2640 says.
fn unknown(uri: &str) -> McpError {
    McpError::invalid_params(format!("no skill {uri}: skills/list gives yours"), None)
}
