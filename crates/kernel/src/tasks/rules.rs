//! The board's rules that need no store: who may move a task where, who may take
//! it, a plan's local names resolved to an order with its cycles refused, and the
//! limits on what a task holds.

use domain::names::LEAD;
use domain::states::TaskState;
use std::collections::HashMap;

pub const MAX_TITLE_CHARS: usize = 200;
pub const MAX_BODY_CHARS: usize = 20_000;
pub const MAX_NOTE_CHARS: usize = 2_000;
pub const MAX_PLAN: usize = 100;
pub const MAX_DEPS: usize = 50;
pub const MAX_LABELS: usize = 10;
pub const MAX_LABEL_CHARS: usize = 50;
pub const MAX_LINKS: usize = 20;
pub const MAX_LINK_CHARS: usize = 500;
/// A result or result schema, as JSON text.
pub const MAX_JSON_BYTES: usize = 64 * 1024;
/// History lines a task keeps: a note (or an edit) past them is refused.
pub const MAX_HISTORY: i64 = 200;
/// Tasks of an instance not done, failed or cancelled: task_add past them is refused.
pub const MAX_LIVE_TASKS: i64 = 2_000;
/// Claims an agent holds at once in one instance (the lead is not limited).
pub const MAX_CLAIMS: i64 = 1;

/// Who may take a task: anyone, one member by name, or the members with a role
/// (their role in the organisation the instance belongs to).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Assign {
    Any,
    Name(String),
    Role(String),
}

impl Assign {
    /// Reads `any`, `role:<role>` or a member's name (`@` optional).
    pub fn parse(text: Option<&str>) -> Result<Self, String> {
        let t = text.map(str::trim).unwrap_or("");
        if t.is_empty() || t.eq_ignore_ascii_case("any") {
            return Ok(Self::Any);
        }
        if let Some(role) = t.strip_prefix("role:") {
            let role = role.trim();
            if role.is_empty() || role.chars().count() > MAX_LABEL_CHARS {
                return Err(format!(
                    "assign: {t:?} names no role; use role:<role> (at most {MAX_LABEL_CHARS} characters)"
                ));
            }
            return Ok(Self::Role(role.to_owned()));
        }
        let name = t.strip_prefix('@').unwrap_or(t);
        if name != LEAD {
            domain::names::check_agent_name(name)
                .map_err(|e| format!("assign: {e}; use any, an agent's name or role:<role>"))?;
        }
        Ok(Self::Name(name.to_owned()))
    }

    /// The text the store keeps (NULL for any).
    pub fn stored(&self) -> Option<String> {
        match self {
            Self::Any => None,
            Self::Name(n) => Some(n.clone()),
            Self::Role(r) => Some(format!("role:{r}")),
        }
    }

    /// Whether `who` (with `role` in the instance's organisation) may take it.
    pub fn admits(&self, who: &str, role: Option<&str>) -> bool {
        match self {
            Self::Any => true,
            Self::Name(n) => n.eq_ignore_ascii_case(who),
            Self::Role(r) => role.is_some_and(|x| x.eq_ignore_ascii_case(r)),
        }
    }
}

/// How the caller stands to a task.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Standing {
    Lead,
    Owner,
    Other,
}

/// Whether `by` may move a task from `from` to `to` (claims go through
/// task_claim): Err says why not and what to do instead.
pub fn transition(id: i64, from: TaskState, to: TaskState, by: Standing) -> Result<(), String> {
    use TaskState::*;
    if from.is_final() {
        return Err(format!(
            "task {id} is {from} already: done, failed and cancelled are final (add a new task)"
        ));
    }
    match (from, to, by) {
        (_, Claimed, _) => Err(format!("state: take task {id} with task_claim")),
        (Open, Open, _) => Err(format!("task {id} is open already")),
        (_, Cancelled, Standing::Lead) => Ok(()),
        (_, Cancelled, _) => Err(format!("state: only the lead cancels task {id}")),
        (Claimed, _, Standing::Lead | Standing::Owner) => Ok(()),
        (Claimed, _, Standing::Other) => Err(format!(
            "task {id} is claimed by another member: only its owner or the lead moves it"
        )),
        (Open, Done | Failed, Standing::Lead) => Ok(()),
        (Open, _, _) => Err(format!(
            "task {id} is open: claim it with task_claim before you set it {to}"
        )),
        (Done | Failed | Cancelled, ..) => unreachable!("final states return above"),
    }
}

/// The standing of member `me` (the lead when `lead`) to a task owned by `owner`.
pub fn standing(me: &str, lead: bool, owner: Option<&str>) -> Standing {
    if lead {
        Standing::Lead
    } else if owner.is_some_and(|o| o.eq_ignore_ascii_case(me)) {
        Standing::Owner
    } else {
        Standing::Other
    }
}

/// A dependency as given: a task's id, or the local name of a task of the same plan.
#[derive(Debug, Clone, PartialEq, Eq, serde::Deserialize, schemars::JsonSchema)]
#[serde(untagged)]
pub enum Dep {
    Id(i64),
    Name(String),
}

