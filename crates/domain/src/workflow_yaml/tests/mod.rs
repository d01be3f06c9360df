//! The format end to end: mistakes with their exact positions, the documents
//! that must parse, and inputs that must not panic.

use super::*;
use std::path::Path;

mod flow;
mod hooks;
mod mistakes;
use mistakes::MISTAKES;

fn inline(yaml: &str) -> Result<Workflow, SpecError> {
    parse(yaml, None, Path::new("/base"))
}

#[test]
fn mistakes_are_reported_where_they_are() {
    let mut failures = Vec::new();
    for (yaml, at, word) in MISTAKES {
        match inline(yaml) {
            Ok(_) => failures.push(format!("{yaml:?}: parsed, expected an error at {at}")),
            Err(e) => {
                let got = format!("{}:{}", e.line, e.column);
                let shown = e.to_string();
                if got != *at || !shown.contains(word) {
                    failures.push(format!("{yaml:?}: expected {at} {word:?}, got {shown}"));
                }
                assert!(shown.starts_with(&format!("<inline>:{got}: ")), "{shown}");
                assert!(shown.contains(". Fix: ") && !e.fix.is_empty(), "{shown}");
                assert!(
                    !e.message.ends_with('.') && !e.fix.ends_with('.'),
                    "{shown}"
                );
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert!(MISTAKES.len() >= 12);
}

#[test]
fn errors_name_their_field_and_fix() {
    let e = inline("name: x\nagents:\n  a:\n    backend: mokc\n").unwrap_err();
    assert_eq!(e.field, "agents.a.backend");
    assert!(
        e.fix
            .contains("claude, codex, cursor, gemini, opencode, sdk, mock, external"),
        "{e}"
    );
    let e = inline("agents:\n  a:\n    backend: mock\n    mock:\n      - sned: hi\n").unwrap_err();
    assert_eq!(e.field, "agents.a.mock[0]");
    let e = inline("agents:\n  a: { backend: mock }\nsetup:\n  - { shell: x, as: params }\n")
        .unwrap_err();
    assert_eq!(e.field, "setup[0].as");
    let e = inline("name: x\nagents:\n\ta: { backend: mock }\n").unwrap_err();
    assert_eq!(e.field, "yaml");
    assert!(e.fix.contains("spaces"), "{e}");
    let e = inline("agents:\n  a:\n    backend: claude\n    provider: anthropic\n").unwrap_err();
    assert!(e.fix.contains("env") && e.fix.contains("API_KEY"), "{e}");
    assert_eq!(
        e.to_string(),
        format!(
            "<inline>:4:5: agents.a.provider: `provider` is not supported. Fix: {}",
            e.fix
        )
    );
}

#[test]
fn a_file_names_itself_and_its_prompt_files() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("bad.yaml");
    std::fs::write(&f, "agents:\n  a:\n    backend: mock\n    colour: blue\n").unwrap();
    let e = load(&f).unwrap_err();
    assert!(
        e.to_string().starts_with(&format!("{}:4:5: ", f.display())),
        "{e}"
    );

    let e = load(&dir.path().join("absent.yaml")).unwrap_err();
    assert!(e.message.contains("cannot read the workflow file"), "{e}");
    std::fs::write(dir.path().join("bin.yaml"), b"name: x\nkickoff: \xff\n").unwrap();
    let e = load(&dir.path().join("bin.yaml")).unwrap_err();
    assert_eq!((e.line, e.column), (2, 10), "{e}");

    // An unknown name inside a prompt file is reported in that file.
    std::fs::create_dir(dir.path().join("prompts")).unwrap();
    let prompt = dir.path().join("prompts/a.md");
    std::fs::write(
        &prompt,
        "# Role\n\nYou review ${{ params.pr }} and ${{ diff }}.\n",
    )
    .unwrap();
    let f = dir.path().join("p.yaml");
    std::fs::write(
        &f,
        "agents:\n  a: { backend: mock, system_prompt: prompts/a.md }\n",
    )
    .unwrap();
    let e = load(&f).unwrap_err();
    assert_eq!(e.file, prompt.display().to_string());
    assert_eq!((e.line, e.column), (3, 12), "{e}");
    assert_eq!(e.field, "agents.a.system_prompt");
}

#[test]
fn system_prompt_files_are_loaded() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("prompts")).unwrap();
    std::fs::write(
        dir.path().join("prompts/reviewer.md"),
        "You review ${{ diff }}.\n",
    )
    .unwrap();
    std::fs::write(dir.path().join("notes.TXT"), "plain").unwrap();
    let f = dir.path().join("review.yaml");
    std::fs::write(
        &f,
        "agents:
  reviewer:
    backend: claude
    system_prompt: prompts/reviewer.md
  other:
    backend: sdk
    system_prompt: notes.TXT
  literal:
    backend: mock
    system_prompt: |
      Read notes.md
setup:
  - { shell: git diff, as: diff }
",
    )
    .unwrap();
    let wf = load(&f).unwrap();
    assert_eq!(wf.name, "review");
    assert_eq!(wf.file.as_deref(), Some(f.as_path()));
    assert_eq!(wf.source_dir, dir.path());
    assert_eq!(
        wf.agents[0].system_prompt.as_deref(),
        Some("You review ${{ diff }}.\n")
    );
    assert_eq!(wf.agents[1].system_prompt.as_deref(), Some("plain"));
    assert_eq!(
        wf.agents[2].system_prompt.as_deref(),
        Some("Read notes.md\n")
    );
}

