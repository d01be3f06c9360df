//! Tool schemas as clients render them, and the argument check against them.
//!
//! schemars writes what Rust means, not what every MCP client reads: optional
//! fields as `type: [X, "null"]` or `anyOf [.., {type: null}]` (flagged by the
//! Inspector, and rejected by clients that map schemas onto narrower dialects),
//! integer formats such as `uint64` that validators do not know, and `$ref`s into
//! `$defs` that some clients never resolve. [`portable`] rewrites every input and
//! output schema once, when the tool table is built: optional means "may be left
//! out", unsigned integers get `minimum: 0`, references are inlined, and input
//! objects refuse unknown properties. The result is plain JSON Schema 2020-12.
//!
//! [`unknown_arguments`] is the one place unknown argument names are refused, for
//! every tool, with the valid names and the nearest one.

use serde_json::{Map, Value};

/// Formats JSON Schema defines; others (`uint64`, `double`…) are dropped.
const STANDARD_FORMATS: &[&str] = &[
    "date-time",
    "date",
    "time",
    "duration",
    "email",
    "hostname",
    "ipv4",
    "ipv6",
    "uri",
    "uri-reference",
    "uuid",
    "regex",
];

/// Takes the property `name` out of an input schema (and out of `required`).
pub fn without(schema: &mut Map<String, Value>, name: &str) {
    if let Some(Value::Object(props)) = schema.get_mut("properties") {
        props.remove(name);
    }
    if let Some(Value::Array(req)) = schema.get_mut("required") {
        req.retain(|r| r != name);
    }
}

/// Sets the description of one property, if the schema has it.
pub fn describe(schema: &mut Map<String, Value>, name: &str, text: &str) {
    if let Some(Value::Object(p)) = schema.get_mut("properties").and_then(|p| p.get_mut(name)) {
        p.insert("description".into(), Value::String(text.into()));
    }
}

/// Rewrites a schema to the portable form (see the module docs).
pub fn portable(schema: &mut Map<String, Value>, input: bool) {
    let defs = schema
        .remove("$defs")
        .or_else(|| schema.remove("definitions"))
        .and_then(|d| d.as_object().cloned())
        .unwrap_or_default();
    let mut v = Value::Object(std::mem::take(schema));
    rewrite(&mut v, &defs, 0);
    if let Value::Object(mut m) = v {
        m.remove("$schema");
        if input && m.get("type").and_then(Value::as_str) == Some("object") {
            m.insert("additionalProperties".into(), Value::Bool(false));
        }
        *schema = m;
    }
}

fn rewrite(v: &mut Value, defs: &Map<String, Value>, depth: usize) {
    match v {
        Value::Array(a) => a.iter_mut().for_each(|x| rewrite(x, defs, depth)),
        Value::Object(m) => {
            // anyOf/oneOf [X, {type: null}] → X.
            for key in ["anyOf", "oneOf"] {
                let Some(Value::Array(alts)) = m.get(key) else {
                    continue;
                };
                let non_null: Vec<Value> = alts
                    .iter()
                    .filter(|a| a.get("type").and_then(Value::as_str) != Some("null"))
                    .cloned()
                    .collect();
                if non_null.len() < alts.len() {
                    m.remove(key);
                    if non_null.len() == 1 {
                        if let Value::Object(only) = &non_null[0] {
                            for (k, val) in only {
                                m.entry(k.clone()).or_insert_with(|| val.clone());
                            }
                        }
                    } else {
                        m.insert(key.into(), Value::Array(non_null));
                    }
                }
            }
            // $ref → the definition, inlined (with this node's own words kept).
            if let Some(r) = m.remove("$ref").and_then(|r| r.as_str().map(str::to_owned))
                && depth < 32
                && let Some(def) = r
                    .rsplit('/')
                    .next()
                    .and_then(|name| defs.get(name))
                    .and_then(Value::as_object)
            {
                for (k, val) in def {
                    m.entry(k.clone()).or_insert_with(|| val.clone());
                }
            }
            // type: [X, "null"] → X.
            if let Some(Value::Array(types)) = m.get("type") {
                let kept: Vec<Value> = types.iter().filter(|t| *t != "null").cloned().collect();
                let t = match kept.len() {
                    1 => kept[0].clone(),
                    _ => Value::Array(kept),
                };
                m.insert("type".into(), t);
            }
            if let Some(f) = m.get("format").and_then(Value::as_str).map(str::to_owned)
                && !STANDARD_FORMATS.contains(&f.as_str())
            {
                m.remove("format");
                if f.starts_with("uint") && !m.contains_key("minimum") {
                    m.insert("minimum".into(), Value::from(0));
                }
            }
            if m.get("default").is_some_and(Value::is_null) {
                m.remove("default");
            }
            // An enum listing null (an optional enum) lists only the real values.
            if let Some(Value::Array(vals)) = m.get_mut("enum") {
                vals.retain(|x| !x.is_null());
            }
            if let Some(Value::Object(props)) = m.get_mut("properties") {
                props.values_mut().for_each(any_json_spelled_out);
            }
            for val in m.values_mut() {
                rewrite(val, defs, depth + 1);
            }
        }
        _ => {}
    }
}

