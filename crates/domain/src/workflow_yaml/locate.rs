//! Where things are in the YAML text.
//!
//! serde_norway exposes positions only on errors (`Error::location()`), and its
//! libyaml event parser is private. But every error raised by a visitor is stamped
//! with the start mark of the node being visited. So to find a node, the text is
//! deserialized again with a seed that walks the same path (entry and item
//! indexes, as in [`super::node::Node`]) and fails on arrival: the error's
//! location is the node's own start, computed by libyaml itself (the key's first
//! character, the opening quote, the `|` of a block scalar, the first key of a
//! block mapping). It costs one more parse per error, and only errors need it.
//!
//! The same walk, continuing instead of failing, deserializes a typed value
//! (`Budget`, `MockRule`s) at a path, so that serde's own errors inside it (an
//! unknown field, a wrong type) keep their exact positions.
//!
//! Inside a scalar, a `${{` is found by a scan of the raw text from the scalar's
//! start: the k-th `${{` of the value is the k-th in the source, in every style
//! (plain, quoted, block), because folding and escapes never create or split one
//! (only an escape such as `"\x24{{"` would, and then the scalar's start is used).

use serde::de::{
    self, DeserializeOwned, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess,
    Visitor,
};
use std::fmt;
use std::marker::PhantomData;

/// One step from a node to a child.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Step {
    /// The value of a mapping's i-th entry.
    Entry(usize),
    /// The key of a mapping's i-th entry (only as the last step).
    Key(usize),
    /// A list's i-th item.
    Item(usize),
}

/// A 1-based position.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Pos {
    pub line: usize,
    pub column: usize,
}

impl Pos {
    pub(crate) const START: Pos = Pos { line: 1, column: 1 };
}

/// The start of the node at `path` (the nearest existing ancestor if the path
/// does not exist).
pub(crate) fn locate(text: &str, path: &[Step]) -> Option<Pos> {
    let de = serde_norway::Deserializer::from_str(text);
    match (Walk { path, target: Fail }).deserialize(de) {
        Ok(()) => None,
        Err(e) => e.location().map(|l| Pos {
            line: l.line(),
            column: l.column(),
        }),
    }
}

/// Deserializes the node at `path` as a `T`; errors keep their positions.
pub(crate) fn extract<T: DeserializeOwned>(
    text: &str,
    path: &[Step],
) -> Result<T, serde_norway::Error> {
    let de = serde_norway::Deserializer::from_str(text);
    Walk {
        path,
        target: Take(PhantomData::<T>),
    }
    .deserialize(de)
}

/// The byte offset of a 1-based line and column (columns count characters, as
/// libyaml does), or None if the text has no such place.
pub(crate) fn offset_of(text: &str, pos: Pos) -> Option<usize> {
    let mut start = 0;
    for _ in 1..pos.line {
        start += text.get(start..)?.find('\n')? + 1;
    }
    let line = text.get(start..)?;
    let mut chars = line.char_indices();
    for _ in 1..pos.column {
        let (_, c) = chars.next()?;
        if c == '\n' {
            return None;
        }
    }
    Some(start + chars.next().map_or(line.len(), |(i, _)| i))
}

/// The 1-based position of a byte offset.
pub(crate) fn pos_of(text: &str, offset: usize) -> Pos {
    let mut offset = offset.min(text.len());
    while !text.is_char_boundary(offset) {
        offset -= 1;
    }
    let before = &text[..offset];
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    Pos {
        line: before.matches('\n').count() + 1,
        column: before[line_start..].chars().count() + 1,
    }
}

