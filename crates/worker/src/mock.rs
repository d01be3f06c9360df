//! The mock backend: deterministic and LLM-free, but a full run over real MCP.
//!
//! For each inbox message, oldest first, the first rule whose `when` matches is
//! applied (a rule that only sleeps lets the next matching rule apply as well); a
//! scheduled run's prompt is matched first, as a message from `schedule`. With
//! no rules, the run sends one message acknowledging its inbox with every @ removed,
//! so two mocks never wake each other in a loop. At the end it acks its inbox.

use super::protocol::{ErrorClass, MockRule};
use super::{Failure, Run, clip};
use serde_json::json;
use std::time::Duration;

pub async fn run(run: &Run<'_>) -> Result<Option<String>, Failure> {
    let cfg = run.cfg;
    let inbox = &run.context.inbox;
    let reply = if cfg.mock.is_empty() {
        acknowledge(run).await?;
        None
    } else {
        scripted(run).await?
    };
    if let Some(last) = inbox.last() {
        run.client
            .must(
                "my_inbox_ack",
                json!({ "message_id": last.id, "through": true }),
            )
            .await?;
    }
    Ok(Some(reply.unwrap_or_else(|| format!("{} done", cfg.agent))))
}

/// Without rules: one message acknowledging the inbox, every @ removed.
async fn acknowledge(run: &Run<'_>) -> Result<(), Failure> {
    let inbox = &run.context.inbox;
    if !inbox.is_empty() {
        let summary: Vec<String> = inbox
            .iter()
            .map(|m| format!("{}: {}", m.from, unmention(&m.content)))
            .collect();
        let text = format!("[{}] Processed: {}", run.cfg.agent, summary.join(" | "));
        send(run, &clip(&text, 3000), None).await?;
    }
    Ok(())
}

/// The rules, applied to the scheduled prompt and each message: the reply of the
/// last rule that gave one.
async fn scripted(run: &Run<'_>) -> Result<Option<String>, Failure> {
    let cfg = run.cfg;
    let rules = compile(&cfg.mock)?;
    // A scheduled run's prompt is matched like a message from `schedule`, first.
    let prompt = cfg
        .prompt
        .as_deref()
        .filter(|_| cfg.trigger == domain::states::Wake::Schedule)
        .map(|p| ("schedule", p));
    let items = prompt.into_iter().chain(
        run.context
            .inbox
            .iter()
            .map(|m| (m.from.as_str(), m.content.as_str())),
    );
    let mut reply = None;
    for (from, content) in items {
        for (i, (rule, re)) in rules.iter().enumerate() {
            if !re.as_ref().is_none_or(|re| re.is_match(content)) {
                continue;
            }
            if let Some(n) = rule.times
                && !count_use(&cfg.state_dir, i, n)
            {
                continue;
            }
            let fill = |t: &str| {
                t.replace("{from}", from)
                    .replace("{name}", &cfg.agent)
                    .replace("{message}", &unmention(content))
            };
            if let Some(r) = apply(run, rule, &fill).await? {
                reply = Some(r);
            }
            let only_sleeps = rule.sleep.is_some()
                && rule.send.is_none()
                && rule.doc_append.is_none()
                && rule.vote.is_none()
                && rule.propose.is_none()
                && rule.resource.is_none()
                && rule.write.is_none()
                && rule.task.is_none()
                && rule.reply.is_none();
            if !only_sleeps {
                break;
            }
        }
    }
    Ok(reply)
}

/// What one rule does, in order: sleep, write a file, send, append, vote,
/// propose, create a resource, claim and move a task, fail; its reply, if it has one.
async fn apply(
    run: &Run<'_>,
    rule: &MockRule,
    fill: &dyn Fn(&str) -> String,
) -> Result<Option<String>, Failure> {
    if let Some(s) = &rule.sleep {
        let d = humantime::parse_duration(s).unwrap_or(Duration::ZERO);
        run.report.progress(format!("sleeping {s}"));
        tokio::time::sleep(d).await;
    }
    if let Some(w) = &rule.write {
        write(run, &w.path, &fill(&w.content)).await?;
    }
    if let Some(text) = &rule.send {
        send(run, &fill(text), rule.to.as_deref()).await?;
    }
    if let Some(d) = &rule.doc_append {
        let mut args = json!({ "content": fill(&d.content) });
        if let Some(f) = &d.file {
            args["file"] = json!(f);
        }
        run.client.must("team_doc_append", args).await?;
        run.report.progress("appended to a document");
    }
    if let Some(v) = &rule.vote {
        let mut args = json!({
            "proposal": v.proposal.as_deref().unwrap_or("latest"),
            "choice": v.choice,
        });
        if let Some(r) = &v.reason {
            args["reason"] = json!(fill(r));
        }
        run.client.must("team_vote", args).await?;
        run.report.progress(format!("voted {}", v.choice));
    }
    if let Some(p) = &rule.propose {
        let mut args = json!({
            "type": "decision",
            "title": fill(&p.title),
            "options": p.options,
        });
        if let Some(r) = &p.resolution {
            args["resolution"] = json!(r);
        }
        if let Some(q) = p.quorum {
            args["quorum"] = json!(q);
        }
        run.client.must("team_proposal_create", args).await?;
        run.report.progress(format!("proposed {}", p.title));
    }
    if let Some(text) = &rule.resource {
        run.client
            .must("resource_create", json!({ "content": fill(text) }))
            .await?;
        run.report.progress("created a resource");
    }
    if let Some(t) = &rule.task {
        task(run, t, fill).await?;
    }
    if let Some(f) = &rule.fail {
        return Err(Failure::classified(fill(f)));
    }
    Ok(rule.reply.as_deref().map(fill))
}

