//! Approvals asked inline from protocol 2026-07-28 on (multi round-trip requests,
//! SEP-2322): a server sends the client no requests, so a call the lead waits in
//! returns `input_required` with one elicitation form per approval the lead may
//! decide, and the client retries the same call with the person's answers.
//!
//! The round: the call waits as it always does; when an approval for the lead is
//! pending that this call has not asked about yet, it stops waiting and returns
//! the forms (key `approval-<id>`, at most eight, oldest first) with a request
//! state. A call run as a task is not asked: its result cannot be input_required. The retry decides the
//! answered approvals first (accept with approve or deny; decline and cancel
//! decide nothing), then resumes what the first round started (agent_ask follows
//! the question it posted, workflow_run the instance it started: neither is done
//! twice) and waits again, for the call's wait_seconds.
//!
//! The request state is untrusted input: it is sealed with a key this kernel
//! process draws at start (HMAC-SHA256, bound to the lead and the tool, valid for
//! an hour) and carries no secret, only ids: what to resume, the approvals this
//! round asked about, and those asked before and left pending. A retry decides
//! only approvals its verified state asked about that are still pending for the
//! lead; a state that does not verify (forged, altered, for another tool,
//! expired, or from before a restart) decides nothing and the call fails, saying
//! so. 2025-11-25 clients are asked by elicitation requests ([`super::elicit`]).

use super::elicit::{self, Answer};
use super::tools::ToolError;
use kernel::Kernel;
use kernel::events::Event;
use rmcp::RoleServer;
use rmcp::handler::server::tool::IntoCallToolResult;
use rmcp::model::{
    CallToolResponse, ElicitRequest, ElicitRequestParams, ElicitationSchema, InputRequest,
    InputRequests, InputRequiredResult, InputResponses, RequestStateCodec, SealOptions,
};
use rmcp::service::RequestContext;
use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;
use std::sync::{Arc, LazyLock};
use std::time::Duration;

/// How long a request state stays good (approvals time out well before).
const STATE_TTL: Duration = Duration::from_secs(3600);

/// The most approvals one state remembers as asked (the oldest are forgotten:
/// at worst asked again).
const MAX_ASKED: usize = 64;

/// The key request states are sealed with: this process's alone, never stored.
static CODEC: LazyLock<RequestStateCodec> = LazyLock::new(|| {
    RequestStateCodec::try_new(rand::random::<[u8; 32]>().to_vec()).expect("a 32-byte key")
});

/// What a call that waits ends with: its result, or forms for the person.
pub enum Waited<T> {
    Done(T),
    Asks(InputRequiredResult),
}

impl<T: Serialize + JsonSchema + 'static> IntoCallToolResult for Waited<T> {
    fn into_call_tool_result(self) -> Result<CallToolResponse, rmcp::ErrorData> {
        match self {
            Waited::Done(t) => rmcp::Json(t).into_call_tool_result(),
            Waited::Asks(r) => Ok(r.into()),
        }
    }
}

/// The sealed request state.
#[derive(Serialize, Deserialize)]
struct State<S> {
    /// What the retry resumes.
    resume: S,
    /// The approvals this round asked about: the only ones its answers decide.
    asking: Vec<i64>,
    /// Approvals asked in earlier rounds and left pending (declined): not asked
    /// again in this call.
    asked: Vec<i64>,
}

/// Marks a call run as a task: it is not asked inline.
#[derive(Clone, Copy)]
pub struct InTask;

/// The most forms one round asks (the others come in the next rounds).
const MAX_FORMS: usize = 8;

/// Whether this request's client can show an elicitation form (declared per request).
fn shows_forms(ctx: &RequestContext<RoleServer>) -> bool {
    ctx.client_capabilities()
        .and_then(|c| c.elicitation)
        .is_some_and(|e| e.form.is_some() || e.url.is_none())
}

fn bound_to(tool: &str) -> Vec<u8> {
    format!("agent-worker inline approvals|lead|tools/call {tool}").into_bytes()
}

