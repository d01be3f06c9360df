//! Two nodes writing to one workflow instance and to two instances at once. On
//! PostgreSQL they are two kernels on one database, whose writes of different
//! instances run at once and of one instance one at a time; on SQLite one kernel
//! serves both sides. Either way the rules hold: every message reaches its
//! reader's inbox once, in each sender's order, and none is acked unseen; a task is
//! claimed once; each vote is counted once.

use crate::common;
use common::*;
use serde_json::{Value, json};
use std::collections::HashMap;
use std::time::{Duration, Instant};

const INSTANCES: [&str; 2] = ["@one:x", "@two:x"];
const AGENTS: [&str; 4] = ["r", "s", "t", "u"];
/// Messages each of s and t sends to r in each instance.
const SENDS: usize = 12;

/// The two sides: two kernels on one PostgreSQL database, or one SQLite kernel.
async fn two_sides(dirs: &[tempfile::TempDir; 2]) -> Vec<HttpServer> {
    if std::env::var("AGENT_WORKER_TEST_STORE").as_deref() != Ok("postgres") {
        return vec![HttpServer::start(dirs[0].path()).await];
    }
    let url = store::database(&format!("two sides {}", dirs[0].path().display()));
    let mut out = Vec::new();
    for (dir, name) in dirs.iter().zip(["a", "b"]) {
        let args = ["--node", name, "--store", &url];
        out.push(HttpServer::start_with(dir.path(), &args, &[]).await);
    }
    out
}

#[tokio::test]
async fn two_nodes_write_one_instance_and_two_at_once() {
    let dirs = [tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap()];
    let sides = two_sides(&dirs).await;
    let other = sides.last().unwrap();
    let lead = sides[0].lead(Proto::Modern).await;
    // Each instance's agents, each connected to one side or the other (the
    // instance's r and s to different sides, swapped in the second instance).
    let mut teams: Vec<HashMap<&str, Client>> = Vec::new();
    for (i, wf) in INSTANCES.iter().enumerate() {
        new_agents(&lead, wf, &AGENTS).await;
        let mut team = HashMap::new();
        for (j, name) in AGENTS.iter().enumerate() {
            let joined = call(
                &lead,
                "agent_join",
                json!({"target": format!("{name}{wf}")}),
            )
            .await
            .ok();
            let token = joined["token"].as_str().unwrap();
            let side = if (i + j) % 2 == 0 { &sides[0] } else { other };
            team.insert(*name, side.client(token, Proto::Modern).await);
        }
        teams.push(team);
    }
    let rounds = teams.iter().map(|team| messages_reach_the_inbox_once(team));
    futures::future::join_all(rounds).await;
    for team in &teams {
        the_channel_reads_whole(&team["u"]).await;
    }
    let claims = INSTANCES
        .iter()
        .zip(&teams)
        .map(|(wf, team)| a_task_is_claimed_once(&lead, wf, team));
    futures::future::join_all(claims).await;
    let votes = INSTANCES
        .iter()
        .zip(&teams)
        .map(|(wf, team)| each_vote_counts_once(&lead, wf, team));
    futures::future::join_all(votes).await;
    for s in sides {
        s.stop().await;
    }
}

/// s and t send to r while r reads its inbox and acks through what it read: r
/// sees each message once, in each sender's order, and nothing is acked unseen.
async fn messages_reach_the_inbox_once(team: &HashMap<&str, Client>) {
    let send = |who: &'static str| async move {
        for i in 0..SENDS {
            let m = format!("@r {who}-{i:02}");
            call(
                &team[who],
                "channel_send",
                json!({"message": m, "force": true}),
            )
            .await
            .ok();
        }
    };
    let read = async {
        let mut seen: Vec<String> = Vec::new();
        let deadline = Instant::now() + Duration::from_secs(60);
        while seen.iter().filter(|m| is_sent(m)).count() < 2 * SENDS {
            assert!(Instant::now() < deadline, "r saw only {seen:?}");
            let inbox = call(&team["r"], "my_inbox", json!({"limit": 5})).await.ok();
            let got = inbox_contents(&inbox);
            if let Some(last) = inbox["messages"].as_array().unwrap().last() {
                let id = last["id"].as_str().unwrap();
                let args = json!({"message_id": id, "through": true});
                call(&team["r"], "my_inbox_ack", args).await.ok();
            } else {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            seen.extend(got);
        }
        seen
    };
    let ((), (), seen) = tokio::join!(send("s"), send("t"), read);
    let seen: Vec<String> = seen.into_iter().filter(|m| is_sent(m)).collect();
    for who in ["s", "t"] {
        let mine: Vec<&String> = seen.iter().filter(|m| m.starts_with(who)).collect();
        let want: Vec<String> = (0..SENDS).map(|i| format!("{who}-{i:02}")).collect();
        assert_eq!(
            mine,
            want.iter().collect::<Vec<_>>(),
            "{who}'s, once, in order"
        );
    }
    let left = call(&team["r"], "my_inbox", json!({})).await.ok();
    assert!(!inbox_contents(&left).iter().any(|m| is_sent(m)), "{left}");
}