/// Claims a task, holds it, and moves it as the rule says.
async fn task(
    run: &Run<'_>,
    t: &super::protocol::MockTask,
    fill: &dyn Fn(&str) -> String,
) -> Result<(), Failure> {
    let args = t.id.map_or_else(|| json!({}), |id| json!({ "id": id }));
    let got = run.client.must("task_claim", args).await?;
    let Some(id) = got["task"]["id"].as_i64() else {
        run.report.progress("nothing to claim");
        return Ok(());
    };
    run.report.progress(format!("claimed task {id}"));
    if let Some(h) = &t.hold {
        tokio::time::sleep(humantime::parse_duration(h).unwrap_or(Duration::ZERO)).await;
    }
    let Some(state) = &t.state else {
        return Ok(());
    };
    let mut args = json!({ "id": id, "state": state });
    if let Some(r) = &t.result {
        args["result"] = r.clone();
    }
    if let Some(n) = &t.note {
        args["note"] = json!(fill(n));
    }
    run.client.must("task_update", args).await?;
    run.report.progress(format!("task {id} {state}"));
    Ok(())
}

/// Writes a file as the sdk backend's write_file does: the agent's permissions,
/// then the contracts, then a confined, atomic write. A refusal fails the run.
async fn write(run: &Run<'_>, path: &str, content: &str) -> Result<(), Failure> {
    let local = crate::sdk::local::Local {
        root: crate::sdk::fs::Root::new(&run.cfg.cwd)
            .map_err(|e| Failure::new(ErrorClass::Other, e))?,
        permissions: &run.cfg.permissions,
        client: run.client,
        stop: run.stop,
        report: run.report,
    };
    let args = json!({ "path": path, "content": content });
    match local.call("write_file", &args).await {
        Some((_, false)) => {
            run.report.progress(format!("wrote {path}"));
            Ok(())
        }
        Some((why, true)) => Err(Failure::classified(format!("write {path}: {why}"))),
        None => Err(Failure::new(
            ErrorClass::Other,
            "write_file is not a local tool",
        )),
    }
}

/// Counts one use of rule `i` in the agent's own folder (not its working directory,
/// which agents may share); false once it has been used `limit` times.
fn count_use(dir: &std::path::Path, i: usize, limit: u32) -> bool {
    let file = dir.join(format!(".mock-rule-{}.count", i + 1));
    let used: u32 = std::fs::read_to_string(&file)
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(0);
    if used >= limit {
        return false;
    }
    let _ = std::fs::write(&file, (used + 1).to_string());
    true
}

type Compiled<'a> = Vec<(&'a MockRule, Option<regex::Regex>)>;

fn compile(rules: &[MockRule]) -> Result<Compiled<'_>, Failure> {
    rules
        .iter()
        .map(|r| {
            let re = r
                .regex()
                .map_err(|e| Failure::new(ErrorClass::Other, format!("bad mock rule: {e}")))?;
            Ok((r, re))
        })
        .collect()
}

async fn send(run: &Run<'_>, text: &str, to: Option<&str>) -> Result<(), Failure> {
    let mut args = json!({ "message": text, "force": true });
    if let Some(to) = to {
        args["to"] = json!(to);
    }
    run.client.must("channel_send", args).await?;
    run.report.progress(format!("sent: {}", clip(text, 200)));
    Ok(())
}

/// The text with its @ signs removed, so quoting it mentions nobody.
pub fn unmention(s: &str) -> String {
    s.replace('@', "")
}
