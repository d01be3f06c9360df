//! Skills for agents: folders holding a SKILL.md, checked when an agent is given
//! them (an error names the file), offered by the sdk backend by progressive
//! disclosure (names and descriptions in its system prompt, the body loaded with
//! load_skill), and served by the team server through the Skills extension to the
//! agent they belong to (the lead gets its own know-how of running teams).

use crate::common;
use common::fake_llm::{FakeLlm, Script};
use common::*;
use rmcp::model::{GetSkillRequestParams, ReadResourceRequestParams};
use serde_json::json;
use std::path::{Path, PathBuf};

const DESCRIPTION: &str = "Use when greeting someone: greet with the words PINEAPPLE-HELLO.";

/// A skill folder `greet-politely` under `root`, with one more file.
fn skill(root: &Path) -> PathBuf {
    let dir = root.join("greet-politely");
    std::fs::create_dir_all(dir.join("refs")).unwrap();
    std::fs::write(
        dir.join("SKILL.md"),
        format!(
            "---\nname: greet-politely\ndescription: \"{DESCRIPTION}\"\n---\n# Greeting\nSay PINEAPPLE-HELLO first.\n"
        ),
    )
    .unwrap();
    std::fs::write(dir.join("refs/tone.md"), "warm, short").unwrap();
    dir
}

#[tokio::test]
async fn an_sdk_agent_loads_its_skill_when_it_fits() {
    let root = tempfile::tempdir().unwrap();
    let dir = skill(root.path());
    let llm = FakeLlm::start(Script::tool_then_text(
        "load_skill",
        json!({"name": "greet-politely"}),
        "PINEAPPLE-HELLO",
    ))
    .await;
    let data = tempfile::tempdir().unwrap();
    let s = InProcess::start(data.path()).await;
    let lead = s.lead(Proto::Modern).await;
    let made = call(
        &lead,
        "agent_new",
        json!({"name": "greeter", "backend": "sdk", "model": "claude-sonnet-4-5",
               "env": {"ANTHROPIC_BASE_URL": llm.url, "ANTHROPIC_API_KEY": "sk-test"},
               "skills": [dir.display().to_string()]}),
    )
    .await
    .ok();
    assert_eq!(made["agent"]["skills"], json!([dir.display().to_string()]));
    let a = ask(&lead, "greeter", "greet the new member", 45).await;
    assert_eq!(a["status"], "succeeded", "{a}");
    let calls = llm.model_calls();
    let first = calls[0]["body"].to_string();
    assert!(
        first.contains("greet-politely: Use when greeting someone"),
        "the system prompt lists the skill: {first}"
    );
    assert!(
        !first.contains("Say PINEAPPLE-HELLO first"),
        "the body waits until asked for"
    );
    let second = calls[1]["body"].to_string();
    assert!(
        second.contains("Say PINEAPPLE-HELLO first"),
        "load_skill returned the body: {second}"
    );
    s.stop().await;
}

#[tokio::test]
async fn a_skill_is_checked_when_given_and_errors_name_the_file() {
    let root = tempfile::tempdir().unwrap();
    let bad = root.path().join("half-done");
    std::fs::create_dir(&bad).unwrap();
    std::fs::write(bad.join("SKILL.md"), "---\nname: half-done\n---\nbody\n").unwrap();
    let data = tempfile::tempdir().unwrap();
    let s = InProcess::start(data.path()).await;
    let lead = s.lead(Proto::Modern).await;
    let e = call(
        &lead,
        "agent_new",
        json!({"name": "x", "backend": "mock", "skills": [bad.display().to_string()]}),
    )
    .await
    .err();
    assert!(
        e.contains("skills[0]")
            && e.contains("half-done/SKILL.md")
            && e.contains("add description"),
        "{e}"
    );
    let e = call(
        &lead,
        "agent_new",
        json!({"name": "x", "backend": "mock", "skills": ["relative/skill"]}),
    )
    .await
    .err();
    assert!(e.contains("skills[0]") && e.contains("absolute"), "{e}");
    // agent_update checks them the same way, and [] clears them.
    call(&lead, "agent_new", json!({"name": "y", "backend": "mock"}))
        .await
        .ok();
    let e = call(
        &lead,
        "agent_update",
        json!({"target": "y", "skills": [bad.display().to_string()]}),
    )
    .await
    .err();
    assert!(e.contains("half-done/SKILL.md"), "{e}");
    let good = skill(root.path());
    let u = call(
        &lead,
        "agent_update",
        json!({"target": "y", "skills": [good.display().to_string()]}),
    )
    .await
    .ok();
    assert_eq!(u["agent"]["skills"][0], good.display().to_string(), "{u}");
    let u = call(&lead, "agent_update", json!({"target": "y", "skills": []}))
        .await
        .ok();
    assert!(u["agent"].get("skills").is_none(), "{u}");
    // In YAML, relative to the file, and a mistake points at its line.
    let work = tempfile::tempdir().unwrap();
    skill(&work.path().join("skills"));
    let yaml = "name: greet\nagents:\n  g:\n    backend: mock\n    skills: [./skills/greet-politely]\nkickoff: hi\n";
    std::fs::write(work.path().join("greet.yaml"), yaml).unwrap();
    let file = work.path().join("greet.yaml").display().to_string();
    call(&lead, "workflow_run", json!({ "file": file }))
        .await
        .ok();
    let g = info(&lead, "g@greet").await;
    let want = work.path().join("skills/greet-politely");
    assert_eq!(g["agent"]["skills"][0], want.display().to_string(), "{g}");
    let broken = yaml.replace("greet-politely", "nothing-here");
    std::fs::write(work.path().join("broken.yaml"), broken).unwrap();
    let file = work.path().join("broken.yaml").display().to_string();
    let e = call(&lead, "workflow_run", json!({ "file": file }))
        .await
        .err();
    assert!(
        e.contains("broken.yaml:5:") && e.contains("nothing-here/SKILL.md"),
        "{e}"
    );
    s.stop().await;
}

