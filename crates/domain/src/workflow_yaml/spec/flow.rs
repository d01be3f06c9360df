//! `trigger:` and `steps:`: a step workflow, whose agents run in the order the
//! graph of their steps gives (see [`crate::steps`]), not as mentions route them.

use super::*;
use crate::result_schema::ResultSchema;
use crate::steps::{self, GraphError, On, StepDef, Written};

const STEP_KEYS: &[&str] = &["id", "agent", "on", "prompt", "action", "result"];
const ON_EXAMPLE: &str = "on: trigger, on: reviewer.complete, on: [a.complete, b.complete], \
                          on: {message: \"LGTM\"}, on: {document: \"reports/*.md\"} \
                          or on: {step: review, result: {verdict: approved}}";

impl Doc<'_> {
    /// `kickoff:` the first message, its `${{ }}` checked against what is known.
    pub(super) fn kickoff(
        &self,
        given: Option<(usize, &Node)>,
        scope: &KnownNames,
    ) -> Result<Option<String>, SpecError> {
        match given {
            Some((_, Node::Null)) | None => Ok(None),
            Some((i, n)) => {
                let path = [Step::Entry(i)];
                let k = self.text(n, &path, "\"@alice start\"")?;
                self.check_refs(k, &path, scope)?;
                Ok(Some(k.to_owned()))
            }
        }
    }

    /// `trigger:` and `steps:` (a step workflow, which has no kickoff).
    pub(super) fn flow(
        &self,
        trigger: Option<(usize, &Node)>,
        steps: Option<(usize, &Node)>,
        kickoff: Option<(usize, &Node)>,
        agents: &[&str],
        scope: &KnownNames,
    ) -> Result<(Option<String>, Vec<crate::steps::StepDef>), SpecError> {
        let Some((si, sn)) = steps else {
            if let Some((i, _)) = trigger {
                return Err(self.err(
                    &[Step::Key(i)],
                    "`trigger` starts a step workflow, and there are no `steps`",
                    "add `steps:`, or write the first message as `kickoff:`",
                ));
            }
            return Ok((None, Vec::new()));
        };
        if let Some((i, n)) = kickoff
            && *n != Node::Null
        {
            return Err(self.err(
                &[Step::Key(i)],
                "a step workflow starts its steps itself; it has no kickoff",
                "write the text the steps start from as `trigger:` (their prompts read it as ${{ trigger }})",
            ));
        }
        let trigger = match trigger {
            Some((_, Node::Null)) | None => None,
            Some((i, n)) => {
                let path = [Step::Entry(i)];
                let t = self.text(n, &path, "\"Review pull request ${{ params.pr }}\"")?;
                self.check_refs(t, &path, scope)?;
                Some(t.to_owned())
            }
        };
        Ok((trigger, self.steps(sn, si, agents, scope)?))
    }

    /// A workflow without `agents:` whose steps name them (seed 001 writes it so):
    /// each agent a step names, in order, with every setting at its default (the
    /// kernel's default backend), and a warning saying so. Without steps naming
    /// agents, `agents:` is missing.
    pub(super) fn step_agents(
        &self,
        steps: Option<(usize, &Node)>,
        scope: &KnownNames,
    ) -> Result<(Vec<AgentDef>, Vec<String>), SpecError> {
        let mut names: Vec<(&str, Vec<Step>)> = Vec::new();
        if let Some((si, Node::Seq(items))) = steps {
            for (j, item) in items.iter().enumerate() {
                if let Some((k, Node::Str(name))) = item.entry("agent")
                    && !names.iter().any(|(n, _)| n == name)
                {
                    names.push((name, vec![Step::Entry(si), Step::Item(j), Step::Entry(k)]));
                }
            }
        }
        if names.is_empty() {
            return Err(self.err(
                &[],
                "the workflow has no `agents`",
                "add `agents:` with at least one agent, e.g. agents: { alice: { backend: claude } }",
            ));
        }
        let mut agents = Vec::with_capacity(names.len());
        for (name, at) in &names {
            crate::names::check_agent_name(name)
                .map_err(|e| self.err(at, e.to_string(), "rename the agent"))?;
            agents.push(self.agent(name, &Node::Map(Vec::new()), at, at, scope)?);
        }
        let listed: Vec<&str> = names.iter().map(|(n, _)| *n).collect();
        let warning = defaulted(&listed, &agents[0].backend);
        Ok((agents, vec![warning]))
    }

    /// `steps:` (at entry `i`), checked against the agents and the names a prompt
    /// may use; prompts stay raw.
    pub(super) fn steps(
        &self,
        n: &Node,
        i: usize,
        agents: &[&str],
        scope: &KnownNames,
    ) -> Result<Vec<StepDef>, SpecError> {
        let path = [Step::Entry(i)];
        let items = self.list(
            n,
            &path,
            "steps must be a list",
            "write steps: [ { agent: reviewer, on: trigger, prompt: \"Review it\" } ]",
        )?;
        if items.is_empty() {
            return Err(self.err(
                &path,
                "steps is empty",
                "add at least one step, or remove `steps:`",
            ));
        }
        if items.len() > steps::MAX_STEPS {
            return Err(self.err(
                &path,
                format!("{} steps; at most {}", items.len(), steps::MAX_STEPS),
                "split the workflow",
            ));
        }
        let mut written = Vec::with_capacity(items.len());
        for (j, item) in items.iter().enumerate() {
            written.push(self.step(item, &with(&path, Step::Item(j)), agents)?);
        }
        let ids = ids_of(&written);
        let prompt_scope = KnownNames {
            outputs: scope.outputs.clone(),
            params: scope.params.clone(),
            steps: Some(ids.iter().map(String::as_str).collect()),
        };
        for (j, item) in items.iter().enumerate() {
            let (k, _) = prompt_entry(item).expect("checked");
            let at = [Step::Entry(i), Step::Item(j), Step::Entry(k)];
            self.check_refs(&written[j].prompt, &at, &prompt_scope)?;
        }
        steps::resolve(written).map_err(|e| self.graph_error(items, i, &e))
    }

    fn step(&self, item: &Node, at: &[Step], agents: &[&str]) -> Result<Written, SpecError> {
        self.mapping(item, at, STEP_KEYS, "a step")?;
        let get = |key: &str| item.entry(key).map(|(i, v)| (with(at, Step::Entry(i)), v));
        let Some((ap, an)) = get("agent") else {
            return Err(self.err(at, "the step has no `agent`", "add e.g. `agent: reviewer`"));
        };
        let agent = self.text(an, &ap, "reviewer")?;
        if !agents.contains(&agent) {
            return Err(self.err(
                &ap,
                format!("no agent named {agent:?}{}", did_you_mean(agent, agents)),
                format!("name one of the workflow's agents: {}", agents.join(", ")),
            ));
        }
        let id = match get("id") {
            None => None,
            Some((ip, n)) => {
                let id = self.text(n, &ip, "review")?;
                let ok = id.len() <= steps::MAX_ID
                    && id.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
                    && id
                        .chars()
                        .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
                if !ok {
                    return Err(self.err(
                        &ip,
                        format!("invalid step id {id:?}"),
                        "start with a letter or _, then letters, digits, _ or - (at most 59)",
                    ));
                }
                Some(id.to_owned())
            }
        };
        let Some((op, on)) = get("on") else {
            return Err(self.err(
                at,
                "the step has no `on`",
                format!("say when it runs: {ON_EXAMPLE}"),
            ));
        };
        let on = self.on(on, &op, agents)?;
        let prompt = match (get("prompt"), get("action")) {
            (Some(_), Some((bp, _))) => {
                return Err(self.err(
                    &bp,
                    "the step has both `prompt` and `action`",
                    "keep one: `action` is another name for `prompt`",
                ));
            }
            (Some((pp, pn)), None) | (None, Some((pp, pn))) => {
                let p = self.non_empty_text(pn, &pp, "\"Review the pull request\"")?;
                if p.chars().count() > steps::MAX_PROMPT_CHARS {
                    return Err(self.err(
                        &pp,
                        format!("the prompt is over {} characters", steps::MAX_PROMPT_CHARS),
                        "put long material in a document the step reads, or in a setup output",
                    ));
                }
                p.to_owned()
            }
            (None, None) => {
                return Err(self.err(
                    at,
                    "the step has no `prompt`",
                    "add what the agent is to do, e.g. prompt: \"Review ${{ trigger }}\"",
                ));
            }
        };
        let result = match get("result") {
            Some((_, Node::Null)) | None => None,
            Some((rp, _)) => {
                let v: serde_json::Value =
                    extract(self.text, &rp).map_err(|e| self.typed_error(&e, &rp))?;
                Some(ResultSchema::parse(&v).map_err(|e| {
                    self.err(
                        &rp,
                        format!("result: {e}"),
                        "write a JSON Schema of type, properties, required, enum and items, e.g. \
                         result: {type: object, properties: {verdict: {type: string, enum: [approved, \
                         changes_requested]}}, required: [verdict]}",
                    )
                })?)
            }
        };
        Ok(Written {
            id,
            agent: agent.to_owned(),
            on,
            prompt,
            result,
        })
    }

    /// `on:` one event or a list of them (all of them). A message's `from` must
    /// match a member (an agent, or `user`).
    fn on(&self, n: &Node, at: &[Step], agents: &[&str]) -> Result<Vec<On>, SpecError> {
        let paths: Vec<Vec<Step>> = match n {
            Node::Seq(items) if items.is_empty() => {
                return Err(self.err(at, "`on` is empty", format!("write {ON_EXAMPLE}")));
            }
            Node::Seq(items) => (0..items.len()).map(|k| with(at, Step::Item(k))).collect(),
            _ => vec![at.to_vec()],
        };
        let mut out = Vec::with_capacity(paths.len());
        for p in paths {
            let v: serde_json::Value =
                extract(self.text, &p).map_err(|e| self.typed_error(&e, &p))?;
            let e =
                On::from_json(&v).map_err(|e| self.err(&p, e, format!("write {ON_EXAMPLE}")))?;
            if let On::Message { from: Some(g), .. } = &e {
                let g = g.to_ascii_lowercase();
                let members: Vec<&str> =
                    agents.iter().copied().chain([crate::names::LEAD]).collect();
                if !members
                    .iter()
                    .any(|m| crate::permissions::glob(&g, &m.to_ascii_lowercase()))
                {
                    return Err(self.err(
                        &p,
                        format!("from: {g:?} matches no member, so the step would wait for ever"),
                        format!("name a member (or a glob): {}", members.join(", ")),
                    ));
                }
            }
            out.push(e);
        }
        Ok(out)
    }

    /// A graph mistake, at the step's `on` (or its item) or at the step.
    fn graph_error(&self, items: &[Node], i: usize, e: &GraphError) -> SpecError {
        let mut at = vec![Step::Entry(i), Step::Item(e.step)];
        if let (Some(k), Some((oi, on))) = (e.on, items[e.step].entry("on")) {
            at.push(Step::Entry(oi));
            if matches!(on, Node::Seq(_)) {
                at.push(Step::Item(k));
            }
        }
        self.err(&at, e.message.clone(), e.fix.clone())
    }
}

