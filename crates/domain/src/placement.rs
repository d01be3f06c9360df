//! Where an agent runs when several nodes share a store (pure: the setting, its
//! parsing and label matching).
//!
//! An agent is placed by name (`node: "gpu-1"`) or by labels (`node: {labels:
//! [gpu, eu]}`): then on the least loaded live node that has every one of them.
//! A node offers labels with `--labels gpu,eu`. Labels are stored as one text,
//! `",eu,gpu,"` (sorted, no duplicates; `""` for none), in `nodes.labels` and
//! `agents.labels`.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

const MAX_NAME: usize = 63;
/// At most this many labels on a node or an agent.
pub const MAX_LABELS: usize = 16;

/// Checks a node name or a label: 1 to 63 letters, digits, `.`, `_` or `-`,
/// starting with a letter or digit (a host name fits).
pub fn validate_name(name: &str) -> Result<(), String> {
    let ok = !name.is_empty()
        && name.len() <= MAX_NAME
        && name.starts_with(|c: char| c.is_ascii_alphanumeric())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'));
    if ok {
        Ok(())
    } else {
        Err(format!(
            "{name:?}: use 1 to {MAX_NAME} letters, digits, '.', '_' or '-', starting with a \
             letter or digit"
        ))
    }
}

/// Where to run an agent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Placement {
    /// On this node.
    Node(String),
    /// On the least loaded live node with all these labels (sorted, no
    /// duplicates; empty: any node).
    Labels(Vec<String>),
}

/// Reads labels: each checked, sorted, duplicates dropped, at most
/// [`MAX_LABELS`]. `field` names them in errors.
pub fn labels<'a>(
    field: &str,
    given: impl IntoIterator<Item = &'a str>,
) -> Result<Vec<String>, String> {
    let mut out = Vec::new();
    for l in given {
        let l = l.trim();
        validate_name(l).map_err(|e| format!("{field}: label {e}"))?;
        out.push(l.to_owned());
    }
    out.sort();
    out.dedup();
    if out.len() > MAX_LABELS {
        return Err(format!("{field}: at most {MAX_LABELS} labels"));
    }
    Ok(out)
}

/// Reads `node` as written in a tool call or YAML: a node's name, or
/// `{labels: [..]}`. Errors name the field and the fix.
pub fn parse(v: &Value) -> Result<Placement, String> {
    match v {
        Value::String(s) => {
            let s = s.trim();
            validate_name(s).map_err(|e| format!("node {e}"))?;
            Ok(Placement::Node(s.to_owned()))
        }
        Value::Object(o) => {
            if let Some(k) = o.keys().find(|k| *k != "labels") {
                return Err(format!(
                    "node.{k} is not a setting; write node: NAME, or node: {{labels: [..]}}"
                ));
            }
            let Some(Value::Array(given)) = o.get("labels") else {
                return Err("node.labels must be a list of labels, e.g. [gpu, eu]".to_owned());
            };
            let texts = given
                .iter()
                .map(|l| l.as_str().ok_or("node.labels: each label is a string"))
                .collect::<Result<Vec<_>, _>>()?;
            Ok(Placement::Labels(labels("node.labels", texts)?))
        }
        _ => Err("node must be a node's name, or {labels: [..]}".to_owned()),
    }
}

/// Labels as stored: `",a,b,"`, or `""` for none.
pub fn to_text(labels: &[String]) -> String {
    match labels.is_empty() {
        true => String::new(),
        false => format!(",{},", labels.join(",")),
    }
}

/// Labels from their stored text.
pub fn from_text(text: &str) -> Vec<String> {
    text.split(',')
        .filter(|l| !l.is_empty())
        .map(str::to_owned)
        .collect()
}

/// Whether a node offering `offered` (stored text) has every label of `needed`
/// (stored text).
pub fn satisfies(offered: &str, needed: &str) -> bool {
    from_text(needed)
        .iter()
        .all(|l| offered.contains(&format!(",{l},")))
}

/// The input form in a tool call: a node's name or `{labels: [..]}` (read by
/// [`parse`]; its schema is written out by hand).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(transparent)]
pub struct PlacementArg(pub Value);

impl PlacementArg {
    pub fn read(&self) -> Result<Placement, String> {
        parse(&self.0)
    }
}

impl JsonSchema for PlacementArg {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Placement".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "description": "The node to run it on: a node's name, or {labels: [..]} for the least loaded live node with all of them (default: the least loaded).",
            "anyOf": [
                {"type": "string"},
                {"type": "object", "properties": {
                    "labels": {"type": "array", "items": {"type": "string"}, "maxItems": MAX_LABELS}
                 }, "required": ["labels"], "additionalProperties": false}
            ]
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn reads_a_name_or_labels() {
        assert_eq!(parse(&json!("gpu-1")), Ok(Placement::Node("gpu-1".into())));
        assert_eq!(
            parse(&json!({"labels": ["gpu", "eu", "gpu"]})),
            Ok(Placement::Labels(vec!["eu".into(), "gpu".into()]))
        );
        assert_eq!(parse(&json!({"labels": []})), Ok(Placement::Labels(vec![])));
        for (bad, says) in [
            (json!({"label": ["gpu"]}), "node.label is not a setting"),
            (json!({"labels": "gpu"}), "node.labels must be a list"),
            (json!({"labels": ["a b"]}), "node.labels: label \"a b\""),
            (json!({"labels": [1]}), "each label is a string"),
            (json!("-x"), "node \"-x\""),
            (json!(3), "node must be"),
        ] {
            let e = parse(&bad).unwrap_err();
            assert!(e.contains(says), "{bad}: {e}");
        }
        let many: Vec<String> = (0..17).map(|i| format!("l{i}")).collect();
        assert!(labels("--labels", many.iter().map(String::as_str)).is_err());
    }

    #[test]
    fn matches_every_label_and_only_whole_labels() {
        let offered = to_text(&["eu".into(), "gpu".into()]);
        assert_eq!(offered, ",eu,gpu,");
        assert!(satisfies(&offered, ""));
        assert!(satisfies(&offered, ",gpu,"));
        assert!(satisfies(&offered, ",eu,gpu,"));
        assert!(!satisfies(&offered, ",gp,"));
        assert!(!satisfies(&offered, ",eu,us,"));
        assert!(!satisfies("", ",eu,"));
        assert_eq!(from_text(&offered), vec!["eu", "gpu"]);
        assert!(from_text("").is_empty());
    }
}
