//! The field readers every contract form shares: an object, its known fields,
//! text, a glob, member names. Each error names the field.

use serde_json::{Map, Value};

type R<T> = Result<T, String>;

pub(crate) fn object<'a>(v: &'a Value, what: &str) -> R<&'a Map<String, Value>> {
    v.as_object()
        .ok_or_else(|| format!("{what}: write an object with named fields"))
}

pub(crate) fn only(o: &Map<String, Value>, at: &str, known: &[&str]) -> R<()> {
    match o.keys().find(|k| !known.contains(&k.as_str())) {
        None => Ok(()),
        Some(k) => Err(format!(
            "{at}{k}: unknown field; the fields here are {}",
            known.join(", ")
        )),
    }
}

pub(crate) fn text(o: &Map<String, Value>, k: &str) -> R<Option<String>> {
    match o.get(k) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) if s.trim().is_empty() => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.trim().to_owned())),
        Some(Value::Number(n)) => Ok(Some(n.to_string())),
        Some(_) => Err(format!("{k}: write text")),
    }
}

pub(crate) fn glob_field(o: &Map<String, Value>, k: &str) -> R<Option<String>> {
    let g = text(o, k)?;
    if g.as_ref().is_some_and(|g| g.len() > 500) {
        return Err(format!("{k}: at most 500 characters"));
    }
    Ok(g.map(|g| g.trim_start_matches('@').to_owned()))
}

/// One member name or a list of them (`@` optional).
pub(crate) fn members(v: &Value, k: &str) -> R<Vec<String>> {
    let items: Vec<&Value> = match v {
        Value::Array(a) => a.iter().collect(),
        one => vec![one],
    };
    let mut out = Vec::new();
    for i in items {
        let s = i
            .as_str()
            .map(|s| s.trim().trim_start_matches('@'))
            .filter(|s| !s.is_empty())
            .ok_or_else(|| format!("{k}: member names, e.g. [user, reviewer]"))?;
        if s != crate::names::LEAD {
            crate::names::check_agent_name(s).map_err(|e| format!("{k}: {e}"))?;
        }
        if !out.iter().any(|x: &String| x.eq_ignore_ascii_case(s)) {
            out.push(s.to_owned());
        }
    }
    if out.is_empty() {
        return Err(format!("{k}: name at least one member"));
    }
    if out.len() > 20 {
        return Err(format!("{k}: at most 20 members"));
    }
    Ok(out)
}

/// A text field that is one of `words`, if given.
pub(crate) fn word(o: &Map<String, Value>, k: &str, words: &[&str]) -> R<Option<String>> {
    let w = text(o, k)?;
    match &w {
        Some(x) if !words.contains(&x.as_str()) => {
            Err(format!("{k}: {x:?}; use one of {}", words.join(", ")))
        }
        _ => Ok(w),
    }
}
