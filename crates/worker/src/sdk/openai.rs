//! The OpenAI-compatible Chat Completions wire format.

use super::{Call, Endpoint, ToolDef, Turn};
use crate::Failure;
use domain::protocol::Usage;
use serde_json::{Value, json};

pub async fn turn(
    ep: &Endpoint,
    system: &str,
    convo: &[Value],
    tools: &[ToolDef],
) -> Result<Turn, Failure> {
    let mut messages = vec![json!({ "role": "system", "content": system })];
    messages.extend(convo.iter().cloned());
    let body = json!({
        "model": ep.model,
        "messages": messages,
        "tools": tools.iter().map(|t| json!({
            "type": "function",
            "function": { "name": t.name, "description": t.description, "parameters": t.schema },
        })).collect::<Vec<_>>(),
        "tool_choice": "auto",
    });
    let mut headers = vec![];
    if let Some(k) = &ep.key {
        headers.push(("authorization", format!("Bearer {k}")));
    }
    let v = ep
        .post(&format!("{}/chat/completions", ep.base), &headers, &body)
        .await?;
    let msg = v["choices"][0]["message"].clone();
    // Local models often send arguments that are not JSON: the model is told so in
    // the tool result instead of the run failing.
    let calls = msg["tool_calls"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|c| Call {
            id: c["id"].as_str().unwrap_or_default().to_owned(),
            name: c["function"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_owned(),
            args: match c["function"]["arguments"].as_str().map(str::trim) {
                None | Some("") => Ok(json!({})),
                Some(s) => match serde_json::from_str::<Value>(s) {
                    Ok(o @ Value::Object(_)) => Ok(o),
                    Ok(other) => Err(format!("got {other}")),
                    Err(e) => Err(e.to_string()),
                },
            },
        })
        .collect();
    let u = &v["usage"];
    let mut assistant = json!({ "role": "assistant", "content": msg["content"].clone() });
    if msg["tool_calls"].is_array() {
        assistant["tool_calls"] = msg["tool_calls"].clone();
    }
    Ok(Turn {
        text: msg["content"]
            .as_str()
            .map(str::to_owned)
            .filter(|t| !t.is_empty()),
        calls,
        usage: Usage {
            input_tokens: u["prompt_tokens"].as_u64().unwrap_or(0),
            output_tokens: u["completion_tokens"].as_u64().unwrap_or(0),
            cost_usd: None,
        },
        assistant,
    })
}

pub fn push_results(convo: &mut Vec<Value>, results: Vec<(String, String, bool)>) {
    for (id, text, is_error) in results {
        let content = if is_error {
            format!("Error: {text}")
        } else {
            text
        };
        convo.push(json!({ "role": "tool", "tool_call_id": id, "content": content }));
    }
}
