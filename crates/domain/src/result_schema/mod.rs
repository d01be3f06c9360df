//! Results with a shape (pure): a JSON Schema subset a lead gives with an ask or a
//! step gives in its YAML, and the check of a result against it.
//!
//! The subset: `type` (object, array, string, number, integer, boolean, null),
//! `properties`, `required`, `enum`, `items`, and `description` (read, not
//! checked). [`ResultSchema::parse`] refuses anything else, naming the keyword and
//! where it is, so a mistake is caught when the schema is given; its size and depth
//! are bounded. [`ResultSchema::check`] names the first misfits of a result by a
//! JSON-path-like name (`result.findings[2].severity`), each phrased so that the
//! model that wrote the result can fix it. Properties not named in `properties` are
//! allowed, as JSON Schema allows them.

use serde_json::{Map, Value};
use std::fmt;

/// The deepest a schema may nest (an object in an array in an object ... ).
pub const MAX_DEPTH: usize = 8;
/// The most schemas (nodes) one schema may hold, counting itself.
pub const MAX_NODES: usize = 200;
/// The most values an `enum` may list.
pub const MAX_ENUM: usize = 100;
/// The most bytes a schema may take as JSON.
pub const MAX_SCHEMA_BYTES: usize = 16 * 1024;
/// The most misfits one check reports.
pub const MAX_MISFITS: usize = 5;

const KEYWORDS: &str = "type, properties, required, enum, items, description";

/// The JSON types a schema may name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Type {
    Object,
    Array,
    String,
    Number,
    Integer,
    Boolean,
    Null,
}

impl Type {
    const ALL: [(Type, &'static str); 7] = [
        (Type::Object, "object"),
        (Type::Array, "array"),
        (Type::String, "string"),
        (Type::Number, "number"),
        (Type::Integer, "integer"),
        (Type::Boolean, "boolean"),
        (Type::Null, "null"),
    ];

    fn parse(s: &str) -> Option<Type> {
        Self::ALL.iter().find(|(_, n)| *n == s).map(|(t, _)| *t)
    }

    pub fn as_str(self) -> &'static str {
        Self::ALL
            .iter()
            .find(|(t, _)| *t == self)
            .map_or("", |(_, n)| n)
    }

    fn admits(self, v: &Value) -> bool {
        match self {
            Type::Object => v.is_object(),
            Type::Array => v.is_array(),
            Type::String => v.is_string(),
            Type::Number => v.is_number(),
            Type::Integer => {
                v.is_i64() || v.is_u64() || v.as_f64().is_some_and(|f| f.fract() == 0.0)
            }
            Type::Boolean => v.is_boolean(),
            Type::Null => v.is_null(),
        }
    }
}

/// One schema of the subset, parsed.
#[derive(Debug, Clone, PartialEq)]
pub struct Node {
    pub ty: Option<Type>,
    /// In the order written.
    pub properties: Vec<(String, Node)>,
    pub required: Vec<String>,
    pub items: Option<Box<Node>>,
    pub one_of: Option<Vec<Value>>,
}

/// A schema the lead or a step gave, parsed, with the JSON it was given as.
#[derive(Debug, Clone, PartialEq)]
pub struct ResultSchema {
    root: Node,
    source: Value,
}

/// Why a schema was refused: where in it (`properties.findings.items`, empty for
/// the schema itself) and what to write instead.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{}{message}", if path.is_empty() { String::new() } else { format!("at {path}: ") })]
pub struct SchemaError {
    pub path: String,
    pub message: String,
}

/// One way a result does not fit: the field (`result.findings[2].severity`) and
/// what was expected of it.
#[derive(Debug, Clone, PartialEq)]
pub struct Misfit {
    pub path: String,
    pub message: String,
}

impl fmt::Display for Misfit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.path, self.message)
    }
}

/// The misfits of a result, in one sentence per misfit for the model to act on.
pub fn describe(misfits: &[Misfit]) -> String {
    let lines: Vec<String> = misfits.iter().map(ToString::to_string).collect();
    lines.join("; ")
}

/// A schema kept as JSON (a task's, a stored ask's) and a result: Ok when it fits,
/// else the refusal in words for the model that submitted it (each misfit named by
/// its field), or why the schema itself is refused.
pub fn check_result(schema: &Value, result: &Value) -> Result<(), String> {
    let s = ResultSchema::parse(schema).map_err(|e| format!("result schema: {e}"))?;
    s.check(result).map_err(|m| {
        format!(
            "the result does not fit its schema: {}. Fix {} and submit again",
            describe(&m),
            if m.len() == 1 { "it" } else { "them" }
        )
    })
}

