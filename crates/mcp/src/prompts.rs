//! MCP prompts for the lead: slash commands in Claude Desktop, VS Code and other
//! clients that expand into instructions using our tools.
//!
//! One prompt per bundled example workflow (its YAML is compiled in, so the prompt
//! works wherever the binary is, without the repository) and `start-team`, which
//! turns a goal into a team. Agents see no prompts: they are the lead's.

use rmcp::ErrorData as McpError;
use rmcp::model::{GetPromptResult, JsonObject, Prompt, PromptArgument, PromptMessage, Role};

/// A bundled example: its prompt name, what it shows, its arguments (params the
/// YAML declares) and the YAML itself.
struct Example {
    name: &'static str,
    title: &'static str,
    description: &'static str,
    params: &'static [(&'static str, &'static str, bool)],
    yaml: &'static str,
}

const EXAMPLES: &[Example] = &[
    Example {
        name: "review-loop",
        title: "Run the review loop example",
        description: "A coder drafts, a reviewer asks for a change, the coder fixes it, the reviewer approves (mock agents, no API key).",
        params: &[],
        yaml: include_str!("../workflows/review-loop.yaml"),
    },
    Example {
        name: "debate-vote",
        title: "Run the debate and vote example",
        description: "Agents argue a topic and a binding vote decides (mock agents, no API key).",
        params: &[(
            "topic",
            "What to decide (default: rewrite the CLI in Rust).",
            false,
        )],
        yaml: include_str!("../workflows/debate-vote.yaml"),
    },
    Example {
        name: "scheduled-digest",
        title: "Run the scheduled digest example",
        description: "Scouts report and an editor on a schedule writes a digest (mock agents, no API key).",
        params: &[],
        yaml: include_str!("../workflows/scheduled-digest.yaml"),
    },
    Example {
        name: "coding-team",
        title: "Run the coding team example",
        description: "A coder that edits, a tester that may only run the tests, a reviewer that only reads (mock agents, no API key).",
        params: &[],
        yaml: include_str!("../workflows/coding-team.yaml"),
    },
    Example {
        name: "code-review-steps",
        title: "Run the code review steps example",
        description: "A step workflow: review, fix, verify, run in that order by the kernel (mock agents, no API key).",
        params: &[("pr", "The pull request (default: 42).", false)],
        yaml: include_str!("../workflows/code-review-steps.yaml"),
    },
];

const START_TEAM: &str = "start-team";
/// From chaos to structure: a workflow's messages and decisions read, and an
/// organisation proposed (members, contracts) for the person to approve.
const ORGANISE: &str = "organise";
/// The lead's skill (how to run teams well) as a prompt, for clients without the
/// Skills extension.
const TEAMS_GUIDE: &str = "teams-guide";
const TEAMS_GUIDE_DESCRIPTION: &str = "How to run agent-worker teams well: team patterns, the worktree, diff and merge flow, a contracts cookbook.";

/// The `teams-guide` prompt: the lead's skill, which takes no arguments.
fn guide_prompt(args: &JsonObject) -> Result<GetPromptResult, McpError> {
    if let Some(k) = args.keys().next() {
        return Err(McpError::invalid_params(
            format!("unknown argument {k:?} for prompt {TEAMS_GUIDE}: it takes none"),
            None,
        ));
    }
    Ok(
        GetPromptResult::new(vec![PromptMessage::new_text(Role::User, guide())])
            .with_description(TEAMS_GUIDE_DESCRIPTION),
    )
}

/// The lead's skill without its frontmatter.
pub fn guide() -> &'static str {
    let md = crate::skills::LEAD_SKILL_MD;
    md.strip_prefix("---\n")
        .and_then(|r| r.split_once("\n---\n"))
        .map_or(md, |(_, body)| body)
}

fn argument(name: &str, description: &str, required: bool) -> PromptArgument {
    let mut a = PromptArgument::new(name).with_description(description);
    a.required = Some(required);
    a
}

/// Every prompt, as prompts/list shows them.
pub fn list() -> Vec<Prompt> {
    let mut out = vec![
        Prompt::new(
            START_TEAM,
            Some("Set up a team of agents for a goal: pick backends that are ready here, give each agent the least permission its role needs, start them and follow their work."),
            Some(vec![
                argument("goal", "What the team should achieve.", true),
                argument(
                    "backends",
                    "Backends to prefer, comma-separated (e.g. \"claude, codex\"); default: whatever backend_list says is ready.",
                    false,
                ),
            ]),
        )
        .with_title("Start a team"),
        Prompt::new(TEAMS_GUIDE, Some(TEAMS_GUIDE_DESCRIPTION), None)
            .with_title("How to run teams well"),
        Prompt::new(
            ORGANISE,
            Some("Read a workflow's messages and decisions and propose an organisation: its members with their roles, and the contracts its work kept needing, each for you to approve."),
            Some(vec![
                argument("workflow", "The instance to learn from, e.g. \"@review:pr-1\".", true),
                argument("org", "The organisation's name (default: one the workflow suggests).", false),
            ]),
        )
        .with_title("Turn a workflow into an organisation"),
    ];
    for e in EXAMPLES {
        let args = e
            .params
            .iter()
            .map(|(n, d, r)| argument(n, d, *r))
            .collect::<Vec<_>>();
        out.push(
            Prompt::new(
                e.name,
                Some(e.description),
                (!args.is_empty()).then_some(args),
            )
            .with_title(e.title),
        );
    }
    out
}

