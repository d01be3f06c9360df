//! The plans of the reads that join deliveries and messages, on a real PostgreSQL
//! whose statistics were taken before the instance had messages: what a new
//! workflow instance meets until autovacuum analyzes again. Each message must be
//! found by a probe of its instance and id, never by a walk of the instance's
//! history with the id as a filter; the send guard's lookups of a delivery must be
//! probes, never a hash of everything the reader acked; an inbox read's marks find
//! its page once.

use crate::messaging::guard::missed_sql;
use crate::messaging::inbox::{Mark, READ};
use crate::runtime::runs::SUMMARY;
use store::sql;

/// Instance 1 with a small history, analyzed; then instance 2 with a long one that
/// the statistics do not know: 300 of its messages delivered to `coder` and open,
/// the rest acked by it, each mentioning it.
const STALE: &str = "
    INSERT INTO messages (workflow_id, id, sender, content, created_at)
         SELECT 1, lpad(i::text, 12, '0'), 'lead', 'hello', 0 FROM generate_series(1, 2000) i;
    INSERT INTO deliveries (workflow_id, recipient, message_id, updated_at)
         SELECT 1, 'coder', lpad(i::text, 12, '0'), 0 FROM generate_series(1, 2000) i;
    INSERT INTO deliveries_done (workflow_id, recipient, message_id, updated_at)
         SELECT 1, 'tester', lpad(i::text, 12, '0'), 0 FROM generate_series(1, 2000) i;
    ANALYZE messages;
    ANALYZE deliveries;
    ANALYZE deliveries_done;
    INSERT INTO messages (workflow_id, id, sender, content, created_at)
         SELECT 2, lpad(i::text, 12, '0'), 'lead', 'hello', 0 FROM generate_series(1, 40000) i;
    INSERT INTO deliveries (workflow_id, recipient, message_id, updated_at)
         SELECT 2, 'coder', lpad(i::text, 12, '0'), 0 FROM generate_series(39701, 40000) i;
    UPDATE messages SET mentions = '[\"coder\"]' WHERE workflow_id = 2;
    INSERT INTO deliveries_done (workflow_id, recipient, message_id, updated_at)
         SELECT 2, 'coder', lpad(i::text, 12, '0'), 0 FROM generate_series(1, 39700) i;";

/// The plan PostgreSQL chooses for `query` with `coder`'s parameters in instance 2:
/// an inbox read's (`guard` false: recipient, time, limit, run) or the send
/// guard's (before the newest id, reader).
async fn plan(store: &store::Store, query: String, guard: bool) -> String {
    store
        .read(move |c| {
            let mut st = c.prepare(&format!("EXPLAIN {query}"))?;
            let n = st.parameter_count();
            let inbox: [&dyn sql::ToSql; 5] = [&2_i64, &"coder", &0_i64, &50_i64, &"run"];
            let scan: [&dyn sql::ToSql; 3] = [&2_i64, &"999999999999", &"coder"];
            let params = if guard { &scan[..n] } else { &inbox[..n] };
            let lines = st
                .query_map(params, |r| r.get::<String>(0))?
                .collect::<sql::Result<Vec<_>>>()?;
            Ok(lines.join("\n"))
        })
        .await
        .expect("explain the read")
}

/// Each read probes messages by instance and id: no join filter, an index condition
/// on the id.
#[tokio::test]
async fn deliveries_find_their_messages_by_id_whatever_the_statistics() {
    let Some(store) = store::testing::fresh_postgres_store() else {
        return;
    };
    store
        .write(|c| Ok(c.execute_batch(STALE)?))
        .await
        .expect("make statistics that do not know instance 2");
    for (name, query) in [("inbox read", READ), ("run summary", SUMMARY)] {
        let plan = plan(&store, query.to_owned(), false).await;
        assert!(
            !plan.contains("Join Filter"),
            "the {name} filters messages by id instead of probing:\n{plan}"
        );
        assert!(
            plan.lines().any(|l| l.contains("Index Cond")
                && l.contains("id = d")
                && l.contains("message_id")),
            "the {name} does not probe messages by id:\n{plan}"
        );
    }
}

/// The send guard looks each delivery up, one probe per message it scans, with
/// statistics old or new: with the instance's messages known, hashing the reader's
/// deliveries looks cheaper than probing, and costs a read of all of them per send.
#[tokio::test]
async fn the_send_guard_probes_deliveries_whatever_the_statistics() {
    let Some(store) = store::testing::fresh_postgres_store() else {
        return;
    };
    for (when, sql) in [("old", STALE), ("new", "ANALYZE")] {
        store
            .write(move |c| Ok(c.execute_batch(sql)?))
            .await
            .expect("make the statistics");
        let plan = plan(&store, missed_sql(), true).await;
        assert!(
            !plan.contains("hashed SubPlan"),
            "with {when} statistics the guard hashes the reader's deliveries:\n{plan}"
        );
    }
}

/// An inbox read's marks find the page once, as its generic plan (the one a cached
/// statement settles on) too, with statistics stale or none at all, and then scan
/// its range alone: its bounds are parameters of the scan, computed before it.
/// `IN (page)` was a semi join, and a join with the page a nested loop, that ran
/// the page again for every open delivery of the member; a range open at the front
/// walked the acked deliveries vacuum had not yet removed.
#[tokio::test]
async fn the_marks_find_the_page_once() {
    for statistics in [STALE, NONE] {
        let Some(store) = store::testing::fresh_postgres_store() else {
            return;
        };
        store
            .write(move |c| Ok(c.execute_batch(statistics)?))
            .await
            .expect("make the statistics");
        for mark in [Mark::Yes, Mark::UnlessBroadcasts] {
            let plan = generic_plan(&store, mark.sql().expect("marks")).await;
            assert!(
                plan.contains("message_id >= $") && plan.contains("message_id <= $"),
                "the marks do not scan the page's range alone:\n{plan}"
            );
            assert!(
                !plan.contains("Semi Join") && !plan.contains("SubPlan"),
                "the marks run the page for each delivery:\n{plan}"
            );
        }
    }
}

/// Statistics taken when the deliveries were empty, then 300 of `coder`'s in
/// instance 2: the planner expects one row where there are hundreds.
const NONE: &str = "
    ANALYZE deliveries;
    INSERT INTO deliveries (workflow_id, recipient, message_id, updated_at)
         SELECT 2, 'coder', lpad(i::text, 12, '0'), 0 FROM generate_series(1, 300) i;";

/// The generic plan PostgreSQL makes for `query` (`?n` parameters), explained with
/// `coder`'s inbox parameters in instance 2.
async fn generic_plan(store: &store::Store, query: String) -> String {
    let query = query.replace('?', "$");
    store
        .write(move |c| {
            c.execute_batch("SET LOCAL plan_cache_mode = force_generic_plan")?;
            c.execute_batch(&format!("PREPARE q AS {query}"))?;
            let mut st = c.prepare("EXPLAIN EXECUTE q(2, 'coder', 0, 50, 'run')")?;
            let lines = st
                .query_map([] as [&dyn sql::ToSql; 0], |r| r.get::<String>(0))?
                .collect::<sql::Result<Vec<_>>>()?;
            c.execute_batch("DEALLOCATE q")?;
            Ok(lines.join("\n"))
        })
        .await
        .expect("explain the statement")
}
