//! `hooks:`: each hook's fields, and its mistakes reported where they are.

use super::inline;
use crate::hooks::Param;

const AGENTS: &str = "agents:\n  triager: { backend: mock }\n";

#[test]
fn hooks_are_read_with_their_fields() {
    let yaml = format!(
        "{AGENTS}hooks:\n  tickets:\n    secret: \"${{{{ env.S }}}}\"\n    to: \"@triager\"\n    \
         params: {{title: $.title, id: \"t-$.id\"}}\n    rate: 5\n  bare: {{secret: x}}\n"
    );
    let wf = inline(&yaml).unwrap();
    let h = &wf.hooks[0];
    assert_eq!(
        (h.name.as_str(), h.secret.as_str()),
        ("tickets", "${{ env.S }}")
    );
    assert_eq!((h.to.as_deref(), h.rate), (Some("triager"), Some(5)));
    assert_eq!(h.params["title"], Param::parse("$.title"));
    assert_eq!(h.params["id"], Param::parse("t-$.id"));
    assert_eq!((wf.hooks[1].to.as_ref(), wf.hooks.len()), (None, 2));
}

#[test]
fn hook_mistakes_are_reported_where_they_are() {
    let cases = [
        ("hooks: [a]\n", "3:8", "mapping of names"),
        ("hooks:\n  a/b: {secret: x}\n", "4:3", "name \"a/b\""),
        ("hooks:\n  t: {to: triager}\n", "4:6", "no `secret`"),
        (
            "hooks:\n  t: {secret: x, to: coder}\n",
            "4:22",
            "not an agent",
        ),
        (
            "hooks:\n  t: {secret: x, rate: 0}\n",
            "4:24",
            "requests a minute",
        ),
        (
            "hooks:\n  t: {secret: x, params: [a]}\n",
            "4:26",
            "params must be a mapping",
        ),
        (
            "hooks:\n  t: {secret: x, when: push}\n",
            "4:18",
            "unknown key `when`",
        ),
    ];
    for (tail, at, word) in cases {
        let e = inline(&format!("{AGENTS}{tail}")).unwrap_err();
        let shown = e.to_string();
        assert!(shown.contains(word), "{tail}: {shown}");
        assert_eq!(format!("{}:{}", e.line, e.column), at, "{tail}: {shown}");
    }
}