/// What `organise` reads of its instance's feedback, as text (None for any other
/// prompt, or without a workflow).
pub async fn feedback_for(
    kernel: &kernel::Kernel,
    name: &str,
    arguments: Option<&JsonObject>,
) -> Option<String> {
    if name != ORGANISE {
        return None;
    }
    let w = arguments?.get("workflow")?.as_str()?.trim();
    let read = kernel.feedback_summary(&kernel::Caller::Lead, w, FEEDBACK_SHOWN);
    Some(match (read.await, domain::names::WorkflowRef::parse(w)) {
        (Ok(s), Ok(wref)) => feedback_text(&s, &crate::resources::feedback_uri(&wref)),
        (Err(e), _) => format!("Its feedback could not be read ({e})."),
        (_, Err(e)) => format!("Its feedback could not be read ({e})."),
    })
}

/// The reports `organise` shows (the rest are in the instance's resource).
const FEEDBACK_SHOWN: usize = 20;
/// The characters of one report's text `organise` shows.
const FEEDBACK_CHARS: usize = 300;

/// An instance's feedback summary as the prompt shows it.
fn feedback_text(s: &kernel::feedback::Summary, uri: &str) -> String {
    if s.is_empty() {
        return "No member reported feedback about its tools or skills (my_feedback).".into();
    }
    let mut out = format!(
        "What its members reported about their tools and skills with my_feedback ({} missing, {} friction, \
         {} suggestion; the newest {} here, all of them in the resource {uri}):",
        s.missing,
        s.friction,
        s.suggestion,
        s.newest.len()
    );
    for f in &s.newest {
        let text: String = f.text.chars().take(FEEDBACK_CHARS).collect();
        let cut = if text.len() < f.text.len() { "…" } else { "" };
        out.push_str(&format!(
            "\n   - {} about {}, from {}: {text}{cut}",
            f.kind, f.about, f.member
        ));
    }
    out
}

/// One prompt expanded with its arguments (`feedback`: what [`feedback_for`]
/// read). Unknown prompts and arguments, and a missing required argument, are
/// invalid params naming what to give.
pub fn get(
    name: &str,
    arguments: Option<&JsonObject>,
    feedback: Option<&str>,
) -> Result<GetPromptResult, McpError> {
    let empty = JsonObject::new();
    let args = arguments.unwrap_or(&empty);
    if name == TEAMS_GUIDE {
        return guide_prompt(args);
    }
    let known = known_args(name)?;
    if let Some(k) = args.keys().find(|k| !known.contains(&k.as_str())) {
        return Err(McpError::invalid_params(
            format!(
                "unknown argument {k:?} for prompt {name}: it takes {}",
                if known.is_empty() {
                    "none".to_owned()
                } else {
                    known.join(", ")
                }
            ),
            None,
        ));
    }
    // An argument as text, trimmed; absent when empty.
    let text = |k: &str| -> Option<String> {
        let v = args.get(k).map(|v| match v {
            serde_json::Value::String(s) => s.trim().to_owned(),
            other => other.to_string(),
        });
        v.filter(|v| !v.is_empty())
    };
    let needs = |k: &str, what: &str| {
        text(k).ok_or_else(|| {
            McpError::invalid_params(format!("prompt {name} needs {k}: {what}"), None)
        })
    };
    let body = if name == START_TEAM {
        start_team(
            &needs("goal", "what the team should achieve")?,
            text("backends").as_deref(),
        )
    } else if name == ORGANISE {
        organise(
            &needs("workflow", "the instance to learn from, e.g. @review:pr-1")?,
            text("org").as_deref(),
            feedback.unwrap_or_default(),
        )
    } else {
        let e = EXAMPLES
            .iter()
            .find(|e| e.name == name)
            .expect("checked above");
        let mut params = serde_json::Map::new();
        for (p, what, required) in e.params {
            let v = if *required {
                Some(needs(p, what)?)
            } else {
                text(p)
            };
            if let Some(v) = v {
                params.insert((*p).to_owned(), serde_json::Value::String(v));
            }
        }
        run_example(e, &params)
    };
    let description = list()
        .into_iter()
        .find(|p| p.name == name)
        .and_then(|p| p.description);
    let mut r = GetPromptResult::new(vec![PromptMessage::new_text(Role::User, body)]);
    if let Some(d) = description {
        r = r.with_description(d);
    }
    Ok(r)
}

