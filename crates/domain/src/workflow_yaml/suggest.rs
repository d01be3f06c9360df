//! "Did you mean": the closest allowed word to a misspelt one.

/// The candidate closest to `word` if it is close enough to be a likely typo
/// (case-insensitive; at most a third of the word's characters differ, and 2).
pub(crate) fn closest<'a>(word: &str, candidates: &[&'a str]) -> Option<&'a str> {
    let w = word.to_ascii_lowercase();
    let limit = (w.chars().count() / 3).clamp(1, 2);
    candidates
        .iter()
        .map(|c| (distance(&w, &c.to_ascii_lowercase()), *c))
        .filter(|(d, _)| *d <= limit)
        .min_by_key(|(d, _)| *d)
        .map(|(_, c)| c)
}

/// `; did you mean "x"?` or nothing.
pub(crate) fn did_you_mean(word: &str, candidates: &[&str]) -> String {
    closest(word, candidates)
        .map(|c| format!("; did you mean {c:?}?"))
        .unwrap_or_default()
}

/// Levenshtein distance, with a transposition counting as one edit.
fn distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    let mut d = vec![vec![0usize; b.len() + 1]; a.len() + 1];
    for (i, row) in d.iter_mut().enumerate() {
        row[0] = i;
    }
    for (j, v) in d[0].iter_mut().enumerate() {
        *v = j;
    }
    for i in 1..=a.len() {
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            let mut v = (d[i - 1][j] + 1)
                .min(d[i][j - 1] + 1)
                .min(d[i - 1][j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                v = v.min(d[i - 2][j - 2] + 1);
            }
            d[i][j] = v;
        }
    }
    d[a.len()][b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn typos_find_their_word() {
        let keys = ["name", "agents", "kickoff", "setup"];
        assert_eq!(closest("kickof", &keys), Some("kickoff"));
        assert_eq!(closest("agnets", &keys), Some("agents"));
        assert_eq!(closest("Setup", &keys), Some("setup"));
        assert_eq!(closest("colour", &keys), None);
        assert_eq!(closest("x", &keys), None);
        assert_eq!(closest("mokc", &["mock", "sdk", "codex"]), Some("mock"));
    }
}
