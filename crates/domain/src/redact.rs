//! Text this server does not control (a backend's error, a pause's reason, the
//! command an approval is about) as it may leave for a person or a collector
//! (the dashboard, a span's status): cut short, with anything shaped like a
//! credential masked, so a panel or a trace never shows a secret an error
//! happened to echo.

use regex::Regex;
use std::sync::LazyLock;

/// The most of such a text shown (the lead's tools have the whole).
pub const MAX_SHOWN: usize = 400;

static SECRETS: LazyLock<[(Regex, &str); 4]> = LazyLock::new(|| {
    [
        // An Authorization header's value.
        (Regex::new(r"(?i)\b(bearer|basic)\s+[A-Za-z0-9._~+/=-]{6,}").unwrap(), "$1 …"),
        // Provider keys and this server's tokens (sk-…, awt_…, awadmin_…, awlocal_…).
        (
            Regex::new(r"\b(sk|pk|rk|xox[abp]|gh[pousr]|awt|awadmin|awlocal)[-_][A-Za-z0-9_-]{8,}").unwrap(),
            "$1…",
        ),
        // key=value and key: value for the names secrets go by.
        (
            Regex::new(r"(?i)\b([A-Za-z_]*(api[_-]?key|token|secret|password|passwd|pwd|credential)s?)(\s*[:=]\s*)[^\s,;&]+")
                .unwrap(),
            "$1$3…",
        ),
        // A password in a URL (scheme://user:password@host).
        (Regex::new(r"(://[^/\s:@]+:)[^@\s/]+@").unwrap(), "$1…@"),
    ]
});

/// `text` as the dashboard shows it.
pub fn shown(text: &str) -> String {
    let mut cut = text;
    if cut.len() > MAX_SHOWN {
        let mut end = MAX_SHOWN;
        while !cut.is_char_boundary(end) {
            end -= 1;
        }
        cut = &cut[..end];
    }
    let mut out = cut.to_owned();
    for (re, with) in SECRETS.iter() {
        out = re.replace_all(&out, *with).into_owned();
    }
    if cut.len() < text.len() {
        out.push('…');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::shown;

    #[test]
    fn credentials_are_masked_and_the_rest_is_kept() {
        let cases = [
            (
                "401: invalid x-api-key sk-ant-api03-abcdefghijk",
                "401: invalid x-api-key sk…",
            ),
            (
                "curl -H 'Authorization: Bearer abcdef123456' x",
                "curl -H 'Authorization: Bearer …' x",
            ),
            ("export API_KEY=abc123 && run", "export API_KEY=… && run"),
            ("token: awt_0123456789abcdef", "token: …"),
            (
                "postgres://me:hunter2@db:5432/x",
                "postgres://me:…@db:5432/x",
            ),
            ("rate limited, retry in 20s", "rate limited, retry in 20s"),
            (
                "write_file (edit): src/token_parser.rs",
                "write_file (edit): src/token_parser.rs",
            ),
        ];
        for (given, want) in cases {
            assert_eq!(shown(given), want, "{given}");
        }
    }

    #[test]
    fn long_text_is_cut_at_a_character() {
        let long = "é".repeat(super::MAX_SHOWN);
        let s = shown(&long);
        assert!(s.ends_with('…') && s.len() <= super::MAX_SHOWN + '…'.len_utf8());
    }
}
