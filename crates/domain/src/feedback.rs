//! Feedback: what a member tells the lead about its tools and skills (seed 000's
//! feedback tool), so that the next team is given what this one lacked (pure: the
//! kinds, and one report checked against its bounds).

use crate::states::text_enum;

text_enum! {
    /// What a report says of the tool or skill it is about.
    pub enum Kind("feedback kind") {
        /// It was needed and not there.
        Missing = "missing",
        /// It is there and got in the way.
        Friction = "friction",
        /// It could be better so.
        Suggestion = "suggestion",
    }
}

/// The longest name of a tool or skill a report is about.
pub const MAX_ABOUT_CHARS: usize = 100;
/// The longest report.
pub const MAX_TEXT_CHARS: usize = 2000;
/// Reports an instance keeps: its newest; older ones go as new ones come.
pub const KEEP_PER_INSTANCE: i64 = 500;

/// One report, checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Report {
    pub kind: Kind,
    pub about: String,
    pub text: String,
}

/// Checks a report as given; an error names the field and what to write.
pub fn check(kind: &str, about: &str, text: &str) -> Result<Report, String> {
    let kind = kind.trim().parse::<Kind>().map_err(|_| {
        format!("kind: {kind:?} is not a kind; use missing, friction or suggestion")
    })?;
    let (about, text) = (about.trim(), text.trim());
    if about.is_empty() {
        return Err(
            "about: name the tool or skill, e.g. \"channel_send\" or \"code-review\"".into(),
        );
    }
    if about.chars().count() > MAX_ABOUT_CHARS || about.contains('\n') {
        return Err(format!(
            "about: one name of at most {MAX_ABOUT_CHARS} characters on one line; say the rest in text"
        ));
    }
    if text.is_empty() {
        return Err("text: say what was missing, in the way, or better so".into());
    }
    if text.chars().count() > MAX_TEXT_CHARS {
        return Err(format!(
            "text: at most {MAX_TEXT_CHARS} characters; keep it to the point (a long case belongs in a document)"
        ));
    }
    Ok(Report {
        kind,
        about: about.to_owned(),
        text: text.to_owned(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reports_are_checked_naming_the_field() {
        let long_about = "x".repeat(MAX_ABOUT_CHARS + 1);
        let long_text = "x".repeat(MAX_TEXT_CHARS + 1);
        let check_one = |(kind, about, text): (&str, &str, &str), expect: Result<Kind, &str>| {
            let got = check(kind, about, text);
            match expect {
                Ok(k) => assert_eq!(got.map(|r| r.kind), Ok(k), "{kind} {about}"),
                Err(field) => assert!(
                    got.as_ref().is_err_and(|e| e.starts_with(field)),
                    "{kind} {about}: {got:?}"
                ),
            }
        };
        check_one(
            ("missing", "run_tests", "no way to run them"),
            Ok(Kind::Missing),
        );
        check_one((" friction ", "channel_send", "x"), Ok(Kind::Friction));
        check_one(("suggestion", "code-review", "x"), Ok(Kind::Suggestion));
        check_one(("bug", "channel_send", "x"), Err("kind:"));
        check_one(("missing", " ", "x"), Err("about:"));
        check_one(("missing", &long_about, "x"), Err("about:"));
        check_one(("missing", "a\nb", "x"), Err("about:"));
        check_one(("missing", "a", "  "), Err("text:"));
        check_one(("missing", "a", &long_text), Err("text:"));
        let r = check("missing", " run_tests ", " none ").unwrap();
        assert_eq!((r.about.as_str(), r.text.as_str()), ("run_tests", "none"));
    }
}
