//! Step workflows (pure): a graph of steps, each an agent run with a prompt when
//! its events have happened (`on:`), checked when the YAML is read and moved on
//! by the kernel (`moves`) as steps end and messages and documents come.
//!
//! Each step runs at most once per instance. `X.complete` and `X.failed` name a
//! step by its id, or by its agent: then the nearest step of that agent above the
//! one that waits (so `reviewer, coder on reviewer.complete, reviewer on
//! coder.complete` is a chain, not a loop). A loop has no guard that could end it,
//! so a graph with one is refused, as is a step that can never run.
//!
//! A step may ask its agent for a result of a shape (`result:`, a
//! [`ResultSchema`]); a step after it may wait for a field of that result
//! (`{step: review, result: {verdict: changes_requested}}`: the step completed
//! and its result's `verdict` is `changes_requested`), and a field its step's
//! schema does not have, or a value the field's schema refuses, is refused when
//! the graph is read. A review loop is written as rounds, each step once: review-1,
//! fix-1 on review-1's `changes_requested`, review-2 after fix-1, ..., and a merge
//! step per round on that round's `approved`; the steps of rounds not needed are
//! skipped.

use crate::contracts::TextPattern;
use crate::permissions::glob;
use crate::result_schema::ResultSchema;
use crate::states::StepState;
use results::{check_results, result_event, tests_words};
use serde_json::{Value, json};
use task_event::task_event;

/// The most steps one workflow may have.
pub const MAX_STEPS: usize = 100;
/// The longest step id (its contract is named `step-<id>`, at most 64).
pub const MAX_ID: usize = 59;
/// The longest prompt a step may have as written (filled in, it may grow).
pub const MAX_PROMPT_CHARS: usize = 64 * 1024;

/// The name of a step's contract.
pub fn contract_name(id: &str) -> String {
    format!("step-{id}")
}

/// One event a step waits for.
#[derive(Debug, Clone, PartialEq)]
pub enum On {
    /// The instance started.
    Trigger,
    /// The step of this id ended well.
    Complete(String),
    /// The step of this id failed.
    Failed(String),
    /// A message in the instance's channel (from anyone but the kernel) whose
    /// text matches, from a sender the glob matches.
    Message {
        text: TextPattern,
        from: Option<String>,
    },
    /// A document of the instance written through the kernel, its path matching.
    Document(String),
    /// A task of the instance's board, its title matching the glob, reached the
    /// state (done, unless the step says failed, cancelled or claimed).
    Task {
        title: String,
        state: crate::states::TaskState,
    },
    /// The step of this id ended well with a result whose top-level fields equal
    /// these values (each of them).
    Result {
        step: String,
        fields: Vec<(String, Value)>,
    },
}

impl On {
    /// The step it waits for, if it waits for one.
    pub fn step(&self) -> Option<&str> {
        match self {
            On::Complete(s) | On::Failed(s) | On::Result { step: s, .. } => Some(s),
            _ => None,
        }
    }

    /// Whether it needs its step to complete (not to fail).
    pub fn needs_complete(&self) -> bool {
        matches!(self, On::Complete(_) | On::Result { .. })
    }

    /// Whether a step's `result` meets it (a result event).
    pub fn result_matches(&self, result: &Value) -> bool {
        match self {
            On::Result { fields, .. } => fields.iter().all(|(k, v)| result.get(k) == Some(v)),
            _ => false,
        }
    }

    /// Whether it is met by a message, a document or a task (remembered when it
    /// comes).
    pub fn is_seen(&self) -> bool {
        matches!(self, On::Message { .. } | On::Document(_) | On::Task { .. })
    }

    /// Whether a task titled `title` reaching `state` meets it.
    pub fn task_matches(&self, title: &str, state: crate::states::TaskState) -> bool {
        matches!(self, On::Task { title: g, state: s } if *s == state
            && glob(&g.to_ascii_lowercase(), &title.to_ascii_lowercase()))
    }

