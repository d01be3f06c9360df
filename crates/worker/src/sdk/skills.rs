//! The agent's skills, by progressive disclosure: their names and descriptions in
//! the system prompt, and a `load_skill` tool that returns a skill's SKILL.md (or
//! another of its files) when the model asks for it. Reading a skill is the
//! agent's own know-how, so no profile governs it; it is read-only and bounded.

use super::ToolDef;
use domain::protocol::SkillRef;
use serde_json::{Value, json};

pub const TOOL: &str = "load_skill";
/// Most of one file returned.
const MAX_READ: u64 = 256 * 1024;

/// The tool, when the agent has skills.
pub fn tool(skills: &[SkillRef]) -> Option<ToolDef> {
    if skills.is_empty() {
        return None;
    }
    let names: Vec<&str> = skills.iter().map(|s| s.name.as_str()).collect();
    Some(ToolDef {
        name: TOOL.into(),
        description:
            "Load one of your skills: its SKILL.md (instructions), or another file it names.".into(),
        schema: json!({"type": "object", "properties": {
            "name": {"type": "string", "enum": names},
            "file": {"type": "string", "description": "A file of the skill, e.g. refs/rules.md (default SKILL.md)."}},
            "required": ["name"], "additionalProperties": false}),
    })
}

/// The system prompt's section that lists them.
pub fn section(skills: &[SkillRef]) -> String {
    if skills.is_empty() {
        return String::new();
    }
    let mut s = String::from(
        "\n\n## Skills\nLoad a skill with load_skill when its description fits the task, then follow it:\n",
    );
    for k in skills {
        s.push_str(&format!("- {}: {}\n", k.name, k.description));
    }
    s
}

/// A load_skill call: the file's text, or why not (the text and whether it is an error).
pub async fn load(skills: &[SkillRef], args: &Value) -> (String, bool) {
    let name = args.get("name").and_then(Value::as_str).unwrap_or_default();
    let file = args
        .get("file")
        .and_then(Value::as_str)
        .unwrap_or(domain::skills::SKILL_MD)
        .to_owned();
    let Some(skill) = skills.iter().find(|s| s.name == name) else {
        let known: Vec<&str> = skills.iter().map(|s| s.name.as_str()).collect();
        return (
            format!("no skill {name:?}; yours: {}", known.join(", ")),
            true,
        );
    };
    let dir = skill.dir.clone();
    let read = tokio::task::spawn_blocking(move || {
        let s = domain::skills::load(&dir)?;
        domain::skills::read_file(&s, &file, MAX_READ)
    })
    .await;
    match read {
        Ok(Ok(bytes)) => (String::from_utf8_lossy(&bytes).into_owned(), false),
        Ok(Err(e)) => (e, true),
        Err(e) => (format!("the skill could not be read: {e}"), true),
    }
}