/// One round of a call the lead may wait in.
pub struct Round<S> {
    tool: &'static str,
    /// Asking by input_required: a 2026-07-28 lead whose client shows forms.
    modern: bool,
    resumed: Option<S>,
    asked: BTreeSet<i64>,
}

impl<S: Serialize + DeserializeOwned> Round<S> {
    /// Reads the retry (if this is one): verifies its state and decides the
    /// approvals it asked about as answered.
    pub async fn begin(
        kernel: &Arc<Kernel>,
        ctx: &RequestContext<RoleServer>,
        tool: &'static str,
        state: Option<String>,
        answers: Option<InputResponses>,
    ) -> Result<Self, ToolError> {
        let lead = super::caller(ctx).is_ok_and(|c| c.is_lead());
        let mut round = Round {
            tool,
            modern: lead
                && crate::era::modern(ctx)
                && shows_forms(ctx)
                && ctx.extensions.get::<InTask>().is_none(),
            resumed: None,
            asked: BTreeSet::new(),
        };
        let Some(sealed) = state else {
            return Ok(round);
        };
        let state = open::<S>(tool, lead, &sealed).map_err(|why| {
            ToolError(format!(
                "this retry's request state was refused ({why}): no approval was decided and nothing \
                 was resumed. Call {tool} again without it, and decide pending approvals with \
                 approval_list and approval_decide."
            ))
        })?;
        let answers = answers.unwrap_or_default();
        // Only what was asked, and only while it is still the lead's to decide.
        let pending: BTreeSet<i64> = elicit::pending_for_lead(kernel).await.into_iter().collect();
        for &id in state.asking.iter().filter(|id| pending.contains(id)) {
            if let Some(answer) = answers.get(&key(id)).and_then(accepted) {
                elicit::decide(kernel, id, answer).await;
            }
        }
        let still = elicit::pending_for_lead(kernel).await;
        round.asked = state
            .asked
            .iter()
            .chain(&state.asking)
            .copied()
            .filter(|id| still.contains(id))
            .collect();
        round.resumed = Some(state.resume);
        Ok(round)
    }

    /// What the first round started, if this is a retry.
    pub fn resumed(&self) -> Option<&S> {
        self.resumed.as_ref()
    }

    /// Waits for `work`. A modern lead's wait ends early with forms when an
    /// approval it may decide is pending and not asked yet (`resume` is what the
    /// retry picks up); an older client is asked by elicitation meanwhile.
    pub async fn wait<T>(
        self,
        kernel: &Arc<Kernel>,
        ctx: &RequestContext<RoleServer>,
        work: impl Future<Output = Result<T, ToolError>>,
        resume: S,
    ) -> Result<Waited<T>, ToolError> {
        if !self.modern {
            let _inline = (!crate::era::modern(ctx)).then(|| elicit::while_waiting(kernel, ctx));
            return Ok(Waited::Done(work.await?));
        }
        tokio::select! {
            biased;
            done = work => Ok(Waited::Done(done?)),
            asks = new_approvals(kernel, &self.asked) => Ok(Waited::Asks(self.forms(asks, resume))),
        }
    }

    fn forms(self, asks: Vec<(i64, String)>, resume: S) -> InputRequiredResult {
        let mut requests = InputRequests::new();
        for (id, message) in &asks {
            requests.insert(key(*id), form(message.clone()));
        }
        let mut asked: Vec<i64> = self.asked.into_iter().collect();
        if asked.len() > MAX_ASKED {
            asked.drain(..asked.len() - MAX_ASKED);
        }
        let state = State {
            resume,
            asking: asks.iter().map(|(id, _)| *id).collect(),
            asked,
        };
        InputRequiredResult::new(Some(requests), Some(seal(self.tool, &state)))
    }
}

fn key(id: i64) -> String {
    format!("approval-{id}")
}

/// The form: the same one elicitation requests carry.
fn form(message: String) -> InputRequest {
    let schema = ElicitationSchema::from_type::<Answer>().expect("the answer form is flat");
    InputRequest::Elicitation(ElicitRequest::new(
        ElicitRequestParams::FormElicitationParams {
            meta: None,
            message,
            requested_schema: schema,
        },
    ))
}