    /// Whether a message from `from` with `text` meets it.
    pub fn message_matches(&self, from: &str, text: &str) -> bool {
        match self {
            On::Message {
                text: re,
                from: who,
            } => {
                who.as_deref()
                    .is_none_or(|g| glob(&g.to_ascii_lowercase(), &from.to_ascii_lowercase()))
                    && re.is_match(text)
            }
            _ => false,
        }
    }

    /// Whether a write of the document `file` meets it.
    pub fn document_matches(&self, file: &str) -> bool {
        matches!(self, On::Document(g) if glob(g, file))
    }

    /// As the step's contract keeps it.
    pub fn to_json(&self) -> Value {
        match self {
            On::Trigger => json!("trigger"),
            On::Complete(s) => json!(format!("{s}.complete")),
            On::Failed(s) => json!(format!("{s}.failed")),
            On::Message { text, from: None } => json!({"message": text.as_str()}),
            On::Message {
                text,
                from: Some(f),
            } => json!({"message": text.as_str(), "from": f}),
            On::Document(g) => json!({"document": g}),
            On::Task { title, state } => json!({"task": title, "state": state.as_str()}),
            On::Result { step, fields } => {
                let fields: serde_json::Map<String, Value> = fields.iter().cloned().collect();
                json!({"step": step, "result": fields})
            }
        }
    }

    /// Reads one event as [`to_json`](Self::to_json) writes it (or as a YAML
    /// `on:` item gives it, whose names are not resolved yet).
    pub fn from_json(v: &Value) -> Result<On, String> {
        let shape = "an event: trigger, <step>.complete, <step>.failed, {message: <regex>, from?: <glob>}, \
                     {document: <glob>}, {task: <title glob>, state?: done} or {step: <step>, result: {<field>: <value>}}";
        match v {
            Value::String(s) if s == "trigger" => Ok(On::Trigger),
            Value::String(s) => match s.rsplit_once('.') {
                Some((step, "complete")) if !step.is_empty() => Ok(On::Complete(step.into())),
                Some((step, "failed")) if !step.is_empty() => Ok(On::Failed(step.into())),
                _ => Err(format!("{s:?} is not {shape}")),
            },
            Value::Object(o) if o.contains_key("result") || o.contains_key("step") => {
                result_event(o).map_err(|e| format!("{e}; write {shape}"))
            }
            Value::Object(o) if o.contains_key("task") => {
                task_event(o).map_err(|e| format!("{e}; write {shape}"))
            }
            Value::Object(o) => {
                if let Some(k) = o
                    .keys()
                    .find(|k| !["message", "from", "document"].contains(&k.as_str()))
                {
                    return Err(format!("unknown key {k:?}; write {shape}"));
                }
                let text = |k: &str| match o.get(k) {
                    None | Some(Value::Null) => Ok(None),
                    Some(Value::String(s)) if !s.is_empty() => Ok(Some(s.clone())),
                    Some(_) => Err(format!("{k} must be a non-empty string")),
                };
                match (text("message")?, text("document")?, text("from")?) {
                    (Some(m), None, from) => Ok(On::Message {
                        text: TextPattern::new(&m).map_err(|e| format!("message: {e}"))?,
                        from,
                    }),
                    (None, Some(d), None) => Ok(On::Document(d)),
                    _ => Err(format!(
                        "write one of {{message: ..}} or {{document: ..}}; {shape}"
                    )),
                }
            }
            _ => Err(format!("write {shape}")),
        }
    }

    /// In words: "the workflow starts", "step review completes", ...
    pub fn words(&self) -> String {
        match self {
            On::Trigger => "the workflow starts".into(),
            On::Complete(s) => format!("step {s} completes"),
            On::Failed(s) => format!("step {s} fails"),
            On::Message { text, from } => format!(
                "a message{} matches /{text}/",
                from.as_ref()
                    .map(|f| format!(" from {f}"))
                    .unwrap_or_default()
            ),
            On::Document(g) => format!("a document matching {g} is written"),
            On::Task { title, state } => format!("a task matching {title} is {state}"),
            On::Result { step, fields } => {
                format!("step {step} completes with {}", tests_words(fields))
            }
        }
    }
}

