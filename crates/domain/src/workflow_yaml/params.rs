//! Binding the caller's params (a JSON object) to the declared ones.
//!
//! Strict on purpose: a misspelt param name would otherwise silently fall back
//! to its default and run the workflow on the wrong input.

use super::{ParamDef, ParamKind};
use serde_json::Value;
use std::collections::BTreeMap;

/// Every declared param's value as text (given, else its default, else empty).
pub fn bind_params(
    defs: &[ParamDef],
    given: &serde_json::Map<String, Value>,
) -> Result<BTreeMap<String, String>, String> {
    let unknown: Vec<&str> = given
        .keys()
        .filter(|k| !defs.iter().any(|d| &d.name == *k))
        .map(String::as_str)
        .collect();
    if !unknown.is_empty() {
        let known = if defs.is_empty() {
            "this workflow declares no parameters".to_owned()
        } else {
            let names: Vec<&str> = defs.iter().map(|d| d.name.as_str()).collect();
            let mut s = format!("known: {}", names.join(", "));
            if let [one] = unknown.as_slice() {
                s += &super::suggest::did_you_mean(one, &names);
            }
            s
        };
        return Err(format!(
            "unknown parameter(s): {} ({known})",
            unknown.join(", ")
        ));
    }
    let mut out = BTreeMap::new();
    let mut missing = Vec::new();
    for d in defs {
        let value = match given.get(&d.name) {
            None | Some(Value::Null) => match (&d.default, d.required) {
                (Some(v), _) => v.clone(),
                (None, true) => {
                    missing.push(d.name.as_str());
                    continue;
                }
                (None, false) => String::new(),
            },
            Some(v) => typed(d, v)?,
        };
        out.insert(d.name.clone(), value);
    }
    if !missing.is_empty() {
        return Err(format!(
            "missing required parameter(s): {}",
            missing.join(", ")
        ));
    }
    Ok(out)
}

/// A given value as text, if it has the param's type.
fn typed(d: &ParamDef, v: &Value) -> Result<String, String> {
    let name = &d.name;
    match (d.kind, v) {
        (ParamKind::String, Value::String(s)) => Ok(s.clone()),
        (ParamKind::String, Value::Number(n)) => Ok(n.to_string()),
        (ParamKind::String, Value::Bool(b)) => Ok(b.to_string()),
        (ParamKind::Number, Value::Number(n)) => Ok(n.to_string()),
        (ParamKind::Number, Value::String(s)) => match s.trim().parse::<f64>() {
            Ok(f) if f.is_finite() => Ok(s.trim().to_owned()),
            _ => Err(format!("parameter {name} must be a number, got {s:?}")),
        },
        (ParamKind::Boolean, Value::Bool(b)) => Ok(b.to_string()),
        (ParamKind::Boolean, Value::String(s)) if s.eq_ignore_ascii_case("true") => {
            Ok("true".into())
        }
        (ParamKind::Boolean, Value::String(s)) if s.eq_ignore_ascii_case("false") => {
            Ok("false".into())
        }
        (ParamKind::Boolean, other) => Err(format!(
            "parameter {name} must be true or false, got {other}"
        )),
        (kind, other) => Err(format!(
            "parameter {name} must be a {}, got {other}",
            kind.as_str()
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn def(name: &str, kind: ParamKind, required: bool, default: Option<&str>) -> ParamDef {
        ParamDef {
            name: name.into(),
            description: None,
            kind,
            required,
            default: default.map(Into::into),
        }
    }

    fn given(v: Value) -> serde_json::Map<String, Value> {
        v.as_object().cloned().unwrap_or_default()
    }

    #[test]
    fn binding() {
        let defs = [
            def("pr", ParamKind::Number, true, None),
            def("topic", ParamKind::String, false, Some("rust")),
            def("dry", ParamKind::Boolean, false, Some("false")),
            def("note", ParamKind::String, false, None),
        ];
        let b = bind_params(&defs, &given(json!({"pr": 12}))).unwrap();
        assert_eq!(b["pr"], "12");
        assert_eq!(b["topic"], "rust");
        assert_eq!(b["dry"], "false");
        assert_eq!(b["note"], "");
        let b = bind_params(
            &defs,
            &given(json!({"pr": " 1.5 ", "topic": 7, "dry": "TRUE", "note": null})),
        )
        .unwrap();
        assert_eq!(
            (b["pr"].as_str(), b["topic"].as_str(), b["dry"].as_str()),
            ("1.5", "7", "true")
        );

        let e = bind_params(&defs, &given(json!({}))).unwrap_err();
        assert_eq!(e, "missing required parameter(s): pr");
        let e = bind_params(&defs, &given(json!({"pr": "x"}))).unwrap_err();
        assert_eq!(e, "parameter pr must be a number, got \"x\"");
        let e = bind_params(&defs, &given(json!({"pr": 1, "dry": "yes"}))).unwrap_err();
        assert!(e.contains("dry must be true or false"), "{e}");
        let e = bind_params(&defs, &given(json!({"pr": 1, "topik": "a"}))).unwrap_err();
        assert!(
            e.contains("unknown parameter(s): topik") && e.contains("pr, topic, dry, note"),
            "{e}"
        );
        assert!(e.contains("did you mean \"topic\""), "{e}");
        let e = bind_params(&[], &given(json!({"x": 1}))).unwrap_err();
        assert!(e.contains("declares no parameters"), "{e}");
        let e = bind_params(&defs, &given(json!({"pr": [1]}))).unwrap_err();
        assert!(e.contains("must be a number"), "{e}");
    }
}
