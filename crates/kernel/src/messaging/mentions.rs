//! Mention parsing and the addressed rule. Pure functions; the messaging module
//! applies them at write time against the workflow's members.
//!
//! A mention is `@name` with name matching `[A-Za-z][A-Za-z0-9_-]*`, where the `@`
//! starts the text or follows a character that cannot be part of a word or address
//! (so `bob@example.com` mentions nobody).

use std::collections::BTreeSet;

#[derive(Debug, Default, PartialEq, Eq)]
pub struct Mentions {
    /// The run of `@name` tokens the message starts with (separated by spaces, `,` or `:`).
    pub leading: Vec<String>,
    /// Every mention in the text, in order of first appearance, without duplicates.
    pub all: Vec<String>,
}

fn is_name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_' || c == '-'
}

/// Finds the mention starting at byte `i` (which holds '@'), returning the name and
/// the byte index just after it.
fn mention_at(text: &str, i: usize) -> Option<(&str, usize)> {
    let rest = text.get(i + 1..)?;
    if !rest.starts_with(|c: char| c.is_ascii_alphabetic()) {
        return None;
    }
    let len = rest.find(|c: char| !is_name_char(c)).unwrap_or(rest.len());
    Some((&rest[..len], i + 1 + len))
}

pub fn parse(text: &str) -> Mentions {
    let mut m = Mentions::default();
    let mut prev: Option<char> = None;
    for (i, c) in text.char_indices() {
        if c == '@'
            && !prev.is_some_and(|p| is_name_char(p) || p == '.' || p == '@')
            && let Some((name, _)) = mention_at(text, i)
            && !m.all.iter().any(|n| n == name)
        {
            m.all.push(name.to_owned());
        }
        prev = Some(c);
    }
    for name in leading_run(text).0 {
        if !m.leading.iter().any(|n| n == name) {
            m.leading.push(name.to_owned());
        }
    }
    m
}

/// The `@name` tokens a message starts with (separated by spaces, `,` or `:`) and the
/// rest of the text after them.
pub fn leading_run(text: &str) -> (Vec<&str>, &str) {
    let mut names = Vec::new();
    let mut i = 0;
    let bytes = text.as_bytes();
    loop {
        while i < bytes.len()
            && (bytes[i].is_ascii_whitespace() || bytes[i] == b',' || bytes[i] == b':')
        {
            i += 1;
        }
        match bytes
            .get(i)
            .filter(|b| **b == b'@')
            .and_then(|_| mention_at(text, i))
        {
            Some((name, end)) => {
                names.push(name);
                i = end;
            }
            None => return (names, &text[i..]),
        }
    }
}
/// Who a message reaches, given the mentions, the workflow's members (compared
/// ignoring case) and the sender. `all` expands to every agent but the sender.
/// Returns (recipients in canonical spelling, unknown mention names).
pub fn recipients(
    m: &Mentions,
    members: &[String],
    agents: &[String],
    sender: &str,
) -> (Vec<String>, Vec<String>) {
    let mut unknown = Vec::new();
    let mut expand = |tokens: &[String]| -> BTreeSet<String> {
        let mut out = BTreeSet::new();
        for t in tokens {
            if t.eq_ignore_ascii_case("all") {
                out.extend(agents.iter().cloned());
            } else if let Some(name) = members.iter().find(|n| n.eq_ignore_ascii_case(t)) {
                out.insert(name.clone());
            } else if !unknown.iter().any(|u: &String| u.eq_ignore_ascii_case(t)) {
                unknown.push(t.clone());
            }
        }
        out.retain(|n| !n.eq_ignore_ascii_case(sender));
        out
    };
    let leading = expand(&m.leading);
    let chosen = if leading.is_empty() {
        expand(&m.all)
    } else {
        // Still validate body mentions so the sender learns about typos.
        let _ = expand(&m.all);
        leading
    };
    (chosen.into_iter().collect(), unknown)
}

/// `high` when several are mentioned or the text says it is urgent.
pub fn priority(m: &Mentions, text: &str) -> &'static str {
    let urgent = text.split(|c: char| !c.is_ascii_alphanumeric()).any(|w| {
        matches!(
            w.to_ascii_lowercase().as_str(),
            "urgent" | "asap" | "blocked" | "critical"
        )
    });
    if urgent || m.all.len() > 1 {
        "high"
    } else {
        "normal"
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    fn s(v: &[&str]) -> Vec<String> {
        v.iter().map(|x| x.to_string()).collect()
    }

    #[test]
    fn parsing() {
        let m = parse("@alice, @bob: please ask @carol and mail x@dave.com @alice");
        assert_eq!(m.leading, s(&["alice", "bob"]));
        assert_eq!(m.all, s(&["alice", "bob", "carol"]));
        assert_eq!(parse("hi @a_b-c.").all, s(&["a_b-c"]));
        assert!(parse("@1abc @ bob").all.is_empty());
        assert_eq!(parse("(@zed)").all, s(&["zed"]));
    }

    #[test]
    fn leading_run_and_rest() {
        assert_eq!(
            leading_run("@a, @b: here is the brief"),
            (vec!["a", "b"], "here is the brief")
        );
        assert_eq!(
            leading_run("no mentions here"),
            (vec![], "no mentions here")
        );
        assert_eq!(leading_run("@a"), (vec!["a"], ""));
    }

    #[test]
    fn addressed_rule() {
        let members = s(&["alice", "bob", "carol", "user"]);
        let agents = s(&["alice", "bob", "carol"]);
        let (r, u) = recipients(
            &parse("@bob review this, then tell @carol"),
            &members,
            &agents,
            "alice",
        );
        assert_eq!((r, u), (s(&["bob"]), vec![]));
        let (r, _) = recipients(&parse("ping @bob and @carol"), &members, &agents, "alice");
        assert_eq!(r, s(&["bob", "carol"]));
        let (r, _) = recipients(&parse("@all standup"), &members, &agents, "alice");
        assert_eq!(r, s(&["bob", "carol"]));
        let (r, u) = recipients(&parse("@zed hi @Bob"), &members, &agents, "alice");
        assert_eq!((r, u), (s(&["bob"]), s(&["zed"])));
        let (r, _) = recipients(&parse("@alice note to self"), &members, &agents, "alice");
        assert!(r.is_empty());
    }

    #[test]
    fn priorities() {
        assert_eq!(priority(&parse("@a hi"), "@a hi"), "normal");
        assert_eq!(priority(&parse("@a @b hi"), "@a @b hi"), "high");
        assert_eq!(priority(&parse("x"), "this is URGENT!"), "high");
    }
}
