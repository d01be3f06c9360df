//! The plans of the reads that join deliveries to their messages, on a real
//! PostgreSQL whose statistics were taken before the instance had messages: what a
//! new workflow instance meets until autovacuum analyzes again. Each message must be
//! found by a probe of its instance and id, never by a walk of the instance's
//! history with the id as a filter.

use crate::messaging::inbox::READ;
use crate::runtime::runs::SUMMARY;
use store::sql;

/// Instance 1 with a small history, analyzed; then instance 2 with a long one that
/// the statistics do not know, 300 messages of it delivered to `coder`.
const STALE: &str = "
    INSERT INTO messages (workflow_id, id, sender, content, created_at)
         SELECT 1, lpad(i::text, 12, '0'), 'lead', 'hello', 0 FROM generate_series(1, 2000) i;
    INSERT INTO deliveries (workflow_id, recipient, message_id, updated_at)
         SELECT 1, 'coder', lpad(i::text, 12, '0'), 0 FROM generate_series(1, 2000) i;
    ANALYZE messages;
    ANALYZE deliveries;
    INSERT INTO messages (workflow_id, id, sender, content, created_at)
         SELECT 2, lpad(i::text, 12, '0'), 'lead', 'hello', 0 FROM generate_series(1, 40000) i;
    INSERT INTO deliveries (workflow_id, recipient, message_id, updated_at)
         SELECT 2, 'coder', lpad(i::text, 12, '0'), 0 FROM generate_series(39701, 40000) i;";

/// The plan PostgreSQL chooses for `query` with `coder`'s parameters in instance 2.
async fn plan(store: &store::Store, query: &'static str) -> String {
    store
        .read(move |c| {
            let mut st = c.prepare(&format!("EXPLAIN {query}"))?;
            let n = st.parameter_count();
            let params: [&dyn sql::ToSql; 5] = [&2_i64, &"coder", &0_i64, &50_i64, &"run"];
            let lines = st
                .query_map(&params[..n], |r| r.get::<String>(0))?
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
        let plan = plan(&store, query).await;
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
