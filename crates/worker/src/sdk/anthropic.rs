//! The Anthropic Messages API wire format.

use super::{Call, Endpoint, ToolDef, Turn};
use crate::Failure;
use domain::protocol::Usage;
use serde_json::{Value, json};

pub const MAX_TOKENS: u32 = 8192;

pub async fn turn(
    ep: &Endpoint,
    system: &str,
    convo: &[Value],
    tools: &[ToolDef],
) -> Result<Turn, Failure> {
    let body = json!({
        "model": ep.model,
        "max_tokens": MAX_TOKENS,
        "system": system,
        "messages": convo,
        "tools": tools.iter().map(|t| json!({
            "name": t.name, "description": t.description, "input_schema": t.schema,
        })).collect::<Vec<_>>(),
    });
    let mut headers = vec![("anthropic-version", "2023-06-01".to_owned())];
    match &ep.key {
        Some(k) if ep.bearer => headers.push(("authorization", format!("Bearer {k}"))),
        Some(k) => headers.push(("x-api-key", k.clone())),
        None => {}
    }
    let v = ep
        .post(&format!("{}/v1/messages", ep.base), &headers, &body)
        .await?;
    let content = v["content"].as_array().cloned().unwrap_or_default();
    let mut text = String::new();
    let mut calls = Vec::new();
    for block in &content {
        match block["type"].as_str() {
            Some("text") => text.push_str(block["text"].as_str().unwrap_or_default()),
            Some("tool_use") => calls.push(Call {
                id: block["id"].as_str().unwrap_or_default().to_owned(),
                name: block["name"].as_str().unwrap_or_default().to_owned(),
                args: match &block["input"] {
                    o @ Value::Object(_) => Ok(o.clone()),
                    Value::Null => Ok(json!({})),
                    other => Err(format!("got {other}")),
                },
            }),
            _ => {}
        }
    }
    let u = &v["usage"];
    let n = |k: &str| u[k].as_u64().unwrap_or(0);
    Ok(Turn {
        text: Some(text).filter(|t| !t.is_empty()),
        calls,
        usage: Usage {
            input_tokens: n("input_tokens")
                + n("cache_read_input_tokens")
                + n("cache_creation_input_tokens"),
            output_tokens: n("output_tokens"),
            cost_usd: None,
        },
        // Verbatim, so thinking blocks and ids go back exactly as they came.
        assistant: json!({ "role": "assistant", "content": content }),
    })
}

/// One user message with a tool_result per tool_use, as the API requires.
pub fn push_results(convo: &mut Vec<Value>, results: Vec<(String, String, bool)>) {
    let blocks: Vec<Value> = results
        .into_iter()
        .map(|(id, text, is_error)| {
            json!({
                "type": "tool_result", "tool_use_id": id, "content": text, "is_error": is_error,
            })
        })
        .collect();
    convo.push(json!({ "role": "user", "content": blocks }));
}