const CHAT: &str = "name: chat
agents:
  alice:
    backend: cursor
    model: sonnet-4.5
    system_prompt: You are Alice. Curious and always asking questions.
  bob:
    backend: claude
    system_prompt: You are Bob. Knowledgeable and patient.
kickoff: |
  @alice Ask @bob a question about how AI agents collaborate.
  @bob Answer clearly, then ask @alice a follow-up.
";

const MOCK_TEST: &str = "name: mock-test
agents:
  alice:
    backend: mock
    system_prompt: You are Alice. You like to ask questions and are curious about everything.
  bob:
    backend: mock
    system_prompt: You are Bob. You are knowledgeable and patient. You answer questions clearly.
context:
  provider: memory
setup:
  - shell: echo \"mock-test-started\"
    as: timestamp
kickoff: |
  ${{ timestamp }}
  @alice Please ask @bob a simple question about AI agents.
  @bob When you receive a question, answer it briefly.
";

const CODE_REVIEW: &str = r#"name: code-review
agents:
  reviewer: { backend: claude, model: sonnet, system_prompt: "You review code.", wakeup: 30m }
  coder:    { backend: codex, system_prompt: "You fix what the reviewer finds." }
context: { documents: file, document_owner: reviewer }
params: [ { name: pr, type: number, required: true } ]
setup: [ { shell: "echo diff of ${{ params.pr }}", as: diff } ]
kickoff: |
  PR diff: ${{ diff }}
  @reviewer please review.
"#;

#[test]
fn the_original_examples_parse() {
    let wf = inline(CHAT).unwrap();
    assert_eq!(wf.name, "chat");
    assert_eq!(wf.file, None);
    assert_eq!(wf.source_dir, Path::new("/base"));
    let names: Vec<&str> = wf.agents.iter().map(|a| a.name.as_str()).collect();
    assert_eq!(names, ["alice", "bob"]);
    assert_eq!(wf.agents[0].backend, "cursor");
    assert_eq!(wf.agents[0].model.as_deref(), Some("sonnet-4.5"));
    assert_eq!(wf.agents[1].backend, "claude");
    assert_eq!(wf.context, ContextDef::default());
    assert!(wf.kickoff.unwrap().starts_with("@alice Ask @bob"));

    let wf = inline(MOCK_TEST).unwrap();
    assert_eq!(wf.context.documents.as_deref(), Some("sqlite"));
    assert_eq!(
        wf.setup,
        [SetupStep {
            shell: "echo \"mock-test-started\"".into(),
            as_name: Some("timestamp".into()),
            timeout: Duration::from_secs(60),
        }]
    );
    assert!(wf.kickoff.unwrap().starts_with("${{ timestamp }}\n@alice"));
}

/// Seed 004's example as written: no backend or `backend: default` (the default
/// backend), `schedule: 30s`, the original's context form, a setup step, and prompt
/// files next to the YAML; agents take permissions and their own servers.
#[test]
fn the_seed_example_parses() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("prompts")).unwrap();
    std::fs::write(dir.path().join("prompts/reviewer.md"), "You review.").unwrap();
    std::fs::write(dir.path().join("prompts/coder.md"), "You code.").unwrap();
    let yaml = "name: code-review\n\nagents:\n  reviewer:\n    model: anthropic/claude-sonnet-4-5\n    \
                system_prompt: prompts/reviewer.md\n    schedule: 30s              # polling interval\n    \
                backend: default           # sdk | claude | codex | cursor | mock\n    permissions: read\n\n  \
                coder:\n    model: anthropic/claude-sonnet-4-5\n    system_prompt: prompts/coder.md\n    \
                mcp_servers:\n      tracker: { command: tracker-mcp, env: { TRACKER_KEY: tk-1 } }\n\n\
                context:\n  provider: sqlite             # default\n  documentOwner: reviewer      # optional single-writer\n\n\
                setup:\n  - shell: gh pr diff\n    as: diff\n\nkickoff: |\n  PR diff: ${{ diff }}\n  @reviewer please review.\n";
    let path = dir.path().join("review.yaml");
    std::fs::write(&path, yaml).unwrap();
    let w = super::load(&path).unwrap();
    let reviewer = &w.agents[0];
    assert_eq!(reviewer.backend, "sdk");
    assert_eq!(reviewer.wakeup.as_deref(), Some("30s"));
    assert_eq!(reviewer.system_prompt.as_deref(), Some("You review."));
    assert_eq!(
        reviewer.permissions.profile,
        crate::permissions::Profile::Read
    );
    let coder = &w.agents[1];
    assert_eq!(coder.backend, "sdk");
    assert_eq!(coder.permissions.profile, crate::permissions::Profile::Edit);
    assert!(coder.mcp_servers.contains_key("tracker"));
    assert_eq!(w.context.document_owner.as_deref(), Some("reviewer"));
    assert_eq!(w.setup[0].as_name.as_deref(), Some("diff"));
}

