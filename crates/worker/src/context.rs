//! What a run reads before its backend starts: the inbox (which marks it seen), the
//! recent channel and the main shared document.

use super::Failure;
use super::client::KernelClient;
use serde::Deserialize;
use serde_json::json;

/// How many recent channel messages the prompt shows.
pub const RECENT: i64 = 10;
/// The main document's size in the prompt, at most.
pub const DOC_PROMPT_BYTES: usize = 16 * 1024;

#[derive(Debug, Clone, Deserialize)]
pub struct Message {
    pub id: String,
    pub from: String,
    pub content: String,
    #[serde(default)]
    pub created_at: String,
    #[serde(default)]
    pub priority: String,
    #[serde(default)]
    pub dm: bool,
    #[serde(default)]
    pub to: Option<String>,
    /// The message asks for a result fitting this schema (result_submit).
    #[serde(default)]
    pub result_schema: Option<serde_json::Value>,
}

#[derive(Debug, Clone, Default)]
pub struct Context {
    pub inbox: Vec<Message>,
    /// More messages wait beyond this page.
    pub remaining: i64,
    pub recent: Vec<Message>,
    /// notes.md, if anything is written there.
    pub document: Option<String>,
}

#[derive(Deserialize)]
struct Page {
    messages: Vec<Message>,
    #[serde(default)]
    remaining: i64,
}

impl Context {
    pub async fn fetch(k: &KernelClient) -> Result<Self, Failure> {
        let inbox: Page = parse(k.must("my_inbox", json!({})).await?)?;
        let recent: Page = parse(k.must("channel_read", json!({ "limit": RECENT })).await?)?;
        let doc = k.must("team_doc_read", json!({})).await?;
        let document = doc
            .get("content")
            .and_then(|c| c.as_str())
            .filter(|c| !c.trim().is_empty())
            .map(str::to_owned);
        Ok(Self {
            inbox: inbox.messages,
            remaining: inbox.remaining,
            recent: recent.messages,
            document,
        })
    }
}

fn parse<T: serde::de::DeserializeOwned>(v: serde_json::Value) -> Result<T, Failure> {
    serde_json::from_value(v).map_err(|e| {
        Failure::new(
            super::protocol::ErrorClass::Other,
            format!("unexpected answer from the kernel: {e}"),
        )
    })
}