/// One step, its names resolved.
#[derive(Debug, Clone, PartialEq)]
pub struct StepDef {
    pub id: String,
    pub agent: String,
    /// All of them (a join); at least one.
    pub on: Vec<On>,
    /// Filled in when the instance starts, but for `${{ trigger }}`,
    /// `${{ previous.output }}` and `${{ steps.<id> }}`, filled in when it runs.
    pub prompt: String,
    /// The result its agent must submit (result_submit), if it asks for one.
    pub result: Option<ResultSchema>,
}

/// The names a step's prompt may use that have a value only when it runs.
pub fn is_step_name(name: &str) -> bool {
    name == "trigger" || name == "previous.output" || name.starts_with("steps.")
}

/// The event list in words: "the workflow starts", "step a completes and step b fails".
pub fn on_words(on: &[On]) -> String {
    on.iter().map(On::words).collect::<Vec<_>>().join(" and ")
}

/// A mistake in a step graph: the step (index) and, if it is one of its events,
/// which.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GraphError {
    pub step: usize,
    pub on: Option<usize>,
    pub message: String,
    pub fix: String,
}

/// A step as written: `on` names steps by id or by agent.
#[derive(Debug, Clone)]
pub struct Written {
    pub id: Option<String>,
    pub agent: String,
    pub on: Vec<On>,
    pub prompt: String,
    pub result: Option<ResultSchema>,
}

/// Gives every step its id (its own, else its agent's name when the agent has one
/// step, else `<agent>-<n>` by order), resolves the names its events use, and
/// checks the graph: no loop, every step able to run.
pub fn resolve(written: Vec<Written>) -> Result<Vec<StepDef>, GraphError> {
    let ids = ids(&written)?;
    let mut out: Vec<StepDef> = Vec::with_capacity(written.len());
    for (i, w) in written.into_iter().enumerate() {
        let mut on = Vec::with_capacity(w.on.len());
        for (k, e) in w.on.into_iter().enumerate() {
            on.push(match e {
                On::Complete(n) => On::Complete(named(&ids, &out, i, k, &n, &w.agent)?),
                On::Failed(n) => On::Failed(named(&ids, &out, i, k, &n, &w.agent)?),
                On::Result { step, fields } => On::Result {
                    step: named(&ids, &out, i, k, &step, &w.agent)?,
                    fields,
                },
                e => e,
            });
        }
        out.push(StepDef {
            id: ids[i].clone(),
            agent: w.agent,
            on,
            prompt: w.prompt,
            result: w.result,
        });
    }
    check(&out)?;
    check_results(&out)?;
    Ok(out)
}

fn ids(written: &[Written]) -> Result<Vec<String>, GraphError> {
    let mut ids: Vec<String> = Vec::with_capacity(written.len());
    for (i, w) in written.iter().enumerate() {
        let id = match &w.id {
            Some(id) => id.clone(),
            None => {
                let of_agent = written.iter().filter(|x| x.agent == w.agent).count();
                if of_agent == 1 {
                    w.agent.clone()
                } else {
                    let n = written[..=i].iter().filter(|x| x.agent == w.agent).count();
                    format!("{}-{n}", w.agent)
                }
            }
        };
        if id.len() > MAX_ID {
            return Err(GraphError {
                step: i,
                on: None,
                message: format!("the step id {id:?} is longer than {MAX_ID} characters"),
                fix: "give the step a shorter `id:`".into(),
            });
        }
        if ids.contains(&id) {
            return Err(GraphError {
                step: i,
                on: None,
                message: format!("two steps have the id {id:?}"),
                fix: "give one of them its own `id:`".into(),
            });
        }
        ids.push(id);
    }
    Ok(ids)
}