/// Words a schema may carry that constrain nothing.
const ANNOTATIONS: &[&str] = &["description", "title", "default", "examples"];

/// A property of any JSON value (`serde_json::Value`: schemars writes `true` or
/// `{}`, which strict validators flag as constraining nothing) says so: one of
/// the JSON types other than null (a missing value is left out, not null).
fn any_json_spelled_out(v: &mut Value) {
    let bare = match v {
        Value::Bool(true) => true,
        Value::Object(m) => m.keys().all(|k| ANNOTATIONS.contains(&k.as_str())),
        _ => false,
    };
    if !bare {
        return;
    }
    if !v.is_object() {
        *v = Value::Object(Map::new());
    }
    let types = ["object", "array", "string", "number", "boolean"];
    let any: Vec<Value> = types
        .iter()
        .map(|t| serde_json::json!({ "type": t }))
        .collect();
    if let Value::Object(m) = v {
        m.insert("anyOf".into(), Value::Array(any));
    }
}

/// Argument names the tool does not take, with the answer to give: the valid
/// names, and the nearest one when a name looks like a typo.
pub fn unknown_arguments(
    tool: &str,
    schema: &Map<String, Value>,
    args: &Map<String, Value>,
) -> Option<String> {
    let props = schema.get("properties").and_then(Value::as_object)?;
    let unknown: Vec<&String> = args.keys().filter(|k| !props.contains_key(*k)).collect();
    if unknown.is_empty() {
        return None;
    }
    let valid: Vec<&str> = props.keys().map(String::as_str).collect();
    let mut parts = Vec::new();
    for u in &unknown {
        if let Some(hint) = renamed(tool, u) {
            parts.push(format!("{u:?} ({hint})"));
            continue;
        }
        let near = valid
            .iter()
            .map(|v| (distance(u, v), *v))
            .filter(|(d, v)| *d <= 2.max(v.len() / 3) || u.contains(v) || v.contains(u.as_str()))
            .min();
        parts.push(match near {
            Some((_, v)) => format!("{u:?} (did you mean {v:?}?)"),
            None => format!("{u:?}"),
        });
    }
    Some(format!(
        "unknown argument{} {} for {tool}; it takes: {}. Nothing was done: call {tool} again with those names.",
        if unknown.len() > 1 { "s" } else { "" },
        parts.join(", "),
        if valid.is_empty() {
            "no arguments".to_owned()
        } else {
            valid.join(", ")
        }
    ))
}

/// An argument the design document names differently, and what to write now.
/// Refused rather than read as an alias: `until` is my_inbox_defer's time, and the
/// design's contract fields hold values `when` and `then` do not take.
fn renamed(tool: &str, name: &str) -> Option<&'static str> {
    match (tool, name) {
        ("my_inbox_ack", "until") => Some(
            "the design's `until` is `message_id` with `through: true` here: that message and every \
             earlier one are acknowledged (`until` is my_inbox_defer's time)",
        ),
        ("contract_set", k) => domain::contracts::renamed_field(k),
        _ => None,
    }
}