/// The person's answer, if they accepted the form.
fn accepted(response: &serde_json::Value) -> Option<Answer> {
    if response.get("action")?.as_str()? != "accept" {
        return None;
    }
    serde_json::from_value(response.get("content")?.clone()).ok()
}

fn seal<S: Serialize>(tool: &str, state: &State<S>) -> String {
    let ad = bound_to(tool);
    CODEC
        .seal_json_with(
            state,
            &SealOptions::new().associated_data(&ad).ttl(STATE_TTL),
        )
        .expect("ids serialize")
}

fn open<S: DeserializeOwned>(
    tool: &str,
    lead: bool,
    sealed: &str,
) -> Result<State<S>, &'static str> {
    if !lead {
        return Err("only the lead is asked inline");
    }
    CODEC
        .open_json_with(sealed, &bound_to(tool))
        .map_err(|e| match e {
            rmcp::model::RequestStateError::Expired => "it expired",
            _ => "this kernel did not issue it for this tool",
        })
}

/// Waits until approvals the lead may decide are pending that are not in
/// `asked`; returns them with their questions.
async fn new_approvals(kernel: &Arc<Kernel>, asked: &BTreeSet<i64>) -> Vec<(i64, String)> {
    // Subscribe before reading what is pending, so nothing falls in between.
    let mut events = kernel.events.subscribe();
    loop {
        let mut asks = Vec::new();
        for id in elicit::pending_for_lead(kernel).await.into_iter().rev() {
            if !asked.contains(&id)
                && let Some(q) = elicit::question(kernel, id).await
            {
                asks.push((id, q));
                if asks.len() == MAX_FORMS {
                    break;
                }
            }
        }
        if !asks.is_empty() {
            return asks;
        }
        loop {
            match events.recv().await {
                Ok(Event::ApprovalAsked { .. }) => break,
                Ok(_) => {}
                Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => break,
                Err(_) => return std::future::pending().await,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn state() -> State<String> {
        State {
            resume: "question".into(),
            asking: vec![7],
            asked: vec![3],
        }
    }

    #[test]
    fn a_state_opens_for_its_own_tool_only() {
        let sealed = seal("agent_ask", &state());
        let s = open::<String>("agent_ask", true, &sealed).unwrap();
        assert_eq!(
            (s.resume.as_str(), s.asking, s.asked),
            ("question", vec![7], vec![3])
        );
        assert!(open::<String>("workflow_status", true, &sealed).is_err());
        assert!(open::<String>("agent_ask", false, &sealed).is_err());
    }

    #[test]
    fn a_forged_or_altered_state_is_refused() {
        let sealed = seal("agent_ask", &state());
        // Any change to it (here one letter of the payload) is found.
        let mut bytes = sealed.clone().into_bytes();
        let at = sealed.find('.').unwrap() + 12;
        bytes[at] = if bytes[at] == b'A' { b'B' } else { b'A' };
        let forged = String::from_utf8(bytes).unwrap();
        assert!(open::<String>("agent_ask", true, &forged).is_err());
        // One sealed with another key.
        let other = RequestStateCodec::try_new(vec![1u8; 32]).unwrap();
        let foreign = other
            .seal_json_with(
                &state(),
                &SealOptions::new().associated_data(&bound_to("agent_ask")),
            )
            .unwrap();
        assert!(open::<String>("agent_ask", true, &foreign).is_err());
        assert!(open::<String>("agent_ask", true, "{\"asking\":[7]}").is_err());
    }

    #[test]
    fn only_an_accepted_form_answers() {
        let yes = serde_json::json!({"action": "accept", "content": {"decision": "approve"}});
        assert_eq!(accepted(&yes).unwrap().decision, "approve");
        let no = serde_json::json!({"action": "decline"});
        assert!(accepted(&no).is_none());
        let cancel = serde_json::json!({"action": "cancel", "content": {"decision": "approve"}});
        assert!(accepted(&cancel).is_none());
    }
}