/// The position of the `k`-th (0-based) `${{` of a scalar that starts at `start`.
pub(crate) fn nth_expression(text: &str, start: Pos, k: usize) -> Option<Pos> {
    let mut at = offset_of(text, start)?;
    // A block scalar's header line (`|-  # comment`) is not content; neither are a
    // tag or an anchor in front of the scalar.
    let rest = &text[at..];
    let trimmed = rest.trim_start_matches(' ');
    let mut head = trimmed;
    while head.starts_with('!') || head.starts_with('&') {
        let end = head.find([' ', '\n']).unwrap_or(head.len());
        head = head[end..].trim_start_matches(' ');
    }
    if head.starts_with('|') || head.starts_with('>') {
        at += rest.len() - head.len();
        at += text[at..].find('\n').map_or(text.len() - at, |i| i + 1);
    }
    let found = text[at..].match_indices("${{").nth(k)?.0;
    Some(pos_of(text, at + found))
}

/// The walk's last step: fail there (to learn the position) or read a `T`.
trait Target<'de> {
    type Out;
    fn arrive<D: Deserializer<'de>>(self, d: D) -> Result<Self::Out, D::Error>;
}

struct Fail;

const HERE: &str = "here";

impl<'de> Target<'de> for Fail {
    type Out = ();
    fn arrive<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(Stop)
    }
}

struct Take<T>(PhantomData<T>);

impl<'de, T: DeserializeOwned> Target<'de> for Take<T> {
    type Out = T;
    fn arrive<D: Deserializer<'de>>(self, d: D) -> Result<T, D::Error> {
        T::deserialize(d)
    }
}

/// Fails on whatever node it is given, so that the error carries its mark.
struct Stop;

impl<'de> Visitor<'de> for Stop {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("anything")
    }
    fn visit_bool<E: de::Error>(self, _: bool) -> Result<(), E> {
        Err(E::custom(HERE))
    }
    fn visit_i64<E: de::Error>(self, _: i64) -> Result<(), E> {
        Err(E::custom(HERE))
    }
    fn visit_u64<E: de::Error>(self, _: u64) -> Result<(), E> {
        Err(E::custom(HERE))
    }
    fn visit_f64<E: de::Error>(self, _: f64) -> Result<(), E> {
        Err(E::custom(HERE))
    }
    fn visit_str<E: de::Error>(self, _: &str) -> Result<(), E> {
        Err(E::custom(HERE))
    }
    fn visit_unit<E: de::Error>(self) -> Result<(), E> {
        Err(E::custom(HERE))
    }
    fn visit_none<E: de::Error>(self) -> Result<(), E> {
        Err(E::custom(HERE))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, _: A) -> Result<(), A::Error> {
        Err(de::Error::custom(HERE))
    }
    fn visit_map<A: MapAccess<'de>>(self, _: A) -> Result<(), A::Error> {
        Err(de::Error::custom(HERE))
    }
}

struct Walk<'p, X> {
    path: &'p [Step],
    target: X,
}

impl<'de, X: Target<'de>> DeserializeSeed<'de> for Walk<'_, X> {
    type Value = X::Out;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<X::Out, D::Error> {
        if self.path.is_empty() {
            self.target.arrive(d)
        } else {
            d.deserialize_any(self)
        }
    }
}

/// A key step's target: the key itself.
struct KeySeed<X>(X);

impl<'de, X: Target<'de>> DeserializeSeed<'de> for KeySeed<X> {
    type Value = X::Out;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<X::Out, D::Error> {
        self.0.arrive(d)
    }
}