#[test]
fn the_design_example_parses() {
    let wf = inline(CODE_REVIEW).unwrap();
    assert_eq!(wf.name, "code-review");
    let r = &wf.agents[0];
    assert_eq!(
        (r.name.as_str(), r.backend.as_str()),
        ("reviewer", "claude")
    );
    assert_eq!(r.wakeup.as_deref(), Some("30m"));
    assert_eq!(r.system_prompt.as_deref(), Some("You review code."));
    assert_eq!(wf.agents[1].backend, "codex");
    assert_eq!(wf.context.documents.as_deref(), Some("file"));
    assert_eq!(wf.context.document_owner.as_deref(), Some("reviewer"));
    assert_eq!(
        wf.params,
        [ParamDef {
            name: "pr".into(),
            description: None,
            kind: ParamKind::Number,
            required: true,
            default: None,
        }]
    );
    assert_eq!(wf.setup[0].as_name.as_deref(), Some("diff"));
    assert_eq!(wf.budget, None);
}

#[test]
fn the_readme_example_parses_with_every_field() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("prompts")).unwrap();
    std::fs::write(dir.path().join("prompts/reviewer.md"), "You review.").unwrap();
    let f = dir.path().join("code-review.yaml");
    std::fs::write(
        &f,
        r#"name: code-review                        # default: the file name
agents:
  reviewer:
    backend: claude
    model: sonnet
    system_prompt: prompts/reviewer.md
    wakeup: 30m
    wakeup_prompt: Check for new commits.
    budget: { max_runs_per_hour: 20, max_cost_usd: 5 }
    timeout: 10m
    cwd: ../project
    env: { ANTHROPIC_API_KEY: sk-..., PORT: 8080, DEBUG: true }
    max_steps: 40
    max_tokens: 8192
  coder:
    backend: default
    mock: [ { when: "review", send: "@reviewer fixed" } ]
    timeout: 90000
    cwd: ~/work
context: { documents: file, dir: "./docs/${{workflow.name}}-${{ workflow.tag }}", document_owner: reviewer }
params: [ { name: pr, type: number, required: true, short: p }, { name: draft, type: boolean, default: false } ]
setup: [ { shell: "gh pr diff ${{ params.pr }}", as: diff, timeout: 2m } ]
budget: { max_hops: 20 }
kickoff: |
  PR diff: ${{ diff }}
  @reviewer please review.
"#,
    )
    .unwrap();
    let wf = load(&f).unwrap();
    let r = &wf.agents[0];
    assert_eq!(r.system_prompt.as_deref(), Some("You review."));
    assert_eq!(r.wakeup_prompt.as_deref(), Some("Check for new commits."));
    assert_eq!(r.budget.as_ref().unwrap().max_runs_per_hour, Some(20));
    assert_eq!(r.budget.as_ref().unwrap().max_cost_usd, Some(5.0));
    assert_eq!(r.timeout, Some(Duration::from_secs(600)));
    assert_eq!(
        r.cwd.as_deref(),
        Some(dir.path().join("../project").as_path())
    );
    assert_eq!(r.env["PORT"], "8080");
    assert_eq!(r.env["DEBUG"], "true");
    assert_eq!(r.max_steps, Some(40));
    let c = &wf.agents[1];
    assert_eq!(c.backend, "sdk");
    assert_eq!(c.mock.len(), 1);
    assert_eq!(c.mock[0].send.as_deref(), Some("@reviewer fixed"));
    assert_eq!(c.timeout, Some(Duration::from_secs(90)));
    if let Some(home) = std::env::var_os("HOME") {
        assert_eq!(
            c.cwd.as_deref(),
            Some(Path::new(&home).join("work").as_path())
        );
    }
    assert_eq!(
        wf.context.dir.as_deref(),
        Some(
            dir.path()
                .join("docs/${{ workflow.name }}-${{ workflow.tag }}")
                .as_path()
        )
    );
    assert_eq!(wf.params[1].default.as_deref(), Some("false"));
    assert_eq!(wf.setup[0].timeout, Duration::from_secs(120));
    assert_eq!(wf.budget.as_ref().unwrap().max_hops, Some(20));
}