/// One of the messages s and t send.
fn is_sent(m: &str) -> bool {
    m.starts_with("s-") || m.starts_with("t-")
}

fn inbox_contents(inbox: &Value) -> Vec<String> {
    inbox["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            m["content"]
                .as_str()
                .unwrap()
                .trim_start_matches("@r ")
                .to_owned()
        })
        .collect()
}

/// Read page after page with `since`, the channel gives what one read of it
/// gives, each message once.
async fn the_channel_reads_whole(u: &Client) {
    let whole = call(u, "channel_read", json!({"limit": 200})).await.ok();
    let all = ids(&whole);
    let sent = contents(&whole)
        .iter()
        .filter(|m| is_sent(m.trim_start_matches("@r ")))
        .count();
    assert_eq!(sent, 2 * SENDS, "{whole}");
    let mut walked = vec![all[0].clone()];
    loop {
        let since = walked.last().unwrap().clone();
        let page = call(u, "channel_read", json!({"since": since, "limit": 7}))
            .await
            .ok();
        walked.extend(ids(&page));
        if page["has_more"] != true {
            break;
        }
    }
    assert_eq!(walked, all, "page by page as in one read");
}

/// Every agent of the instance claims one task at once, from both sides: one wins.
async fn a_task_is_claimed_once(lead: &Client, wf: &str, team: &HashMap<&str, Client>) {
    let added = call(
        lead,
        "task_add",
        json!({"title": "the one", "workflow": wf}),
    )
    .await
    .ok();
    let id = added["tasks"][0]["id"]
        .as_i64()
        .unwrap_or_else(|| panic!("{added}"));
    let claims = AGENTS.iter().map(|name| async move {
        match call(&team[name], "task_claim", json!({"id": id})).await {
            Out::Ok(v) if v["task"]["owner"] == *name => Some(*name),
            Out::Ok(v) => panic!("a claim that did not take: {v}"),
            Out::Err(e) => {
                assert!(e.contains("claimed by"), "{e}");
                None
            }
        }
    });
    let won: Vec<&str> = futures::future::join_all(claims)
        .await
        .into_iter()
        .flatten()
        .collect();
    assert_eq!(won.len(), 1, "{wf}: {won:?}");
}

/// Every agent votes at once, from both sides: the quorum resolves it once and
/// each vote is in the tally once.
async fn each_vote_counts_once(lead: &Client, wf: &str, team: &HashMap<&str, Client>) {
    let args = json!({"type": "decision", "title": "which", "options": ["x", "y"], "workflow": wf});
    let p = call(lead, "team_proposal_create", args).await.ok();
    let id = p["proposal"]["id"].as_str().unwrap().to_owned();
    let votes = AGENTS.iter().map(|name| {
        let (id, choice) = (id.clone(), if *name == "r" { "y" } else { "x" });
        async move {
            let v = call(
                &team[name],
                "team_vote",
                json!({"proposal": id, "choice": choice}),
            )
            .await
            .ok();
            v["resolved"] == true
        }
    });
    let resolved = futures::future::join_all(votes).await;
    assert_eq!(
        resolved.iter().filter(|r| **r).count(),
        1,
        "{wf}: {resolved:?}"
    );
    let st = call(
        lead,
        "team_proposal_status",
        json!({"proposal": id, "workflow": wf}),
    )
    .await
    .ok();
    let p = &st["proposals"][0];
    assert_eq!(p["status"], "resolved", "{st}");
    assert_eq!(p["votes"].as_array().unwrap().len(), AGENTS.len(), "{st}");
    assert_eq!(
        (
            p["options"][0]["votes"].as_i64(),
            p["options"][1]["votes"].as_i64()
        ),
        (Some(3), Some(1)),
        "{st}"
    );
}
