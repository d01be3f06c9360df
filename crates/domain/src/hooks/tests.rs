use super::*;
use serde_json::json;

/// RFC 4231's test cases 1, 2 and 6 (a key longer than a block).
#[test]
fn hmac_matches_rfc_4231() {
    let check = |key: &[u8], msg: &[u8], want: &str| {
        assert_eq!(hex::encode(hmac_sha256(key, msg)), want);
    };
    check(
        &[0x0b; 20],
        b"Hi There",
        "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7",
    );
    check(
        b"Jefe",
        b"what do ya want for nothing?",
        "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843",
    );
    check(
        &[0xaa; 131],
        b"Test Using Larger Than Block-Size Key - Hash Key First",
        "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54",
    );
}

const SECRET: &[u8] = b"s3cret-s3cret-s3cret";
const NOW: i64 = 1_800_000_000;

/// Each header set and what verify makes of it.
#[test]
fn verify_takes_only_signed_fresh_requests() {
    let body = br#"{"action":"opened"}"#;
    let github = sign_github(SECRET, body);
    let generic = sign_generic(SECRET, NOW - 10, body);
    let stale = sign_generic(SECRET, NOW - REPLAY_WINDOW_SECS - 1, body);
    let future = sign_generic(SECRET, NOW + REPLAY_WINDOW_SECS + 1, body);
    let other = sign_github(b"another-secret-entirely", body);
    let long_id = "x".repeat(MAX_DELIVERY_ID + 1);
    /// GitHub's header with `sig`, and a delivery id.
    fn gh<'a>(sig: &'a str, delivery: Option<&'a str>) -> Headers<'a> {
        (Some(sig), None, delivery)
    }
    /// The GitHub header, the generic one, the delivery id.
    type Headers<'a> = (Option<&'a str>, Option<&'a str>, Option<&'a str>);
    type Case<'a> = (Headers<'a>, Result<&'a str, Refusal>);
    let cases: Vec<Case> = vec![
        (gh(&github, Some("d-1")), Ok("d-1")),
        ((None, Some(&generic), Some("d-2")), Ok("d-2")),
        ((None, Some(&stale), None), Err(Refusal::Stale)),
        ((None, Some(&future), None), Err(Refusal::Stale)),
        (gh(&other, None), Err(Refusal::BadSignature)),
        (gh("sha256=zz", None), Err(Refusal::BadSignature)),
        (gh("sha1=00", None), Err(Refusal::BadSignature)),
        ((None, Some("v1=00"), None), Err(Refusal::BadSignature)),
        ((None, None, None), Err(Refusal::Unsigned)),
        (gh(&github, Some(&long_id)), Err(Refusal::BadDelivery)),
        (gh(&github, Some("a b")), Err(Refusal::BadDelivery)),
    ];
    for (i, ((github, generic, delivery), want)) in cases.into_iter().enumerate() {
        let h = Signed {
            github,
            generic,
            delivery,
            event: None,
        };
        let got = verify(SECRET, &h, body, NOW);
        assert_eq!(
            got.map(|v| v.delivery),
            want.map(str::to_owned),
            "case {i}: {h:?}"
        );
    }
    // Without a delivery id, the same signed body is the same delivery.
    let h = Signed {
        github: Some(&github),
        ..Default::default()
    };
    let a = verify(SECRET, &h, body, NOW).unwrap();
    assert!(a.delivery.starts_with("sig:"));
    assert_eq!(a, verify(SECRET, &h, body, NOW).unwrap());
    // A changed body no longer matches its signature.
    assert_eq!(
        verify(SECRET, &h, br#"{"action":"closed"}"#, NOW),
        Err(Refusal::BadSignature)
    );
}

#[test]
fn depth_is_counted_outside_strings() {
    let deep = |n: usize| "[".repeat(n) + &"]".repeat(n);
    let cases = [
        (deep(MAX_DEPTH), true),
        (deep(MAX_DEPTH + 1), false),
        (deep(10_000), false),
        (format!("{{\"a\": \"{}\"}}", "[".repeat(500)), true),
        (format!("{{\"a\": \"\\\"{}\"}}", "{".repeat(500)), true),
        ("{\"a\": 1}".to_owned(), true),
    ];
    for (text, ok) in cases {
        assert_eq!(
            check_depth(text.as_bytes()).is_ok(),
            ok,
            "{}",
            &text[..text.len().min(40)]
        );
    }
}

#[test]
fn params_pick_from_the_payload() {
    let payload =
        json!({"pull_request": {"number": 7, "title": "Fix"}, "labels": [{"name": "bug"}]});
    let cases = [
        ("$.pull_request.number", Ok(json!(7))),
        ("pr-$.pull_request.number", Ok(json!("pr-7"))),
        ("$.labels.0.name", Ok(json!("bug"))),
        ("plain text", Ok(json!("plain text"))),
        ("$", Ok(payload.clone())),
        ("$.nope", Err("the payload has no $.nope".to_owned())),
        (
            "$.labels.x",
            Err("the payload has no $.labels.x".to_owned()),
        ),
    ];
    for (given, want) in cases {
        assert_eq!(Param::parse(given).resolve(&payload), want, "{given}");
        assert_eq!(Param::parse(given).as_text(), given);
    }
}

#[test]
fn params_and_names_are_checked() {
    let bad = json!({"pr": 7});
    let err = parse_params(bad.as_object()).unwrap_err().to_string();
    assert!(err.contains("params.pr"), "{err}");
    assert!(check_name("github-prs").is_ok());
    for name in ["", "a/b", "../x", &"x".repeat(65)] {
        assert!(
            check_name(name).unwrap_err().to_string().contains("name"),
            "{name}"
        );
    }
}

/// `event: hook` contracts: parsed with errors naming the field, matched by the
/// hook's name and the sender's event type, read as a sentence.
#[test]
fn hook_contracts_match_deliveries() {
    use crate::contracts::{Event, decide, parse, sentence};
    let deny = parse(
        &json!({"name": "no-pushes", "when": {"event": "hook", "hook": "git*",
        "kind": "push"}, "then": {"action": "deny", "reason": "reviews only"}}),
    )
    .unwrap();
    assert_eq!(
        sentence(&deny),
        "When a \"push\" event at a hook matching \"git*\" arrives, refuse it: \"reviews only\"."
    );
    let cases = [
        ("github", "push", true),
        ("github", "pull_request", false),
        ("jira", "push", false),
    ];
    for (hook, kind, denied) in cases {
        let v = decide([&deny], &Event::Hook { hook, kind });
        assert_eq!(v.deny.is_some(), denied, "{hook} {kind}");
    }
    let votes = parse(&json!({"name": "x", "when": {"event": "hook"},
        "then": {"action": "require_votes", "votes": 2}}));
    assert!(votes.unwrap_err().contains("then.action"));
    let unknown = parse(
        &json!({"name": "x", "when": {"event": "hook", "agent": "a"},
        "then": {"action": "deny"}}),
    );
    assert!(unknown.unwrap_err().contains("agent"));
}

#[test]
fn a_secrets_variable_must_be_one_no_worker_inherits() {
    let check = |text: &str, expect: &[&str]| assert_eq!(unscrubbed_vars(text), expect, "{text}");
    check("${{ env.GITHUB_HOOK_SECRET }}", &[]);
    check("${{env.TICKETS_HOOK_SECRET}}", &[]);
    check("${{ env.GITHUB_SECRET }}", &["GITHUB_SECRET"]);
    check("x${{ env.A_HOOK_SECRET }}y${{ env.B }}", &["B"]);
    check("plain-secret-of-sixteen", &[]);
}
