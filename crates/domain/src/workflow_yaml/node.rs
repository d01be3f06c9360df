//! The document as a tree for validation.
//!
//! Why not `serde_norway::Value`: its `Mapping` refuses a duplicate key with an
//! error placed at the start of the enclosing mapping, not at the duplicate. This
//! tree keeps every entry in file order (duplicates included), so the validator
//! can name the second key at its own position; entry and item indexes are also
//! what [`super::locate`] walks to find a node in the text.

use serde::de::{self, DeserializeSeed, Deserializer, EnumAccess, MapAccess, SeqAccess, Visitor};
use std::fmt;

#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Node {
    Null,
    Bool(bool),
    Int(i128),
    Float(f64),
    Str(String),
    Seq(Vec<Node>),
    /// Entries in file order; duplicate keys are kept.
    Map(Vec<(Node, Node)>),
}

impl Node {
    /// What it is, in the words of an error message.
    pub(crate) fn kind(&self) -> &'static str {
        match self {
            Node::Null => "nothing",
            Node::Bool(_) => "true/false",
            Node::Int(_) | Node::Float(_) => "a number",
            Node::Str(_) => "text",
            Node::Seq(_) => "a list",
            Node::Map(_) => "a mapping",
        }
    }

    pub(crate) fn as_str(&self) -> Option<&str> {
        match self {
            Node::Str(s) => Some(s),
            _ => None,
        }
    }

    /// The value of the entry named `key` (and its index), in a mapping.
    pub(crate) fn entry(&self, key: &str) -> Option<(usize, &Node)> {
        match self {
            Node::Map(entries) => entries
                .iter()
                .enumerate()
                .find(|(_, (k, _))| k.as_str() == Some(key))
                .map(|(i, (_, v))| (i, v)),
            _ => None,
        }
    }

    /// A scalar as text (for keys in messages).
    pub(crate) fn scalar_text(&self) -> String {
        match self {
            Node::Null => "~".into(),
            Node::Bool(b) => b.to_string(),
            Node::Int(i) => i.to_string(),
            Node::Float(f) => f.to_string(),
            Node::Str(s) => s.clone(),
            Node::Seq(_) => "[...]".into(),
            Node::Map(_) => "{...}".into(),
        }
    }
}

/// Reads one YAML document. Errors are serde_norway's, with their positions.
pub(crate) fn read(text: &str) -> Result<Node, serde_norway::Error> {
    NodeSeed.deserialize(serde_norway::Deserializer::from_str(text))
}

struct NodeSeed;

impl<'de> DeserializeSeed<'de> for NodeSeed {
    type Value = Node;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Node, D::Error> {
        d.deserialize_any(NodeVisitor)
    }
}

struct NodeVisitor;

impl<'de> Visitor<'de> for NodeVisitor {
    type Value = Node;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a YAML value")
    }
    fn visit_unit<E>(self) -> Result<Node, E> {
        Ok(Node::Null)
    }
    fn visit_none<E>(self) -> Result<Node, E> {
        Ok(Node::Null)
    }
    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Node, D::Error> {
        d.deserialize_any(NodeVisitor)
    }
    fn visit_bool<E>(self, b: bool) -> Result<Node, E> {
        Ok(Node::Bool(b))
    }
    fn visit_i64<E>(self, v: i64) -> Result<Node, E> {
        Ok(Node::Int(v.into()))
    }
    fn visit_u64<E>(self, v: u64) -> Result<Node, E> {
        Ok(Node::Int(v.into()))
    }
    fn visit_i128<E>(self, v: i128) -> Result<Node, E> {
        Ok(Node::Int(v))
    }
    fn visit_f64<E>(self, v: f64) -> Result<Node, E> {
        Ok(Node::Float(v))
    }
    fn visit_str<E>(self, v: &str) -> Result<Node, E> {
        Ok(Node::Str(v.to_owned()))
    }
    fn visit_string<E>(self, v: String) -> Result<Node, E> {
        Ok(Node::Str(v))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Node, A::Error> {
        let mut items = Vec::new();
        while let Some(n) = seq.next_element_seed(NodeSeed)? {
            items.push(n);
        }
        Ok(Node::Seq(items))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Node, A::Error> {
        let mut entries = Vec::new();
        while let Some(k) = map.next_key_seed(NodeSeed)? {
            let v = map.next_value_seed(NodeSeed)?;
            entries.push((k, v));
        }
        Ok(Node::Map(entries))
    }
    /// serde_norway hands a value with a custom tag (`!foo bar`) over as an enum.
    /// The error gets the position of the tagged node.
    fn visit_enum<A: EnumAccess<'de>>(self, _data: A) -> Result<Node, A::Error> {
        Err(de::Error::custom(TAG_REFUSED))
    }
}

pub(crate) const TAG_REFUSED: &str = "YAML tags such as !name are not supported";