/// Edit distance (insert, delete, substitute), for "did you mean".
fn distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut cur = vec![i + 1];
        for (j, cb) in b.iter().enumerate() {
            let sub = prev[j] + usize::from(ca != *cb);
            cur.push(sub.min(prev[j + 1] + 1).min(cur[j] + 1));
        }
        prev = cur;
    }
    prev[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn schemars_output_becomes_portable() {
        let mut s = json!({
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "type": "object",
            "properties": {
                "n": {"type": ["integer", "null"], "format": "uint64", "default": null},
                "x": {"type": "number", "format": "double"},
                "b": {"anyOf": [{"$ref": "#/$defs/Budget"}, {"type": "null"}], "description": "Guards."},
                "when": {"type": "string", "format": "date-time"},
                "any": {"description": "Any JSON."},
                "also": true
            },
            "$defs": {"Budget": {"type": "object", "properties": {"max": {"type": "integer", "format": "uint32"}}}}
        })
        .as_object()
        .unwrap()
        .clone();
        portable(&mut s, true);
        let any = json!([{"type": "object"}, {"type": "array"}, {"type": "string"},
                         {"type": "number"}, {"type": "boolean"}]);
        assert_eq!(
            Value::Object(s),
            json!({
                "type": "object",
                "additionalProperties": false,
                "properties": {
                    "n": {"type": "integer", "minimum": 0},
                    "x": {"type": "number"},
                    "b": {"type": "object", "description": "Guards.",
                          "properties": {"max": {"type": "integer", "minimum": 0}}},
                    "when": {"type": "string", "format": "date-time"},
                    "any": {"description": "Any JSON.", "anyOf": any.clone()},
                    "also": {"anyOf": any}
                }
            })
        );
    }

    #[test]
    fn unknown_names_get_the_valid_ones_and_the_nearest() {
        let schema = json!({"properties": {"name": {}, "backend": {}, "system": {}}});
        let schema = schema.as_object().unwrap();
        let args = json!({"name": "a", "system_prompt": "x"});
        let msg = unknown_arguments("agent_new", schema, args.as_object().unwrap()).unwrap();
        assert!(
            msg.contains("\"system_prompt\" (did you mean \"system\"?)"),
            "{msg}"
        );
        assert!(
            msg.contains("name, backend, system") || msg.contains("backend, name, system"),
            "{msg}"
        );
        let ok = json!({"name": "a"});
        assert!(unknown_arguments("agent_new", schema, ok.as_object().unwrap()).is_none());
    }

    /// The design's names are answered with the name to write now.
    #[test]
    fn the_designs_names_get_the_new_ones() {
        let check = |tool: &str, arg: &str, expect: Option<&str>| {
            let got = renamed(tool, arg);
            match expect {
                None => assert!(got.is_none(), "{tool} {arg}: {got:?}"),
                Some(e) => assert!(got.is_some_and(|g| g.contains(e)), "{tool} {arg}: {got:?}"),
            }
        };
        check(
            "my_inbox_ack",
            "until",
            Some("`message_id` with `through: true`"),
        );
        check("my_inbox_defer", "until", None);
        check("contract_set", "condition", Some("written `when`"));
        check("contract_set", "action", Some("written `then`"));
        check("contract_set", "scope", Some("written `org`"));
        check("agent_new", "condition", None);
        let schema = json!({"properties": {"message_id": {}, "through": {}}});
        let args = json!({"message_id": "m", "until": "m"});
        let msg = unknown_arguments(
            "my_inbox_ack",
            schema.as_object().unwrap(),
            args.as_object().unwrap(),
        )
        .unwrap();
        assert!(msg.contains("\"until\" (the design's `until`"), "{msg}");
    }
}
