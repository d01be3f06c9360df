//! The JSON-RPC framing checks both transports apply before rmcp sees a message.
//!
//! rmcp decodes a request it cannot fit to a known method's parameters as a custom
//! request, so a malformed `tools/call` (say `arguments` as an array) came back as
//! "method not found", and an `initialize` without `protocolVersion` as "session ID
//! is required"; a line that is not JSON got no answer at all on stdio. Here every
//! message is checked once, in one place, and a bad one is answered with the
//! JSON-RPC error the specification names (-32700 parse error, -32600 invalid
//! request, -32602 invalid params), with the request's id and a message that says
//! what to fix.

// logging/setLevel is deprecated in 2026-07-28 but still served to 2025-11-25 clients.
#![allow(deprecated)]

use rmcp::model::{
    CallToolRequestParams, CompleteRequestParams, GetPromptRequestParams, GetSkillRequestParams,
    InitializeRequestParams, PaginatedRequestParams, ReadResourceRequestParams,
    SetLevelRequestParams, SubscribeRequestParams, UnsubscribeRequestParams,
};
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

pub const PARSE_ERROR: i64 = -32700;
pub const INVALID_REQUEST: i64 = -32600;
pub const INVALID_PARAMS: i64 = -32602;

/// A message refused before it reached the server, with the answer it gets.
#[derive(Debug)]
pub struct Refusal {
    pub code: i64,
    pub message: String,
    /// The request's id; `None` for a notification or when there is no usable id.
    pub id: Option<Value>,
    /// A notification gets no answer on stdio (JSON-RPC), only an HTTP status.
    pub notification: bool,
}

impl Refusal {
    /// The JSON-RPC error response.
    pub fn to_json(&self) -> Value {
        json!({
            "jsonrpc": "2.0",
            "id": self.id.clone().unwrap_or(Value::Null),
            "error": {"code": self.code, "message": self.message},
        })
    }

    fn new(code: i64, message: String, id: Option<Value>, notification: bool) -> Self {
        Self {
            code,
            message,
            id,
            notification,
        }
    }
}

/// Parses one message (an HTTP body or a stdio line) and checks its shape.
pub fn check_bytes(bytes: &[u8]) -> Result<Value, Refusal> {
    let v: Value = serde_json::from_slice(bytes).map_err(|e| {
        Refusal::new(
            PARSE_ERROR,
            format!("parse error: the message is not JSON ({e}); send one JSON-RPC 2.0 object"),
            None,
            false,
        )
    })?;
    check(&v)?;
    Ok(v)
}

/// Checks a parsed message: a JSON-RPC 2.0 object whose parameters fit its method.
pub fn check(v: &Value) -> Result<(), Refusal> {
    let Some(obj) = v.as_object() else {
        let what = if v.is_array() {
            "batches are not supported by MCP; send one message at a time"
        } else {
            "a message must be a JSON object"
        };
        return Err(Refusal::new(
            INVALID_REQUEST,
            format!("invalid request: {what}"),
            None,
            false,
        ));
    };
    let method = obj.get("method");
    let has_id = obj.contains_key("id");
    let id = obj
        .get("id")
        .filter(|i| i.is_string() || i.is_i64() || i.is_u64())
        .cloned();
    let notification = method.is_some() && !has_id;
    let refuse = |code, message: String| Refusal::new(code, message, id.clone(), notification);
    if obj.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
        return Err(refuse(
            INVALID_REQUEST,
            "invalid request: \"jsonrpc\" must be \"2.0\"".into(),
        ));
    }
    if has_id && id.is_none() {
        return Err(refuse(
            INVALID_REQUEST,
            "invalid request: \"id\" must be a string or an integer".into(),
        ));
    }
    let Some(method) = method else {
        // A response or error from the client (to a server request): rmcp checks it.
        return Ok(());
    };
    let Some(method) = method.as_str() else {
        return Err(refuse(
            INVALID_REQUEST,
            "invalid request: \"method\" must be a string".into(),
        ));
    };
    let params = obj.get("params");
    if let Some(p) = params
        && !p.is_object()
    {
        return Err(refuse(
            INVALID_PARAMS,
            format!("invalid params for {method}: \"params\" must be an object"),
        ));
    }
    check_params(method, params.cloned()).map_err(|why| {
        refuse(
            INVALID_PARAMS,
            format!("invalid params for {method}: {why}"),
        )
    })
}

