//! The dashboard's board panel through rmcp, as the app polls it: an instance's
//! tasks by column (open, blocked, claimed, done), each with its owner, what
//! blocks it and whether a result is attached; a claim and a done end a waiting
//! `dashboard_watch` at once, so the board moves live.

use crate::common;
use crate::dashboard::{MIME, ui_client};
use common::*;
use serde_json::{Value, json};
use std::time::{Duration, Instant};

const WF: &str = "@team:main";

/// The board's cards as (title, column, owner, blocked by titles, result).
fn cards(v: &Value) -> Vec<(String, String, Value, Vec<String>, bool)> {
    let board = v["board"]
        .as_array()
        .unwrap_or_else(|| panic!("no board: {v}"));
    let title = |id: &Value| {
        board.iter().find(|t| &t["id"] == id).map_or_else(
            || id.to_string(),
            |t| t["title"].as_str().unwrap().to_owned(),
        )
    };
    board
        .iter()
        .map(|t| {
            let blocked = t["blocked_by"]
                .as_array()
                .map_or(vec![], |b| b.iter().map(title).collect());
            (
                t["title"].as_str().unwrap().to_owned(),
                t["column"].as_str().unwrap().to_owned(),
                t["owner"].clone(),
                blocked,
                t["result"].as_bool().unwrap(),
            )
        })
        .collect()
}

fn card(
    title: &str,
    column: &str,
    owner: Value,
    blocked: &[&str],
    result: bool,
) -> (String, String, Value, Vec<String>, bool) {
    let blocked = blocked.iter().map(|b| (*b).to_owned()).collect();
    (title.into(), column.into(), owner, blocked, result)
}

/// The app's place: the version shown and the last message shown.
struct Shown {
    seen: Value,
    since: Value,
}

impl Shown {
    fn of(v: &Value) -> Self {
        let mut s = Self {
            seen: Value::Null,
            since: Value::Null,
        };
        s.saw(v);
        s
    }

    fn saw(&mut self, v: &Value) {
        self.seen = v["version"].clone();
        if let Some(m) = v["messages"].as_array().and_then(|m| m.last()) {
            self.since = m["id"].clone();
        }
    }

    /// A watch that waits for news after what was shown, ended by `act` within
    /// a second: the view it returns.
    async fn moved_by<F: std::future::Future<Output = ()>>(
        &mut self,
        host: &rmcp::Peer<rmcp::RoleClient>,
        act: F,
    ) -> Value {
        let args = json!({"workflow": WF, "seen": self.seen, "since": self.since,
                          "wait_seconds": 20});
        let mut waiting = tokio::spawn({
            let peer = host.clone();
            async move { call(&peer, "dashboard_watch", args).await.ok() }
        });
        let early = tokio::time::timeout(Duration::from_millis(300), &mut waiting).await;
        assert!(
            early.is_err(),
            "with nothing new, the call waits: {early:?}"
        );
        let at = Instant::now();
        act.await;
        let v = waiting.await.unwrap();
        assert!(
            at.elapsed() < Duration::from_secs(1),
            "the move ended the wait at once: {v}"
        );
        self.saw(&v);
        v
    }
}

#[tokio::test]
async fn the_board_shows_tasks_by_column_and_moves_live() {
    let dir = tempfile::tempdir().unwrap();
    let s = InProcess::start(dir.path()).await;
    let host = ui_client(&s, &s.admin, Proto::Legacy, json!([MIME])).await;
    let lead = s.lead(Proto::Modern).await;
    let agents = agent_sessions(&s, &lead, WF, &["ann", "bob"]).await;
    let ann = &agents[0];
    let empty = call(
        &host,
        "dashboard_watch",
        json!({"workflow": WF, "wait_seconds": 0}),
    )
    .await
    .ok();
    assert_eq!(
        (&empty["board"], &empty["board_more"]),
        (&json!([]), &json!(0)),
        "{empty}"
    );

    let plan = json!({"workflow": WF, "plan": [
        {"name": "design", "title": "Design"},
        {"name": "build", "title": "Build", "deps": ["design"]},
        {"title": "Docs"},
    ]});
    let mut app = Shown::of(&empty);
    let added = app
        .moved_by(&host, async {
            call(&lead, "task_add", plan).await.ok();
        })
        .await;
    let none = Value::Null;
    assert_eq!(
        cards(&added),
        [
            card("Design", "open", none.clone(), &[], false),
            card("Build", "blocked", none.clone(), &["Design"], false),
            card("Docs", "open", none.clone(), &[], false),
        ],
        "{added}"
    );

    let design = added["board"][0]["id"].clone();
    let claimed = app
        .moved_by(&host, async {
            call(ann, "task_claim", json!({"id": design})).await.ok();
        })
        .await;
    assert_eq!(
        cards(&claimed)[0],
        card("Design", "claimed", json!("ann"), &[], false),
        "{claimed}"
    );

    let done = app
        .moved_by(&host, async {
            let r = json!({"id": design, "state": "done", "result": {"api": "v1"}});
            call(ann, "task_update", r).await.ok();
        })
        .await;
    assert_eq!(
        cards(&done)[..2],
        [
            card("Design", "done", json!("ann"), &[], true),
            card("Build", "open", none, &[], false),
        ],
        "{done}"
    );
    host.cancel().await.unwrap();
    s.stop().await;
}
