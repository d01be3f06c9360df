//! The request a tool call stands for, by the names the backends that ask give
//! their tools.

use super::Request;

/// The request a tool call stands for, from the tool's name and input as Claude
/// Code names them (its permission prompt tool passes `tool_name` and `input`) or as
/// the sdk backend's local tools do; an agent's own MCP tools are `mcp__server__tool`
/// in both. None for a tool neither names.
pub fn request_of(tool_name: &str, input: &serde_json::Value) -> Option<Request> {
    let s = |keys: &[&str]| {
        keys.iter()
            .find_map(|k| input.get(*k).and_then(|v| v.as_str()))
            .unwrap_or_default()
            .to_owned()
    };
    Some(match tool_name {
        "Read" | "Glob" | "Grep" | "LS" | "NotebookRead" | "read_file" | "list_files"
        | "search_files" => Request::Read {
            path: match s(&["file_path", "path", "notebook_path"]) {
                p if p.is_empty() => ".".into(),
                p => p,
            },
        },
        "Edit" | "Write" | "MultiEdit" | "NotebookEdit" | "write_file" | "edit_file" => {
            Request::Edit {
                path: s(&["file_path", "path", "notebook_path"]),
            }
        }
        "Bash" | "run_command" => Request::Shell {
            command: s(&["command"]),
        },
        "WebFetch" | "WebSearch" => Request::Web {
            target: s(&["url", "query"]),
        },
        // Claude Code loading one of the agent's skills: its own know-how, read-only.
        "Skill" => Request::Team {
            tool: "Skill".into(),
        },
        other => {
            let rest = other.strip_prefix("mcp__")?;
            let (server, tool) = rest.split_once("__")?;
            if server == crate::protocol::TEAM_SERVER {
                Request::Team { tool: tool.into() }
            } else {
                Request::Mcp {
                    server: server.into(),
                    tool: tool.into(),
                }
            }
        }
    })
}