impl ResultSchema {
    /// Parses a schema, refusing what the subset does not have.
    pub fn parse(v: &Value) -> Result<ResultSchema, SchemaError> {
        let bytes = v.to_string().len();
        if bytes > MAX_SCHEMA_BYTES {
            return Err(err(
                "",
                format!("the schema is {bytes} bytes; at most {MAX_SCHEMA_BYTES}"),
            ));
        }
        let mut nodes = 0;
        let root = parse_node(v, "", 1, &mut nodes)?;
        Ok(ResultSchema {
            root,
            source: v.clone(),
        })
    }

    /// The schema as it was given.
    pub fn as_json(&self) -> &Value {
        &self.source
    }

    /// The top schema.
    pub fn root(&self) -> &Node {
        &self.root
    }

    /// A top-level property of an object schema.
    pub fn property(&self, name: &str) -> Option<&Node> {
        self.root
            .properties
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, s)| s)
    }

    /// Checks a result: Ok, or its first misfits (at most [`MAX_MISFITS`]), named
    /// from `result`.
    pub fn check(&self, value: &Value) -> Result<(), Vec<Misfit>> {
        let mut out = Vec::new();
        check_node(&self.root, value, "result", &mut out);
        if out.is_empty() { Ok(()) } else { Err(out) }
    }
}

impl Node {
    /// Whether a value fits this schema (its type and enum; for `on:` tests).
    pub fn admits(&self, v: &Value) -> bool {
        let mut out = Vec::new();
        check_node(self, v, "", &mut out);
        out.is_empty()
    }

    /// What it expects, in words: "string, one of approved, changes_requested".
    pub fn words(&self) -> String {
        let mut parts = Vec::new();
        if let Some(t) = self.ty {
            parts.push(t.as_str().to_string());
        }
        if let Some(e) = &self.one_of {
            parts.push(format!("one of {}", list(e)));
        }
        if parts.is_empty() {
            "any value".into()
        } else {
            parts.join(", ")
        }
    }
}

fn err(path: &str, message: String) -> SchemaError {
    SchemaError {
        path: path.into(),
        message,
    }
}

fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.into()
    } else {
        format!("{path}.{key}")
    }
}

fn parse_node(v: &Value, path: &str, depth: usize, nodes: &mut usize) -> Result<Node, SchemaError> {
    *nodes += 1;
    if *nodes > MAX_NODES {
        return Err(err(
            path,
            format!("the schema has over {MAX_NODES} schemas in it"),
        ));
    }
    if depth > MAX_DEPTH {
        return Err(err(
            path,
            format!("the schema nests deeper than {MAX_DEPTH}"),
        ));
    }
    let Value::Object(o) = v else {
        return Err(err(
            path,
            format!(
                "a schema must be an object such as {{\"type\": \"string\"}}, not {}",
                got(v)
            ),
        ));
    };
    if let Some(k) = o
        .keys()
        .find(|k| !KEYWORDS.split(", ").any(|w| w == k.as_str()))
    {
        return Err(err(
            path,
            format!("`{k}` is not supported; a result schema may use only {KEYWORDS}"),
        ));
    }
    if o.get("description").is_some_and(|d| !d.is_string()) {
        return Err(err(&join(path, "description"), "must be a string".into()));
    }
    let ty = parse_type(o, path)?;
    let (properties, required) = parse_object(o, ty, path, depth, nodes)?;
    let items = match o.get("items") {
        None => None,
        Some(_) if ty != Some(Type::Array) => {
            return Err(err(path, "`items` needs \"type\": \"array\"".into()));
        }
        Some(i) => Some(Box::new(parse_node(
            i,
            &join(path, "items"),
            depth + 1,
            nodes,
        )?)),
    };
    let one_of = parse_enum(o, ty, path)?;
    Ok(Node {
        ty,
        properties,
        required,
        items,
        one_of,
    })
}

fn parse_type(o: &Map<String, Value>, path: &str) -> Result<Option<Type>, SchemaError> {
    let Some(t) = o.get("type") else {
        return Ok(None);
    };
    let names: Vec<&str> = Type::ALL.iter().map(|(_, n)| *n).collect();
    t.as_str().and_then(Type::parse).map(Some).ok_or_else(|| {
        err(
            &join(path, "type"),
            format!("must be one of {}, not {}", names.join(", "), got(t)),
        )
    })
}

type Props = (Vec<(String, Node)>, Vec<String>);