impl<'de, X: Target<'de>> Visitor<'de> for Walk<'_, X> {
    type Value = X::Out;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("the node on the path")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<X::Out, A::Error> {
        let (i, is_key) = match self.path.first() {
            Some(Step::Entry(i)) => (*i, false),
            Some(Step::Key(i)) => (*i, true),
            _ => return Err(de::Error::custom(HERE)),
        };
        for _ in 0..i {
            if map.next_entry::<IgnoredAny, IgnoredAny>()?.is_none() {
                return Err(de::Error::custom(HERE));
            }
        }
        let out = if is_key {
            match map.next_key_seed(KeySeed(self.target))? {
                Some(out) => {
                    map.next_value::<IgnoredAny>()?;
                    out
                }
                None => return Err(de::Error::custom(HERE)),
            }
        } else {
            if map.next_key::<IgnoredAny>()?.is_none() {
                return Err(de::Error::custom(HERE));
            }
            map.next_value_seed(Walk {
                path: &self.path[1..],
                target: self.target,
            })?
        };
        while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
        Ok(out)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<X::Out, A::Error> {
        let Some(Step::Item(i)) = self.path.first() else {
            return Err(de::Error::custom(HERE));
        };
        for _ in 0..*i {
            if seq.next_element::<IgnoredAny>()?.is_none() {
                return Err(de::Error::custom(HERE));
            }
        }
        let out = seq
            .next_element_seed(Walk {
                path: &self.path[1..],
                target: self.target,
            })?
            .ok_or_else(|| de::Error::custom(HERE))?;
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(line: usize, column: usize) -> Option<Pos> {
        Some(Pos { line, column })
    }

    #[test]
    fn nodes_are_found_where_libyaml_starts_them() {
        let t = "a: 1\nb:\n  c: 'x'\n  d: [1, {e: z}]\nf: |\n  text\n";
        assert_eq!(locate(t, &[Step::Key(0)]), at(1, 1));
        assert_eq!(locate(t, &[Step::Entry(0)]), at(1, 4));
        assert_eq!(locate(t, &[Step::Entry(1)]), at(3, 3));
        assert_eq!(locate(t, &[Step::Entry(1), Step::Entry(0)]), at(3, 6));
        assert_eq!(locate(t, &[Step::Entry(1), Step::Key(1)]), at(4, 3));
        assert_eq!(
            locate(t, &[Step::Entry(1), Step::Entry(1), Step::Item(1)]),
            at(4, 10)
        );
        assert_eq!(locate(t, &[Step::Entry(2)]), at(5, 4));
        // A path that does not exist stops at the nearest ancestor.
        assert_eq!(locate(t, &[Step::Entry(0), Step::Item(3)]), at(1, 4));
    }

    #[test]
    fn offsets_and_positions_agree() {
        let t = "é: x\r\nb: ${{ y }}\n";
        let p = Pos { line: 2, column: 4 };
        let off = offset_of(t, p).unwrap();
        assert_eq!(&t[off..off + 3], "${{");
        assert_eq!(pos_of(t, off), p);
        assert_eq!(offset_of(t, Pos { line: 9, column: 1 }), None);
        assert_eq!(
            offset_of(
                t,
                Pos {
                    line: 1,
                    column: 40
                }
            ),
            None
        );
    }

    #[test]
    fn expressions_inside_scalars() {
        let t = "k: |  # ${{ not this }}\n  one ${{ a }}\n    ${{ b }}\n";
        let start = locate(t, &[Step::Entry(0)]).unwrap();
        assert_eq!(start, Pos { line: 1, column: 4 });
        assert_eq!(nth_expression(t, start, 0), at(2, 7));
        assert_eq!(nth_expression(t, start, 1), at(3, 5));
        let t = "k: \"x ${{ a }}\n  ${{ b }}\"\n";
        let start = locate(t, &[Step::Entry(0)]).unwrap();
        assert_eq!(nth_expression(t, start, 1), at(2, 3));
    }

    #[test]
    fn typed_values_keep_their_error_positions() {
        use crate::guards::Budget;
        let t = "x:\n  budget:\n    max_hops: 2\n    max_hopz: 3\n";
        let path = [Step::Entry(0), Step::Entry(0)];
        let e = extract::<Budget>(t, &path).unwrap_err();
        let l = e.location().unwrap();
        assert_eq!((l.line(), l.column()), (4, 5));
        let ok = extract::<Budget>("x:\n  budget: {max_hops: 2}\n  y: 1\n", &path).unwrap();
        assert_eq!(ok.max_hops, Some(2));
    }
}