/// The ids [`steps::resolve`] will give (for the prompts' `${{ steps.<id> }}`).
fn ids_of(written: &[Written]) -> Vec<String> {
    let probe: Vec<Written> = written
        .iter()
        .map(|w| Written {
            on: vec![On::Trigger],
            ..w.clone()
        })
        .collect();
    match steps::resolve(probe) {
        Ok(s) => s.into_iter().map(|s| s.id).collect(),
        // Two steps with one id: the graph check below says where.
        Err(_) => written.iter().filter_map(|w| w.id.clone()).collect(),
    }
}

fn prompt_entry(item: &Node) -> Option<(usize, &Node)> {
    item.entry("prompt").or_else(|| item.entry("action"))
}

/// The warning for agents named only in `steps:`: what they run on, and how to choose.
pub(super) fn defaulted(names: &[&str], backend: &str) -> String {
    let (who, are) = match names {
        [one] => (format!("agent {one}"), "is"),
        _ => (format!("agents {}", names.join(", ")), "are"),
    };
    format!(
        "{who} {are} named only in `steps:`, so each runs with the defaults: the default backend, {backend} \
         (AGENT_WORKER_DEFAULT_BACKEND where the server starts, else sdk), the edit permissions and no system \
         prompt. To choose, add `agents:`, e.g. agents: {{ {}: {{ backend: claude }} }}",
        names[0]
    )
}
