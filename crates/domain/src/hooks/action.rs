//! What a hook does with a delivery, as the lead declared it: start a workflow
//! from a file (a step workflow's `trigger` fires as it starts), or post to an
//! instance's channel. Values come from the payload by `$.a.b` paths.

use crate::error::{Error, Result};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use std::collections::BTreeMap;

/// The most params (or posted fields) a hook may take from a payload.
pub const MAX_PARAMS: usize = 32;

/// A value taken from a payload: literal text, then the value at a `$.` path if
/// one follows (`$.pull_request.number` keeps its type; `pr-$.pull_request.number`
/// is text).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Param {
    pub prefix: String,
    pub path: Option<String>,
}

impl Param {
    pub fn parse(s: &str) -> Self {
        let at = if s == "$" { Some(0) } else { s.find("$.") };
        match at {
            Some(i) => Self {
                prefix: s[..i].to_owned(),
                path: Some(s[i..].to_owned()),
            },
            None => Self {
                prefix: s.to_owned(),
                path: None,
            },
        }
    }

    /// Its value in `payload`; names the path it could not find.
    pub fn resolve(&self, payload: &Value) -> std::result::Result<Value, String> {
        let Some(path) = &self.path else {
            return Ok(Value::String(self.prefix.clone()));
        };
        let v = super::pick(payload, path).ok_or_else(|| format!("the payload has no {path}"))?;
        if self.prefix.is_empty() {
            return Ok(v.clone());
        }
        let text = match v {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        Ok(Value::String(format!("{}{text}", self.prefix)))
    }

    pub fn as_text(&self) -> String {
        format!("{}{}", self.prefix, self.path.as_deref().unwrap_or(""))
    }
}

/// What a delivery does.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Action {
    /// Starts the workflow in `file` with `params`, as instance `tag` (default
    /// `main`).
    Start {
        file: String,
        params: BTreeMap<String, Param>,
        tag: Option<Param>,
        /// The file's SHA-256 (hex) when the hook was set: a file changed since
        /// (by anyone who can write it) starts nothing until the lead sets the
        /// hook again.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        sha256: Option<String>,
    },
    /// Posts to `workflow`'s channel (mentioning `to`): the payload, or the
    /// `params` fields taken from it.
    Post {
        workflow: String,
        to: Option<String>,
        params: BTreeMap<String, Param>,
    },
}

impl Action {
    /// The values of its params in `payload`, by name.
    pub fn resolve(&self, payload: &Value) -> std::result::Result<Map<String, Value>, String> {
        let params = match self {
            Action::Start { params, .. } | Action::Post { params, .. } => params,
        };
        params
            .iter()
            .map(|(k, p)| Ok((k.clone(), p.resolve(payload)?)))
            .collect()
    }
}

/// A hook's `params` as given (`{"pr": "$.pull_request.number"}`), checked.
pub fn parse_params(given: Option<&Map<String, Value>>) -> Result<BTreeMap<String, Param>> {
    let Some(given) = given else {
        return Ok(BTreeMap::new());
    };
    if given.len() > MAX_PARAMS {
        return Err(Error::invalid(format!(
            "params: at most {MAX_PARAMS}, given {}",
            given.len()
        )));
    }
    given
        .iter()
        .map(|(k, v)| {
            let Value::String(s) = v else {
                return Err(Error::invalid(format!(
                    "params.{k}: give a `$.a.b` path into the payload or text, e.g. \"$.pull_request.number\""
                )));
            };
            Ok((k.clone(), Param::parse(s)))
        })
        .collect()
}

/// A hook's name: what its URL ends with (`/hooks/<name>`).
pub fn check_name(name: &str) -> Result<()> {
    let ok = !name.is_empty()
        && name.len() <= 64
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
    if ok {
        Ok(())
    } else {
        Err(Error::invalid(format!(
            "name {name:?}: 1 to 64 of A-Z a-z 0-9 - _ (it ends the hook's URL, /hooks/<name>)"
        )))
    }
}