/// A plan's dependencies resolved: for each task (in the order given), the
/// positions of the plan's tasks it waits for and the ids of existing ones.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Resolved {
    pub local: Vec<Vec<usize>>,
    pub existing: Vec<Vec<i64>>,
}

/// Resolves each task's `deps` (names are the plan's `names`), refusing unknown
/// and repeated names, a task waiting for itself, and cycles (naming one).
pub fn resolve(names: &[Option<String>], deps: &[Vec<Dep>]) -> Result<Resolved, String> {
    let mut at: HashMap<&str, usize> = HashMap::new();
    for (i, n) in names.iter().enumerate() {
        if let Some(n) = n.as_deref()
            && at.insert(n, i).is_some()
        {
            return Err(format!(
                "plan[{i}].name: {n:?} is used twice; names must differ"
            ));
        }
    }
    let mut out = Resolved::default();
    for (i, ds) in deps.iter().enumerate() {
        let (mut local, mut existing) = (Vec::new(), Vec::new());
        for d in ds {
            match d {
                Dep::Id(id) => existing.push(*id),
                Dep::Name(n) => match at.get(n.as_str()) {
                    Some(&j) if j == i => {
                        return Err(format!("plan[{i}].deps: the task waits for itself"));
                    }
                    Some(&j) => local.push(j),
                    None => match n.trim().trim_start_matches('#').parse::<i64>() {
                        Ok(id) => existing.push(id),
                        Err(_) => {
                            return Err(format!(
                                "plan[{i}].deps: {n:?} is no task of this plan; give a task's id \
                                 or the name of a task in the plan"
                            ));
                        }
                    },
                },
            }
        }
        local.sort_unstable();
        local.dedup();
        existing.sort_unstable();
        existing.dedup();
        out.local.push(local);
        out.existing.push(existing);
    }
    if let Some(cycle) = find_cycle(&out.local) {
        let named: Vec<String> = cycle
            .iter()
            .map(|&i| names[i].clone().unwrap_or_else(|| format!("plan[{i}]")))
            .collect();
        return Err(format!(
            "plan: the dependencies make a cycle ({}); a task cannot wait for itself",
            named.join(" -> ")
        ));
    }
    Ok(out)
}

/// A cycle among `edges` (task -> the tasks it waits for), as the positions on it.
fn find_cycle(edges: &[Vec<usize>]) -> Option<Vec<usize>> {
    // 0 unvisited, 1 on the current path, 2 done.
    let mut mark = vec![0u8; edges.len()];
    let mut path = Vec::new();
    fn visit(i: usize, e: &[Vec<usize>], m: &mut [u8], p: &mut Vec<usize>) -> Option<Vec<usize>> {
        m[i] = 1;
        p.push(i);
        for &j in &e[i] {
            if m[j] == 1 {
                let from = p.iter().position(|&x| x == j).unwrap_or(0);
                let mut c = p[from..].to_vec();
                c.push(j);
                return Some(c);
            }
            if m[j] == 0
                && let Some(c) = visit(j, e, m, p)
            {
                return Some(c);
            }
        }
        p.pop();
        m[i] = 2;
        None
    }
    (0..edges.len()).find_map(|i| {
        if mark[i] == 0 {
            visit(i, edges, &mut mark, &mut path)
        } else {
            None
        }
    })
}

/// Whether `result` fits `schema` (the result schema subset): Err names each
/// misfit by its field, for the model to fix and submit again.
pub fn check_result(schema: &serde_json::Value, result: &serde_json::Value) -> Result<(), String> {
    domain::result_schema::check_result(schema, result)
}

/// Whether `schema` may be a task's result schema (task_add): the subset's own
/// check, naming the keyword and where it is.
pub fn check_schema(schema: &serde_json::Value) -> Result<(), String> {
    domain::result_schema::ResultSchema::parse(schema)
        .map(|_| ())
        .map_err(|e| format!("result_schema: {e}"))
}

/// Checks a text field's length: Err names the field and its limit.
pub fn within(field: &str, text: &str, max: usize) -> Result<(), String> {
    if text.chars().count() > max {
        return Err(format!("{field}: at most {max} characters"));
    }
    Ok(())
}

/// Checks labels (or links): how many, and each one's length.
pub fn check_list(
    field: &str,
    items: &[String],
    (count, chars): (usize, usize),
) -> Result<(), String> {
    if items.len() > count {
        return Err(format!("{field}: at most {count}"));
    }
    for (i, s) in items.iter().enumerate() {
        if s.trim().is_empty() {
            return Err(format!("{field}[{i}]: empty; leave it out"));
        }
        within(&format!("{field}[{i}]"), s, chars)?;
    }
    Ok(())
}

/// A JSON value's text, refused past [`MAX_JSON_BYTES`].
pub fn json_text(field: &str, v: &serde_json::Value) -> Result<String, String> {
    let t = v.to_string();
    if t.len() > MAX_JSON_BYTES {
        return Err(format!(
            "{field}: at most {MAX_JSON_BYTES} bytes of JSON; put the rest in a document and link it"
        ));
    }
    Ok(t)
}