/// The arguments a prompt takes (an unknown prompt is invalid params).
fn known_args(name: &str) -> Result<Vec<&'static str>, McpError> {
    if name == START_TEAM {
        return Ok(vec!["goal", "backends"]);
    }
    if name == ORGANISE {
        return Ok(vec!["workflow", "org"]);
    }
    EXAMPLES
        .iter()
        .find(|e| e.name == name)
        .map(|e| e.params.iter().map(|p| p.0).collect())
        .ok_or_else(|| {
            McpError::invalid_params(
                format!(
                    "unknown prompt {name:?}: use one of {}",
                    list()
                        .iter()
                        .map(|p| p.name.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
                None,
            )
        })
}

fn start_team(goal: &str, backends: Option<&str>) -> String {
    let prefer = match backends {
        Some(b) => format!("Prefer these backends: {b}. "),
        None => String::new(),
    };
    format!(
        "Set up a team of agent-worker agents to achieve this goal:\n\n{goal}\n\n\
         Steps:\n\
         1. Call backend_list. {prefer}Use only backends that are ready; if none is, tell me the fix it reports.\n\
         2. Decide on two to four roles. For each, call agent_new with a short name, the backend, a system prompt \
            that says the role and whom to hand over to (by @name), and the least permissions the role needs: \
            \"read\" for reviewers and researchers, \"edit\" for those who change files, \
            {{\"profile\": \"read\", \"allow\": [\"shell:<test command>*\"]}} for a tester. Give them a workflow such as \
            \"@team:main\" and, for work on a project, its folder as cwd. Read each result's warning.\n\
         3. Post the kickoff with channel_send (workflow \"@team:main\"), addressing the first agent with @name and \
            saying what done looks like.\n\
         4. Follow with workflow_status (wait_seconds 30) and channel_read; answer questions addressed to @user; \
            use agent_ask for a direct question to one agent.\n\
         5. When the goal is met, summarise the result and what each agent did (agent_info shows runs and costs), \
            then workflow_stop."
    )
}

fn organise(workflow: &str, org: Option<&str>, feedback: &str) -> String {
    let name = match org {
        Some(o) => format!("named \"{o}\""),
        None => "with a short name you choose".to_owned(),
    };
    format!(
        "Turn how the team of {workflow} worked into an agent-worker organisation {name}, so that the next \
         instances start from its rules instead of rediscovering them.\n\n\
         1. Read what happened: channel_read {{\"workflow\": \"{workflow}\", \"limit\": 200}}, \
            contract_list {{\"workflow\": \"{workflow}\"}} (its decisions: what was allowed, refused or approved, \
            and by whom), approval_list, and agent_list {{\"workflow\": \"{workflow}\"}}. \
            {feedback}\n\
         2. Propose the members: each agent or person who did a distinct job, with a one-line role. People \
            (who approved or reviewed) are members with \"human\": true. Give each the tools and skills its \
            feedback says were missing, and say which friction a role, a skill or a contract would remove.\n\
         3. Propose the contracts its work kept needing: approvals that were asked for again and again, \
            refusals, limits. Write each as contract_set takes it (when, then) with \"org\": the organisation.\n\
         4. Show me the members and each contract as one sentence, and ask me. Create nothing before I agree.\n\
         5. With my agreement: org_set {{name, description, members}}; then, for each contract, \
            team_proposal_create {{\"workflow\": \"{workflow}\", \"type\": \"approval\", \"contract\": {{..., \
            \"org\": name}}}} so that I approve it with team_vote (approve) or reject it; an approved one binds \
            every instance run within the organisation.\n\
         6. Say how to run the next instance within it: workflow_run {{..., \"org\": name}} or `org:` in the YAML."
    )
}

fn run_example(e: &Example, params: &serde_json::Map<String, serde_json::Value>) -> String {
    let mut call = serde_json::json!({"yaml": e.yaml, "wait_seconds": 30});
    if !params.is_empty() {
        call["params"] = serde_json::Value::Object(params.clone());
    }
    format!(
        "Run the agent-worker example workflow \"{}\": {}\n\n\
         Call workflow_run with exactly these arguments:\n\n{}\n\n\
         Then report its status; if it is still running, follow it with workflow_status (wait_seconds 30) until it \
         is completed or scheduled, and show me the main document and the last messages of the channel \
         (channel_read). Explain in two sentences what the agents did.",
        e.name,
        e.description,
        serde_json::to_string_pretty(&call).unwrap_or_default()
    )
}
