//! Placement: which live node runs an agent, by name or by labels, when it is
//! made, moved by hand or given labels (see [`domain::placement`]).

use domain::error::Result;
use domain::placement::{self, Placement};

use store::sql;

/// Where a new agent runs: the node `wanted` names (it must be alive), else the
/// alive node with the fewest agents among those with the labels it asks (this
/// one, `me`, on a tie). Inside the write that registers the agent, so two
/// placements at once see each other.
pub(crate) fn place_tx(
    c: &sql::Connection,
    me: &str,
    wanted: Option<&Placement>,
) -> Result<String> {
    let needed = match wanted {
        Some(Placement::Node(w)) => {
            require_live_tx(
                c,
                w,
                "or leave node out to place the agent on the least loaded",
            )?;
            return Ok(w.clone());
        }
        Some(Placement::Labels(l)) => placement::to_text(l),
        None => String::new(),
    };
    let now = c.now_ms()?;
    let live: Vec<(String, String)> = c
        .prepare(
            "SELECT n.name, n.labels FROM nodes n WHERE n.heartbeat_at + n.lease_ms >= ?2
              ORDER BY (SELECT count(*) FROM agents a WHERE a.node = n.name), n.name <> ?1, n.name",
        )?
        .query_map(sql::params![me, now], |r| Ok((r.get(0)?, r.get(1)?)))?
        .collect::<sql::Result<_>>()?;
    if let Some((name, _)) = live.iter().find(|(_, l)| placement::satisfies(l, &needed)) {
        return Ok(name.clone());
    }
    if needed.is_empty() {
        return Ok(me.to_owned());
    }
    Err(no_node_with(&needed, &live))
}

/// The error of labels no live node has, listing what each offers.
fn no_node_with(needed: &str, live: &[(String, String)]) -> domain::error::Error {
    let offers: Vec<String> = live
        .iter()
        .map(|(n, l)| format!("{n} [{}]", placement::from_text(l).join(", ")))
        .collect();
    domain::error::Error::invalid(format!(
        "node.labels: no live node has all of [{}]; live nodes: {} (start a node with --labels, \
         or ask for fewer labels)",
        placement::from_text(needed).join(", "),
        offers.join(", ")
    ))
}

/// Refuses a `node` that is not a live node of this store, naming the live ones
/// and `fix` (what the caller's user can do instead).
pub(crate) fn require_live_tx(c: &sql::Connection, node: &str, fix: &str) -> Result<()> {
    if is_live_tx(c, node)? {
        return Ok(());
    }
    let now = c.now_ms()?;
    let names: Vec<String> = c
        .prepare("SELECT name FROM nodes WHERE heartbeat_at + lease_ms >= ?1 ORDER BY name")?
        .query_map([now], |r| r.get(0))?
        .collect::<sql::Result<_>>()?;
    Err(domain::error::Error::invalid(format!(
        "node: {node:?} is not a live node of this store; live nodes: {} ({fix})",
        names.join(", ")
    )))
}

/// Leases agent `id` to the node `to` names, or (labels) to the least loaded live
/// node with them, in one write: it has a worker, the node is live and has the
/// agent's labels, and no run of it is in progress (the run's own write checks
/// the lease, so a run that starts on the old node after this commits is refused
/// there). Labels given become the agent's; its node changes only when it lacks
/// them. The node it left, if it moved.
pub(crate) fn move_tx(
    c: &sql::Connection,
    id: i64,
    name: &str,
    to: &Placement,
) -> Result<Option<String>> {
    let (had, running, needed): (Option<String>, bool, String) = c.query_row(
        "SELECT node, EXISTS (SELECT 1 FROM runs WHERE agent_id = ?1 AND status = 'running'), labels
           FROM agents WHERE id = ?1",
        [id],
        |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
    )?;
    let Some(had) = had else {
        return Err(domain::error::Error::invalid(format!(
            "{name} has no worker (an agent_join agent runs where its client is): it has no node to move"
        )));
    };
    let node = match to {
        Placement::Node(n) => {
            require_live_tx(c, n, "move it to one of them")?;
            let offered = labels_of_tx(c, n)?;
            if !placement::satisfies(&offered, &needed) {
                return Err(domain::error::Error::invalid(format!(
                    "node: {n} does not have {name}'s labels [{}] (it has [{}]): choose a node \
                     with them, or change them with node: {{labels: [..]}}",
                    placement::from_text(&needed).join(", "),
                    placement::from_text(&offered).join(", ")
                )));
            }
            n.clone()
        }
        Placement::Labels(l) => {
            let needed = placement::to_text(l);
            c.execute(
                "UPDATE agents SET labels = ?2 WHERE id = ?1",
                sql::params![id, needed],
            )?;
            match placement::satisfies(&labels_of_tx(c, &had)?, &needed) && is_live_tx(c, &had)? {
                true => had.clone(),
                false => place_tx(c, &had, Some(to))?,
            }
        }
    };
    if had == node {
        return Ok(None);
    }
    if running {
        return Err(domain::error::Error::conflict(format!(
            "{name} is running on {had}: move it when the run has ended (agent_info), or pause it first"
        )));
    }
    c.execute(
        "UPDATE agents SET node = ?2 WHERE id = ?1",
        sql::params![id, node],
    )?;
    Ok(Some(had))
}

/// The labels node `name` offers (stored text; "" for a node not in the table).
pub(crate) fn labels_of_tx(c: &sql::Connection, name: &str) -> Result<String> {
    Ok(sql::OptionalExtension::optional(c.query_row(
        "SELECT labels FROM nodes WHERE name = ?1",
        [name],
        |r| r.get(0),
    ))?
    .unwrap_or_default())
}

fn is_live_tx(c: &sql::Connection, name: &str) -> Result<bool> {
    let now = c.now_ms()?;
    Ok(c.query_row(
        "SELECT EXISTS (SELECT 1 FROM nodes WHERE name = ?1 AND heartbeat_at + lease_ms >= ?2)",
        sql::params![name, now],
        |r| r.get(0),
    )?)
}

/// A worktree agent cannot move: its worktree is in its node's data dir.
pub(crate) fn stays_with_worktree(name: &str, node: Option<&str>) -> domain::error::Error {
    domain::error::Error::invalid(format!(
        "{name} works in a git worktree in its node's data dir ({}): it cannot move; make it \
         shared first (agent_update workspace: \"shared\", its branch is kept)",
        node.unwrap_or("?")
    ))
}
