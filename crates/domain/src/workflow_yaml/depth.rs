//! Nesting depth, checked on the text before any YAML parser sees it.
//!
//! libyaml keeps a "simple key" entry per open flow level and walks all of them
//! for every token, so `[[[[…` 100,000 deep cost 20 s of CPU to refuse (and
//! blocked other clients meanwhile). A workflow never needs more than a handful
//! of levels, so the text is scanned first, in one linear pass, and anything
//! nested deeper than [`MAX_DEPTH`] is refused at the line and column where the
//! limit was passed.
//!
//! The scan counts what YAML counts: block levels (indentation, and each `- ` or
//! `? ` of a compact nested entry on one line) plus flow levels (`[` and `{`),
//! ignoring quoted scalars, comments and block scalars (`|`, `>`), and counting a
//! `[` or `{` outside a flow collection only where a value starts (so `a[1]` in a
//! plain scalar is text, not nesting).

/// The deepest nesting a workflow may use.
pub const MAX_DEPTH: usize = 64;

/// Where the limit was passed (1-based line and column).
#[derive(Debug, PartialEq, Eq)]
pub struct TooDeep {
    pub line: usize,
    pub column: usize,
}

/// Checks `text`; linear in its length.
pub fn check(text: &str) -> Result<(), TooDeep> {
    let mut indents: Vec<usize> = Vec::new();
    // A block scalar's content: lines indented more than this are skipped.
    let mut block_scalar_parent: Option<usize> = None;
    // Open flow collections, and the block depth they opened at (they may span lines).
    let (mut flow, mut flow_base) = (0usize, 0usize);
    let mut value_start = true;
    for (ln, line) in text.lines().enumerate() {
        let indent = line.len() - line.trim_start_matches(' ').len();
        let rest = &line[indent..];
        if let Some(parent) = block_scalar_parent {
            if rest.trim().is_empty() || indent > parent {
                continue;
            }
            block_scalar_parent = None;
        }
        if rest.trim().is_empty() || rest.starts_with('#') {
            continue;
        }
        let too_deep = |col: usize| TooDeep {
            line: ln + 1,
            column: col + 1,
        };
        let mut depth = flow_base;
        if flow == 0 {
            while indents.last().is_some_and(|&i| i > indent) {
                indents.pop();
            }
            if indents.last() != Some(&indent) {
                indents.push(indent);
            }
            depth = indents.len();
            if depth > MAX_DEPTH {
                return Err(too_deep(indent));
            }
            value_start = true;
        }
        let bytes = line.as_bytes();
        let mut i = indent;
        while i < bytes.len() {
            let c = bytes[i];
            let at_value = flow > 0 || value_start;
            match c {
                b'-' | b'?'
                    if flow == 0 && value_start && bytes.get(i + 1).is_none_or(|b| *b == b' ') =>
                {
                    // A compact nested entry (`- - x`): one level more.
                    if i > indent {
                        depth += 1;
                        if depth > MAX_DEPTH {
                            return Err(too_deep(i));
                        }
                    }
                }
                b'#' if i == 0 || bytes[i - 1] == b' ' || bytes[i - 1] == b'\t' => break,
                b'\'' | b'"' if at_value => {
                    i = skip_quoted(bytes, i);
                    value_start = false;
                    continue;
                }
                b'[' | b'{' if at_value => {
                    if flow == 0 {
                        flow_base = depth;
                    }
                    flow += 1;
                    if flow_base + flow > MAX_DEPTH {
                        return Err(too_deep(i));
                    }
                    value_start = true;
                }
                b']' | b'}' if flow > 0 => {
                    flow -= 1;
                    value_start = false;
                }
                b',' if flow > 0 => value_start = true,
                b':' if bytes.get(i + 1).is_none_or(|b| *b == b' ') => value_start = true,
                b'|' | b'>' if flow == 0 && value_start => {
                    // A block scalar: its lines below are text, whatever they hold.
                    block_scalar_parent = Some(indent);
                    break;
                }
                b' ' | b'\t' => {}
                _ => value_start = false,
            }
            i += 1;
        }
    }
    Ok(())
}

/// The index after a quoted scalar starting at `i` (to the end of the line if it
/// does not close there).
fn skip_quoted(b: &[u8], i: usize) -> usize {
    let q = b[i];
    let mut j = i + 1;
    while j < b.len() {
        if q == b'"' && b[j] == b'\\' {
            j += 2;
            continue;
        }
        if b[j] == q {
            if q == b'\'' && b.get(j + 1) == Some(&b'\'') {
                j += 2;
                continue;
            }
            return j + 1;
        }
        j += 1;
    }
    j
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deep_flow_and_block_nesting_is_refused_where_it_passes_the_limit() {
        let flow = format!("params: {}1{}", "[".repeat(100_000), "]".repeat(100_000));
        let t = std::time::Instant::now();
        let e = check(&flow).unwrap_err();
        assert!(t.elapsed().as_millis() < 200, "{:?}", t.elapsed());
        assert_eq!(e.line, 1);
        assert_eq!(e.column, 9 + MAX_DEPTH - 1);
        let block: String = (0..100)
            .map(|d| format!("{}a{d}:\n", " ".repeat(d)))
            .collect();
        assert_eq!(check(&block).unwrap_err().line, MAX_DEPTH + 1);
        let dashes = format!("x:\n  {}1\n", "- ".repeat(1000));
        assert_eq!(check(&dashes).unwrap_err().line, 2);
    }

    #[test]
    fn ordinary_workflows_and_text_that_looks_nested_pass() {
        let ok = "name: x\nagents:\n  a:\n    backend: mock\n    mock:\n      - when: \"[[[[\"\n        send: 'a [b'\n        reply: c[1] {2\n    system_prompt: |\n      [[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[\n      - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - -\n    env: {A: '1', B: [x, y]}  # [[[[[[\nkickoff: go\n";
        assert_eq!(check(ok), Ok(()));
        let multi = "params:\n  - [a,\n     [b, [c]]]\nname: x\n";
        assert_eq!(check(multi), Ok(()));
        // A flow collection over several lines does not hide deep nesting after it.
        let after = format!("a: [1,\n  2]\nb: {}1{}\n", "[".repeat(100), "]".repeat(100));
        assert_eq!(check(&after).unwrap_err().line, 3);
    }
}