#[test]
fn context_forms() {
    let ctx = |c: &str| {
        inline(&format!(
            "agents:\n  a: {{ backend: mock }}\ncontext: {c}\n"
        ))
        .map(|w| w.context)
    };
    let d = ctx("{ provider: file, config: { bind: /srv/docs }, documentOwner: a }").unwrap();
    assert_eq!(d.documents.as_deref(), Some("file"));
    assert_eq!(d.dir.as_deref(), Some(Path::new("/srv/docs")));
    assert_eq!(d.document_owner.as_deref(), Some("a"));
    let d = ctx("{ provider: file, config: { dir: docs } }").unwrap();
    assert_eq!(d.dir.as_deref(), Some(Path::new("/base/docs")));
    let d = ctx("{ documents: { provider: file, dir: ./d } }").unwrap();
    assert_eq!(
        (d.documents.as_deref(), d.dir.as_deref()),
        (Some("file"), Some(Path::new("/base/d")))
    );
    assert_eq!(ctx("~").unwrap(), ContextDef::default());
    assert_eq!(
        ctx("{ documents: sqlite }").unwrap().documents.as_deref(),
        Some("sqlite")
    );
    assert!(ctx("{ documents: file, provider: file }").is_err());
    assert!(
        ctx("{ dir: a, config: { dir: b } }")
            .unwrap_err()
            .message
            .contains("twice")
    );
}

#[test]
fn the_shipped_examples_parse() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/workflows");
    let Ok(entries) = std::fs::read_dir(&dir) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        if p.extension().is_some_and(|x| x == "yaml" || x == "yml") {
            let wf = load(&p).unwrap_or_else(|e| panic!("{e}"));
            assert!(!wf.agents.is_empty());
        }
    }
}

#[test]
fn names_default_to_the_file_stem_or_workflow() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("nightly.yml");
    std::fs::write(&f, "agents:\n  a: { backend: mock }\n").unwrap();
    assert_eq!(load(&f).unwrap().name, "nightly");
    assert_eq!(
        inline("agents:\n  a: { backend: mock }\n").unwrap().name,
        "workflow"
    );
    let f = dir.path().join("my flow.yaml");
    std::fs::write(&f, "agents:\n  a: { backend: mock }\n").unwrap();
    let e = load(&f).unwrap_err();
    assert!(
        e.message.contains("my flow") && e.fix.contains("name:"),
        "{e}"
    );
}

/// A tiny deterministic generator: the same inputs on every run.
struct Lcg(u64);

impl Lcg {
    fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        self.0 >> 33
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

#[test]
fn no_input_panics() {
    let mut rng = Lcg(7);
    let alphabet: Vec<char> = " \n\t:-{}[],'\"|>#&*!?%@`$.~abckxy019é\r\\"
        .chars()
        .collect();
    let seeds = [CHAT, MOCK_TEST, CODE_REVIEW];
    for round in 0..3000 {
        let text: String = match round % 3 {
            // Random bytes.
            0 => {
                let bytes: Vec<u8> = (0..rng.below(200)).map(|_| rng.next() as u8).collect();
                String::from_utf8_lossy(&bytes).into_owned()
            }
            // Random YAML-ish characters.
            1 => (0..rng.below(200))
                .map(|_| alphabet[rng.below(alphabet.len())])
                .collect(),
            // A valid document with a few characters changed.
            _ => {
                let mut chars: Vec<char> = seeds[rng.below(seeds.len())].chars().collect();
                for _ in 0..1 + rng.below(4) {
                    let i = rng.below(chars.len());
                    match rng.below(3) {
                        0 => {
                            chars.remove(i);
                        }
                        1 => chars.insert(i, alphabet[rng.below(alphabet.len())]),
                        _ => chars[i] = alphabet[rng.below(alphabet.len())],
                    }
                }
                chars.into_iter().collect()
            }
        };
        if let Err(e) = inline(&text) {
            assert!(e.line >= 1 && e.column >= 1, "{text:?}: {e}");
        }
    }
}

#[test]
fn an_agent_may_be_allowed_to_delegate() {
    let w = inline(
        "agents:\n  lead:\n    backend: sdk\n    delegate: { agents: 3, depth: 2, backends: [mock, sdk], budget: { max_cost_usd: 2 } }\n  plain: { backend: mock }\n",
    )
    .unwrap();
    let d = w.agents[0].delegate.clone().expect("delegate");
    assert_eq!((d.agents, d.depth), (3, 2));
    assert_eq!(d.backends, ["mock", "sdk"]);
    assert_eq!(d.budget.unwrap().max_cost_usd, Some(2.0));
    assert!(w.agents[1].delegate.is_none(), "off by default");
}