/// The id of the step `name` means in event `k` of step `i`: a step's id, else
/// the nearest step of the agent `name` above step `i`.
fn named(
    ids: &[String],
    above: &[StepDef],
    i: usize,
    k: usize,
    name: &str,
    own_agent: &str,
) -> Result<String, GraphError> {
    let err = |message: String, fix: String| GraphError {
        step: i,
        on: Some(k),
        message,
        fix,
    };
    if ids.iter().any(|id| id == name) {
        if ids[i] == name {
            return Err(err(
                format!("the step waits for itself ({name:?})"),
                "wait for a step above it".into(),
            ));
        }
        return Ok(name.to_owned());
    }
    if let Some(s) = above.iter().rev().find(|s| s.agent == name) {
        return Ok(s.id.clone());
    }
    let fix = format!(
        "name a step above this one by its id or its agent; ids: {}",
        ids.join(", ")
    );
    if name == own_agent {
        return Err(err(format!("{name} has no step above this one"), fix));
    }
    Err(err(
        format!("no step has the id or the agent {name:?} above this one"),
        fix,
    ))
}

/// No loop, and every step can run.
fn check(steps: &[StepDef]) -> Result<(), GraphError> {
    let index = |id: &str| steps.iter().position(|s| s.id == id).expect("resolved");
    // 0 unvisited, 1 on the path, 2 done.
    let mut mark = vec![0u8; steps.len()];
    fn visit(
        i: usize,
        steps: &[StepDef],
        index: &dyn Fn(&str) -> usize,
        mark: &mut [u8],
        path: &mut Vec<usize>,
    ) -> Result<(), GraphError> {
        mark[i] = 1;
        path.push(i);
        for (k, e) in steps[i].on.iter().enumerate() {
            let Some(j) = e.step().map(index) else {
                continue;
            };
            if mark[j] == 1 {
                let from = path.iter().position(|&p| p == j).expect("on the path");
                let mut names: Vec<&str> =
                    path[from..].iter().map(|&p| steps[p].id.as_str()).collect();
                names.push(&steps[j].id);
                return Err(GraphError {
                    step: i,
                    on: Some(k),
                    message: format!(
                        "the steps {} wait for each other, so none of them can start (a loop has no guard \
                         that would end it)",
                        names.join(" -> ")
                    ),
                    fix: "make each step wait for steps above it; for another round, add steps (review, fix, \
                          verify)"
                        .into(),
                });
            }
            if mark[j] == 0 {
                visit(j, steps, index, mark, path)?;
            }
        }
        path.pop();
        mark[i] = 2;
        Ok(())
    }
    for i in 0..steps.len() {
        if mark[i] == 0 {
            visit(i, steps, &index, &mut mark, &mut Vec::new())?;
        }
    }
    // Can each run? In an order where what a step waits for comes first.
    let mut can: Vec<Option<bool>> = vec![None; steps.len()];
    while can.iter().any(Option::is_none) {
        for i in 0..steps.len() {
            if can[i].is_some() {
                continue;
            }
            let deps: Vec<usize> = steps[i]
                .on
                .iter()
                .filter_map(|e| e.step().map(index))
                .collect();
            if deps.iter().any(|&j| can[j].is_none()) {
                continue;
            }
            if let Some((k, message)) = why_never(steps, i, &can, &index) {
                return Err(GraphError {
                    step: i,
                    on: Some(k),
                    message,
                    fix: "wait for events that can all happen".into(),
                });
            }
            can[i] = Some(true);
        }
    }
    Ok(())
}

/// Why step `i` can never run, if it cannot: the event at fault and the reason
/// (a step it needs never runs, or it needs one step both to complete and to
/// fail, directly or through the steps it waits for).
fn why_never(
    steps: &[StepDef],
    i: usize,
    can: &[Option<bool>],
    index: &dyn Fn(&str) -> usize,
) -> Option<(usize, String)> {
    for (k, e) in steps[i].on.iter().enumerate() {
        let Some(j) = e.step().map(index) else {
            continue;
        };
        if can[j] == Some(false) {
            return Some((
                k,
                format!("this step can never run: step {} never does", steps[j].id),
            ));
        }
    }
    // (step, completes?, through event k)
    let mut needs: Vec<(usize, bool, usize)> = Vec::new();
    for (k, e) in steps[i].on.iter().enumerate() {
        if let Some(j) = e.step().map(index) {
            needs.push((j, e.needs_complete(), k));
            for (x, done) in outcomes_needed(steps, j, index) {
                needs.push((x, done, k));
            }
        }
    }
    for &(x, done, _) in &needs {
        if !done {
            continue;
        }
        if let Some(&(_, _, k)) = needs.iter().find(|&&(y, d, _)| y == x && !d) {
            return Some((
                k,
                format!(
                    "this step can never run: it needs step {} to complete and to fail",
                    steps[x].id
                ),
            ));
        }
    }
    None
}

