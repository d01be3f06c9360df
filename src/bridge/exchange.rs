//! One request's round trip to the kernel: the headers its era wants, the
//! watched send, the session the kernel names, and the answer written back with
//! the request's own id (see the module above).

use super::liveness::Watched;
use super::{Answer, META_VERSION, Relay, headers};
use reqwest::StatusCode;
use serde_json::{Value, json};

impl Relay {
    /// POSTs `msg` to the kernel; with `write`, its answer (or an error saying
    /// why there is none) goes to the client under `id`.
    pub(super) async fn post(&self, msg: &Value, id: &Value, method: &str, write: bool) -> Answer {
        let (url, req, sent_session) = self.request(msg, method);
        let resp = match self.send(&url, req, id, write).await {
            Ok(r) => r,
            Err(answer) => return answer,
        };
        let status = resp.status();
        if let Some(sid) = sent_session
            && status == StatusCode::NOT_FOUND
        {
            return Answer::SessionGone(sid);
        }
        self.remember_session(&resp);
        if status == StatusCode::ACCEPTED || status == StatusCode::NO_CONTENT {
            return Answer::Done;
        }
        let is_sse = resp
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .is_some_and(|ct| ct.starts_with("text/event-stream"));
        if is_sse {
            if let Watched::Silent(why) = self
                .watched(&url, self.relay_sse(resp, method, write))
                .await
                && write
            {
                self.error(id, why).await;
            }
            return Answer::Done;
        }
        let body = match self.watched(&url, resp.bytes()).await {
            Watched::Done(b) => b.map_err(|e| e.to_string()),
            Watched::Gone => Err(format!("the kernel at {url} went away")),
            Watched::Silent(why) => Err(why),
        };
        match body {
            Ok(body) => {
                self.note_version(method, &body);
                if write {
                    self.answer(id, status, &body).await;
                }
            }
            Err(e) if write => {
                self.error(id, format!("reading the kernel's answer failed: {e}"))
                    .await;
            }
            Err(_) => {}
        }
        Answer::Done
    }

    /// The request to the kernel with the headers `msg`'s era wants: a 2026-07-28
    /// message's own version, method and name; else the session's id and version.
    /// Also the URL, and the session id sent (if any).
    fn request(
        &self,
        msg: &Value,
        method: &str,
    ) -> (String, reqwest::RequestBuilder, Option<String>) {
        let (url, token) = self.target.lock().unwrap().clone();
        let mut req = self
            .http
            .post(&url)
            .bearer_auth(&token)
            .header("accept", "application/json, text/event-stream")
            .header("content-type", "application/json");
        let per_request = msg
            .pointer(&format!(
                "/params/_meta/{}",
                META_VERSION.replace('/', "~1")
            ))
            .and_then(Value::as_str);
        let mut sent_session = None;
        if let Some(v) = per_request {
            for (name, value) in headers::standard(v, msg) {
                req = req.header(name, value);
            }
        } else if method != "initialize"
            && let Some((sid, ver)) = self.session.lock().unwrap().clone()
        {
            req = req.header("mcp-session-id", &sid);
            if !ver.is_empty() {
                req = req.header("mcp-protocol-version", ver);
            }
            sent_session = Some(sid);
        }
        (url, req.json(msg), sent_session)
    }

    /// Sends the request, watching the kernel: its response, or what the caller
    /// answers instead (the kernel gone, or silent and the client told).
    async fn send(
        &self,
        url: &str,
        req: reqwest::RequestBuilder,
        id: &Value,
        write: bool,
    ) -> Result<reqwest::Response, Answer> {
        let resp = match self.watched(url, req.send()).await {
            Watched::Done(r) => r,
            Watched::Gone => return Err(Answer::KernelGone(url.to_owned())),
            Watched::Silent(why) => {
                if write {
                    self.error(id, why).await;
                }
                return Err(Answer::Done);
            }
        };
        match resp {
            Ok(r) => Ok(r),
            // Refused, or a kept-alive connection to a kernel that has since died.
            Err(e)
                if e.is_connect() || self.launcher.as_ref().is_some_and(|l| !l.kernel_alive()) =>
            {
                Err(Answer::KernelGone(url.to_owned()))
            }
            // A kernel that was stopping (its idle limit reached) as the request came
            // drops it unread, and is gone a moment later: then a new one takes it.
            Err(e) if !e.is_timeout() && self.kernel_stops().await => {
                Err(Answer::KernelGone(url.to_owned()))
            }
            Err(e) => {
                if write {
                    let why = format!("the agent-worker kernel at {url} is unreachable: {e}");
                    self.error(id, why).await;
                }
                Err(Answer::Done)
            }
        }
    }

    /// Whether the kernel this bridge launched stops within a second or two (a
    /// request it dropped as it was exiting), rather than being up and failing.
    async fn kernel_stops(&self) -> bool {
        let Some(l) = &self.launcher else {
            return false;
        };
        for _ in 0..40 {
            if !l.kernel_alive() {
                return true;
            }
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
        false
    }

    /// A session id the kernel named in its answer becomes this bridge's.
    fn remember_session(&self, resp: &reqwest::Response) {
        if let Some(sid) = resp
            .headers()
            .get("mcp-session-id")
            .and_then(|v| v.to_str().ok())
        {
            let mut s = self.session.lock().unwrap();
            if s.as_ref().is_none_or(|(cur, _)| cur != sid) {
                s.replace((sid.to_owned(), String::new()));
            }
        }
    }

    /// Writes the kernel's JSON answer under the request's `id` (an HTTP error
    /// body has none), saying what to do about a refused credential; anything
    /// else the kernel answered becomes an error naming its status.
    async fn answer(&self, id: &Value, status: StatusCode, body: &[u8]) {
        match serde_json::from_slice::<Value>(body) {
            Ok(mut v) if v.get("error").is_some() || v.get("result").is_some() => {
                if v.get("id").is_none_or(Value::is_null) && !id.is_null() {
                    v["id"] = id.clone();
                }
                if status == StatusCode::UNAUTHORIZED
                    && let Some(m) = v.pointer_mut("/error/message")
                {
                    let hint = if self.launcher.as_ref().is_some_and(|l| l.is_agent()) {
                        "the kernel refused the agent token this launch relays with (--token-env): \
                         ask the lead for a new one with agent_join"
                    } else {
                        "the running kernel refused this bridge's credential from kernel.json: restart \
                         the kernel, or start this launch with its --token"
                    };
                    *m = json!(format!("{} ({hint})", m.as_str().unwrap_or_default()));
                }
                self.write(v.to_string().as_bytes()).await
            }
            _ => {
                let text: String = String::from_utf8_lossy(body).chars().take(500).collect();
                self.error(id, format!("the kernel answered HTTP {status}: {text}"))
                    .await
            }
        }
    }
}
