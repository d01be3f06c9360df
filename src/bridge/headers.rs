//! The headers a 2026-07-28 message needs on streamable HTTP, derived from the
//! message itself (the bridge's client speaks stdio, where there are none).
//!
//! Each such message names its version in `_meta`; over HTTP that version is also
//! the `MCP-Protocol-Version` header, and SEP-2243 (standard headers) adds
//! `Mcp-Method` (the method) for every message and `Mcp-Name` for the methods that
//! act on one named thing: `params.name` of `tools/call` and `prompts/get`,
//! `params.uri` of `resources/read`, `resources/subscribe` and
//! `resources/unsubscribe`, and `params.taskId` of the tasks extension's
//! `tasks/get`, `tasks/update` and `tasks/cancel` (SEP-2663), so that a request
//! can be routed without reading its body. The kernel checks them against the
//! body and refuses a request that lacks one. A value that cannot travel as a
//! header as it is (spaces at an end, control or non-ASCII characters) goes as
//! `=?base64?…?=`, as SEP-2243 says. `Mcp-Param-*` headers are only for tool
//! arguments whose schema asks for one (`x-mcp-header`); no tool of the kernel
//! does. 2025-11-25 messages need none of these: their session's id and version
//! go with them instead (`super::Relay::post`).

use base64::{Engine, prelude::BASE64_STANDARD};
use reqwest::header::{HeaderName, HeaderValue};
use serde_json::Value;

/// Where each named method's `Mcp-Name` comes from (the key in `params`).
const NAMED: &[(&str, &str)] = &[
    ("tools/call", "name"),
    ("prompts/get", "name"),
    ("resources/read", "uri"),
    ("resources/subscribe", "uri"),
    ("resources/unsubscribe", "uri"),
    ("tasks/get", "taskId"),
    ("tasks/update", "taskId"),
    ("tasks/cancel", "taskId"),
];

const BASE64_PREFIX: &str = "=?base64?";
const BASE64_SUFFIX: &str = "?=";

/// The headers of a message sent in `version` (2026-07-28 or later): the version,
/// `Mcp-Method`, and `Mcp-Name` where the method has one. A method that cannot be
/// a header value is left out (the kernel then says which header is missing).
pub fn standard(version: &str, msg: &Value) -> Vec<(HeaderName, HeaderValue)> {
    let mut out = Vec::new();
    let mut push = |name: &'static str, value: &str| {
        if let Ok(v) = HeaderValue::from_str(value) {
            out.push((HeaderName::from_static(name), v));
        }
    };
    push("mcp-protocol-version", version);
    let Some(method) = msg.get("method").and_then(Value::as_str) else {
        return out;
    };
    push("mcp-method", method);
    let name = NAMED
        .iter()
        .find(|(m, _)| *m == method)
        .and_then(|(_, key)| msg.get("params")?.get(key)?.as_str());
    if let Some(name) = name {
        push("mcp-name", &encode(name));
    }
    out
}

/// A value as it may travel in a header: as it is, or Base64 in the sentinel.
fn encode(value: &str) -> String {
    let padded = value.starts_with([' ', '\t']) || value.ends_with([' ', '\t']);
    let unsafe_char = value.chars().any(|c| !(' '..='~').contains(&c));
    let looks_encoded = value.starts_with(BASE64_PREFIX) && value.ends_with(BASE64_SUFFIX);
    if padded || unsafe_char || looks_encoded {
        format!(
            "{BASE64_PREFIX}{}{BASE64_SUFFIX}",
            BASE64_STANDARD.encode(value)
        )
    } else {
        value.to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn headers(msg: Value) -> Vec<(String, String)> {
        standard("2026-07-28", &msg)
            .into_iter()
            .map(|(n, v)| (n.to_string(), v.to_str().unwrap().to_owned()))
            .collect()
    }

    fn name_of(msg: Value) -> Option<String> {
        headers(msg)
            .into_iter()
            .find(|(n, _)| n == "mcp-name")
            .map(|(_, v)| v)
    }

    #[test]
    fn every_named_method_gets_its_name() {
        for (method, key) in NAMED {
            let msg =
                json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": {(*key): "x-1"}});
            let h = headers(msg);
            assert!(
                h.contains(&("mcp-method".into(), (*method).into())),
                "{h:?}"
            );
            assert!(h.contains(&("mcp-name".into(), "x-1".into())), "{h:?}");
            assert!(
                h.contains(&("mcp-protocol-version".into(), "2026-07-28".into())),
                "{h:?}"
            );
        }
    }

    #[test]
    fn unnamed_methods_get_the_method_only() {
        for method in ["tools/list", "subscriptions/listen", "server/discover"] {
            let msg = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": {"name": "n"}});
            let h = headers(msg);
            assert!(h.contains(&("mcp-method".into(), method.into())), "{h:?}");
            assert!(!h.iter().any(|(n, _)| n == "mcp-name"), "{h:?}");
        }
    }

    #[test]
    fn values_that_cannot_travel_bare_go_as_base64() {
        let call = |name: &str| json!({"method": "tools/call", "params": {"name": name}});
        assert_eq!(name_of(call("agent_ask")).unwrap(), "agent_ask");
        assert_eq!(name_of(call("héllo")).unwrap(), "=?base64?aMOpbGxv?=");
        assert_eq!(name_of(call(" x")).unwrap(), "=?base64?IHg=?=");
        assert_eq!(
            name_of(call("=?base64?eA==?=")).unwrap(),
            "=?base64?PT9iYXNlNjQ/ZUE9PT89?="
        );
    }
}