/// Every (step, completes?) that step `j` needs before it can run, transitively.
fn outcomes_needed(
    steps: &[StepDef],
    j: usize,
    index: &dyn Fn(&str) -> usize,
) -> Vec<(usize, bool)> {
    let mut out = Vec::new();
    let mut todo = vec![j];
    while let Some(s) = todo.pop() {
        for e in &steps[s].on {
            if let Some(x) = e.step().map(index) {
                let need = (x, e.needs_complete());
                if !out.contains(&need) {
                    out.push(need);
                    todo.push(x);
                }
            }
        }
    }
    out
}

/// What the kernel is to do next with a graph.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Move {
    /// Post step `i`'s prompt to its agent.
    Start(usize),
    /// Step `i` can no longer run, and why.
    Skip(usize, String),
}

/// The moves a graph's states call for: waiting steps whose events all happened
/// start; those one of whose events can no longer happen are skipped (and so on,
/// down the graph). `seen[i]` holds the indexes of step `i`'s message and
/// document events that happened.
pub fn moves(steps: &[StepDef], states: &[StepState], seen: &[Vec<usize>]) -> Vec<Move> {
    let index = |id: &str| steps.iter().position(|s| s.id == id);
    let mut states = states.to_vec();
    let mut out = Vec::new();
    loop {
        let mut changed = false;
        for i in 0..steps.len() {
            if states[i] != StepState::Waiting {
                continue;
            }
            let mut ready = true;
            let mut never: Option<String> = None;
            for (k, e) in steps[i].on.iter().enumerate() {
                let other = e.step().and_then(index).map(|j| (j, states[j]));
                match (e, other) {
                    (On::Trigger, _) => {}
                    (On::Result { .. }, Some((_, StepState::Done)))
                        if seen.get(i).is_some_and(|v| v.contains(&k)) => {}
                    (On::Result { step, fields }, Some((_, StepState::Done))) => {
                        never = Some(format!(
                            "step {step} completed with a result that does not have {}",
                            tests_words(fields)
                        ));
                    }
                    (On::Complete(_), Some((_, StepState::Done)))
                    | (On::Failed(_), Some((_, StepState::Failed))) => {}
                    (
                        On::Complete(s) | On::Failed(s) | On::Result { step: s, .. },
                        Some((_, st)),
                    ) if st.is_over() => {
                        never = Some(format!("step {s} {}", st.as_str()));
                    }
                    (On::Complete(_) | On::Failed(_) | On::Result { .. }, Some(_)) => ready = false,
                    (On::Complete(s) | On::Failed(s) | On::Result { step: s, .. }, None) => {
                        never = Some(format!("step {s} is not in the workflow"));
                    }
                    _ => ready &= seen.get(i).is_some_and(|v| v.contains(&k)),
                }
            }
            if let Some(why) = never {
                states[i] = StepState::Skipped;
                out.push(Move::Skip(i, why));
                changed = true;
            } else if ready {
                states[i] = StepState::Running;
                out.push(Move::Start(i));
            }
        }
        if !changed {
            return out;
        }
    }
}

/// The failed steps no step that ran (or may still run) waits for (`X.failed`):
/// the instance fails with them.
pub fn unhandled_failures(steps: &[StepDef], states: &[StepState]) -> Vec<usize> {
    (0..steps.len())
        .filter(|&i| states[i] == StepState::Failed)
        .filter(|&i| {
            // A handler that was skipped handled nothing.
            !steps.iter().zip(states).any(|(s, st)| {
                *st != StepState::Skipped
                    && s.on
                        .iter()
                        .any(|e| matches!(e, On::Failed(x) if *x == steps[i].id))
            })
        })
        .collect()
}

mod results;
mod task_event;
#[cfg(test)]
mod tests;