/// Checks the parameters of the methods we serve against their declared types, so
/// a wrong shape is "invalid params" naming the field instead of "method not found".
fn check_params(method: &str, params: Option<Value>) -> Result<(), String> {
    fn fits<T: DeserializeOwned>(params: Option<Value>, required: bool) -> Result<(), String> {
        match params {
            None if required => Err("\"params\" is missing".into()),
            None => Ok(()),
            // The error names the field at fault ("arguments: invalid type: …").
            Some(p) => serde_path_to_error::deserialize::<_, T>(p)
                .map(drop)
                .map_err(|e| match e.path().to_string().as_str() {
                    "." => e.inner().to_string(),
                    path => format!("{path}: {}", e.inner()),
                }),
        }
    }
    match method {
        "initialize" => fits::<InitializeRequestParams>(params, true),
        "tools/call" => match params.as_ref().and_then(|p| p.get("arguments")) {
            Some(a) if !a.is_object() && !a.is_null() => Err(format!(
                "arguments: must be an object of named arguments, not {}",
                kind(a)
            )),
            _ => fits::<CallToolRequestParams>(params, true),
        },
        "tools/list" | "resources/list" | "resources/templates/list" | "prompts/list" => {
            fits::<PaginatedRequestParams>(params, false)
        }
        "resources/read" => fits::<ReadResourceRequestParams>(params, true),
        "resources/subscribe" => fits::<SubscribeRequestParams>(params, true),
        "resources/unsubscribe" => fits::<UnsubscribeRequestParams>(params, true),
        "prompts/get" => fits::<GetPromptRequestParams>(params, true),
        "skills/list" => fits::<PaginatedRequestParams>(params, false),
        "skills/get" => fits::<GetSkillRequestParams>(params, true),
        "completion/complete" => fits::<CompleteRequestParams>(params, true),
        "logging/setLevel" => fits::<SetLevelRequestParams>(params, true),
        "ping" => Ok(()),
        // Anything else is rmcp's to answer (unknown methods: -32601).
        _ => Ok(()),
    }
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(s: &str) -> Refusal {
        check_bytes(s.as_bytes()).unwrap_err()
    }

    #[test]
    fn framing_mistakes_get_the_error_the_spec_names() {
        assert_eq!(refused("{not json").code, PARSE_ERROR);
        assert_eq!(refused("[]").code, INVALID_REQUEST);
        assert_eq!(
            refused(r#"{"jsonrpc":"1.0","id":1,"method":"ping"}"#).code,
            INVALID_REQUEST
        );
        assert_eq!(
            refused(r#"{"jsonrpc":"2.0","id":true,"method":"ping"}"#).code,
            INVALID_REQUEST
        );
        let r = refused(
            r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"x","arguments":[1]}}"#,
        );
        assert_eq!((r.code, r.id.clone()), (INVALID_PARAMS, Some(json!(7))));
        assert!(r.message.contains("arguments"), "{}", r.message);
        let r = refused(
            r#"{"jsonrpc":"2.0","id":"a","method":"initialize","params":{"capabilities":{},"clientInfo":{"name":"c","version":"1"}}}"#,
        );
        assert_eq!(r.code, INVALID_PARAMS);
        assert!(r.message.contains("protocolVersion"), "{}", r.message);
        let r = refused(r#"{"jsonrpc":"2.0","method":"tools/list","params":[1]}"#);
        assert!(r.notification);
        assert!(
            check_bytes(br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x"}}"#)
                .is_ok()
        );
        assert!(check_bytes(br#"{"jsonrpc":"2.0","id":1,"method":"no/such"}"#).is_ok());
    }
}