fn parse_object(
    o: &Map<String, Value>,
    ty: Option<Type>,
    path: &str,
    depth: usize,
    nodes: &mut usize,
) -> Result<Props, SchemaError> {
    let has = o.contains_key("properties") || o.contains_key("required");
    if has && ty != Some(Type::Object) {
        return Err(err(
            path,
            "`properties` and `required` need \"type\": \"object\"".into(),
        ));
    }
    let mut properties = Vec::new();
    match o.get("properties") {
        None => {}
        Some(Value::Object(p)) => {
            let at = join(path, "properties");
            for (name, s) in p {
                properties.push((
                    name.clone(),
                    parse_node(s, &join(&at, name), depth + 1, nodes)?,
                ));
            }
        }
        Some(v) => {
            return Err(err(
                &join(path, "properties"),
                format!("must be an object of schemas by name, not {}", got(v)),
            ));
        }
    }
    let at = join(path, "required");
    let mut required: Vec<String> = Vec::new();
    match o.get("required") {
        None => {}
        Some(Value::Array(r)) => {
            for n in r {
                let Some(n) = n.as_str() else {
                    return Err(err(
                        &at,
                        format!("must list property names, not {}", got(n)),
                    ));
                };
                if !properties.iter().any(|(p, _)| p == n) {
                    return Err(err(
                        &at,
                        format!("names {n:?}, which is not in `properties`"),
                    ));
                }
                if !required.iter().any(|r| r == n) {
                    required.push(n.into());
                }
            }
        }
        Some(v) => {
            return Err(err(
                &at,
                format!("must be an array of names, not {}", got(v)),
            ));
        }
    }
    Ok((properties, required))
}

fn parse_enum(
    o: &Map<String, Value>,
    ty: Option<Type>,
    path: &str,
) -> Result<Option<Vec<Value>>, SchemaError> {
    let at = join(path, "enum");
    match o.get("enum") {
        None => Ok(None),
        Some(Value::Array(e)) if e.is_empty() || e.len() > MAX_ENUM => Err(err(
            &at,
            format!("must list 1 to {MAX_ENUM} values, not {}", e.len()),
        )),
        Some(Value::Array(e)) => {
            if let (Some(t), Some(bad)) = (ty, e.iter().find(|v| ty.is_some_and(|t| !t.admits(v))))
            {
                return Err(err(
                    &at,
                    format!(
                        "lists {}, which is not of the schema's type {}",
                        got(bad),
                        t.as_str()
                    ),
                ));
            }
            Ok(Some(e.clone()))
        }
        Some(v) => Err(err(
            &at,
            format!("must be an array of values, not {}", got(v)),
        )),
    }
}

fn check_node(s: &Node, v: &Value, path: &str, out: &mut Vec<Misfit>) {
    if out.len() >= MAX_MISFITS {
        return;
    }
    let mut miss = |message: String| {
        out.push(Misfit {
            path: path.into(),
            message,
        })
    };
    if let Some(t) = s.ty.filter(|t| !t.admits(v)) {
        return miss(format!("expected {}; got {}", t.as_str(), got(v)));
    }
    if let Some(e) = s.one_of.as_ref().filter(|e| !e.contains(v)) {
        return miss(format!("expected one of {}; got {}", list(e), shown(v)));
    }
    if let Value::Object(o) = v {
        for r in &s.required {
            if !o.contains_key(r) && out.len() < MAX_MISFITS {
                let want = s
                    .properties
                    .iter()
                    .find(|(n, _)| n == r)
                    .map(|(_, p)| p.words());
                out.push(Misfit {
                    path: join(path, r),
                    message: format!(
                        "missing; it is required ({})",
                        want.unwrap_or_else(|| "any value".into())
                    ),
                });
            }
        }
        for (name, p) in &s.properties {
            if let Some(x) = o.get(name) {
                check_node(p, x, &join(path, name), out);
            }
        }
    }
    if let (Value::Array(a), Some(items)) = (v, &s.items) {
        for (i, x) in a.iter().enumerate() {
            check_node(items, x, &format!("{path}[{i}]"), out);
        }
    }
}

/// A value as a misfit shows it: its type and, if short, itself.
fn got(v: &Value) -> String {
    let kind = match v {
        Value::Null => return "null".into(),
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(a) => return format!("an array of {}", a.len()),
        Value::Object(_) => return "an object".into(),
    };
    format!("{kind} {}", shown(v))
}

fn shown(v: &Value) -> String {
    let s = v.to_string();
    if s.chars().count() > 60 {
        format!("{}...", s.chars().take(57).collect::<String>())
    } else {
        s
    }
}

fn list(values: &[Value]) -> String {
    let words: Vec<String> = values
        .iter()
        .map(|v| v.as_str().map_or_else(|| v.to_string(), String::from))
        .collect();
    words.join(", ")
}

#[cfg(test)]
mod tests;