#[tokio::test]
async fn the_skills_extension_serves_each_identity_its_own() {
    let root = tempfile::tempdir().unwrap();
    let dir = skill(root.path());
    let data = tempfile::tempdir().unwrap();
    let s = InProcess::start(data.path()).await;
    let lead = s.lead(Proto::Modern).await;
    call(
        &lead,
        "agent_new",
        json!({"name": "greeter", "backend": "external", "skills": [dir.display().to_string()]}),
    )
    .await
    .ok();
    call(
        &lead,
        "agent_new",
        json!({"name": "other", "backend": "external"}),
    )
    .await
    .ok();
    let agent = join(&s, &lead, "greeter", Proto::Modern).await;
    let listed = agent.peer().list_all_skills().await.unwrap();
    assert_eq!(listed.len(), 1, "{listed:?}");
    let k = &listed[0];
    assert_eq!(k.uri, "skill://greet-politely/SKILL.md");
    assert_eq!(k.frontmatter.description, DESCRIPTION);
    let got = agent
        .peer()
        .get_skill(GetSkillRequestParams::new(k.uri.clone()))
        .await
        .unwrap();
    assert_eq!(&got.skill, k);
    let text = |r: rmcp::model::ReadResourceResult| serde_json::to_string(&r).unwrap();
    let md = agent
        .peer()
        .read_resource(ReadResourceRequestParams::new(k.uri.clone()))
        .await
        .unwrap();
    assert!(text(md).contains("Say PINEAPPLE-HELLO first"));
    let tone = agent
        .peer()
        .read_resource(ReadResourceRequestParams::new(
            "skill://greet-politely/refs/tone.md",
        ))
        .await
        .unwrap();
    assert!(text(tone).contains("warm, short"));
    // A change to the skill is seen at the next listing (read again, not cached).
    std::fs::write(
        dir.join("SKILL.md"),
        "---\nname: greet-politely\ndescription: Greet briefly.\n---\nShort.\n",
    )
    .unwrap();
    let again = agent.peer().list_all_skills().await.unwrap();
    assert_eq!(again[0].frontmatter.description, "Greet briefly.");
    // Another agent has none of them, and cannot read them.
    let other = join(&s, &lead, "other", Proto::Modern).await;
    assert!(other.peer().list_all_skills().await.unwrap().is_empty());
    let refused = other
        .peer()
        .read_resource(ReadResourceRequestParams::new(k.uri.clone()))
        .await;
    assert!(refused.is_err(), "{refused:?}");
    // The lead gets its own: how to run teams.
    let mine = lead.peer().list_all_skills().await.unwrap();
    assert_eq!(
        mine[0].uri, "skill://agent-worker-teams/SKILL.md",
        "{mine:?}"
    );
    let guide = lead
        .peer()
        .read_resource(ReadResourceRequestParams::new(mine[0].uri.clone()))
        .await
        .unwrap();
    assert!(text(guide).contains("Contracts cookbook"));
    s.stop().await;
}
