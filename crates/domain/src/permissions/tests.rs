use super::*;

fn perms(v: serde_json::Value) -> Permissions {
    serde_json::from_value::<PermissionsArg>(v)
        .unwrap()
        .read()
        .unwrap()
}

fn shell(c: &str) -> Request {
    Request::Shell {
        command: c.to_owned(),
    }
}

fn allowed(p: &Permissions, r: &Request) -> bool {
    p.decide(r) == Decision::Allow
}

#[test]
fn profiles_grant_in_order_and_team_tools_always() {
    let read = Request::Read {
        path: "a.md".into(),
    };
    let edit = Request::Edit {
        path: "a.md".into(),
    };
    let web = Request::Web {
        target: "https://x".into(),
    };
    let team = Request::Team {
        tool: "channel_send".into(),
    };
    let (r, e, f) = (
        perms(json!("read")),
        perms(json!("edit")),
        perms(json!("full")),
    );
    assert!(allowed(&r, &read) && !allowed(&r, &edit) && !allowed(&r, &shell("ls")));
    assert!(allowed(&e, &edit) && !allowed(&e, &shell("ls")) && !allowed(&e, &web));
    assert!(allowed(&f, &shell("rm -rf x")) && allowed(&f, &web));
    for p in [&r, &e, &f] {
        assert!(allowed(p, &team));
    }
    assert_eq!(Permissions::default().profile, Profile::Edit);
}

#[test]
fn deny_beats_allow_and_patterns_cover_every_simple_command() {
    let p = perms(json!({"profile": "full", "deny": ["shell:rm *", "web"]}));
    assert!(allowed(&p, &shell("npm test")));
    assert!(!allowed(&p, &shell("rm -rf build")));
    assert!(!allowed(&p, &shell("echo hi && rm -rf build")));
    assert!(!allowed(&p, &shell("echo $(rm -rf build)")));
    assert!(!allowed(&p, &Request::Web { target: "x".into() }));
    let Decision::Deny(why) = p.decide(&shell("rm a")) else {
        panic!()
    };
    assert!(why.contains("shell:rm *"), "{why}");

    let p = perms(json!({"profile": "full", "deny": ["shell"], "allow": ["shell"]}));
    assert!(!allowed(&p, &shell("ls")), "deny wins");
}

#[test]
fn an_allowed_pattern_admits_only_lines_whose_every_command_matches() {
    let p = perms(json!({"profile": "edit", "allow": [{"shell": "npm test*"}]}));
    assert!(allowed(&p, &shell("npm test")));
    assert!(allowed(&p, &shell("npm test -- --watch")));
    assert!(!allowed(&p, &shell("npm install")));
    assert!(!allowed(&p, &shell("npm test; rm -rf ~")));
    assert!(!allowed(&p, &shell("npm test > out.txt")));
    let Decision::Deny(why) = p.decide(&shell("npm test && ls")) else {
        panic!()
    };
    assert!(why.contains("every command in the line"), "{why}");
    let both = perms(json!({"profile": "read", "allow": ["shell:npm test*", "shell:ls*"]}));
    assert!(allowed(&both, &shell("npm test && ls")));
    assert!(!allowed(&both, &shell("npm test && ls > x")));
    assert!(p.may(Kind::Shell));
    assert!(!perms(json!("edit")).may(Kind::Shell));
}

#[test]
fn mcp_servers_are_allowed_unless_denied_per_server_or_tool() {
    let gh = |t: &str| Request::Mcp {
        server: "github".into(),
        tool: t.into(),
    };
    let p = perms(json!("read"));
    assert!(allowed(&p, &gh("create_issue")));
    let p = perms(json!({"profile": "read", "deny": ["mcp:github:create_issue"]}));
    assert!(!allowed(&p, &gh("create_issue")) && allowed(&p, &gh("list_issues")));
    let p = perms(json!({"profile": "read", "deny": ["mcp:github"]}));
    assert!(!allowed(&p, &gh("list_issues")));
}

#[test]
fn bad_entries_are_refused_with_the_fix() {
    let bad = |v: serde_json::Value| {
        serde_json::from_value::<PermissionsArg>(v)
            .map_err(|e| e.to_string())
            .and_then(|a| a.read())
            .unwrap_err()
    };
    assert!(bad(json!("admin")).contains("read, edit or full"));
    assert!(bad(json!({"allow": ["shel"]})).contains("permissions.allow"));
    assert!(bad(json!({"deny": ["shell:"]})).contains("pattern"));
    assert!(bad(json!({"allow": ["mcp:"]})).contains("mcp:<server>"));
    assert!(bad(json!({"allow": ["team"]})).contains("always allowed"));
}

#[test]
fn stored_form_round_trips_and_describes_itself() {
    let p = perms(json!({"profile": "full", "allow": [], "deny": [{"shell": "rm *"}]}));
    let stored = serde_json::to_value(&p).unwrap();
    assert_eq!(
        stored,
        json!({"profile": "full", "allow": [], "deny": ["shell:rm *"]})
    );
    assert_eq!(serde_json::from_value::<Permissions>(stored).unwrap(), p);
    assert_eq!(
        serde_json::to_value(perms(json!("read"))).unwrap(),
        json!("read")
    );
    assert!(
        p.describe().contains("never shell:rm *"),
        "{}",
        p.describe()
    );
}

#[test]
fn glob_is_linear_and_exact() {
    assert!(glob("npm test*", "npm test"));
    assert!(glob("*", ""));
    assert!(glob("a*b*c", "axxbyyc"));
    assert!(!glob("a*b*c", "axxbyy"));
    assert!(!glob("npm test", "npm test2"));
    let long = "a".repeat(10_000);
    assert!(!glob(&format!("{}b", "*a".repeat(50)), &long));
}

use serde_json::json;

#[test]
fn denials_are_narrowed_until_the_backend_holds_them() {
    use governed::with_denials;
    let edit = Permissions::profile(Profile::Edit);
    let full = Permissions::profile(Profile::Full);
    // Gemini holds a command prefix that ends at a word.
    let p = with_denials(
        "gemini",
        &full,
        vec![Class::parse("shell:rm *").unwrap()],
        &[],
    );
    assert_eq!(p.deny, [Class::parse("shell:rm *").unwrap()]);
    assert_eq!(p.profile, Profile::Full);
    // Not one that ends inside a word: the whole shell goes.
    let p = with_denials(
        "gemini",
        &full,
        vec![Class::parse("shell:rm*").unwrap()],
        &[],
    );
    assert_eq!(p.deny, [Class::Shell(None)]);
    // Codex matches no commands and cannot refuse edits by rule: its sandbox does.
    let p = with_denials(
        "codex",
        &full,
        vec![Class::parse("shell:rm *").unwrap()],
        &[],
    );
    assert_eq!(
        (p.profile, p.deny.clone()),
        (Profile::Full, vec![Class::Shell(None)])
    );
    let p = with_denials("codex", &edit, vec![Class::Edit], &[]);
    assert_eq!((p.profile, p.deny.len()), (Profile::Read, 0));
    for b in ["gemini", "codex", "opencode"] {
        let p = with_denials(b, &edit, vec![Class::Edit], &[]);
        assert!(backends::check_agent(b, &p, &[]).is_ok(), "{b}: {p:?}");
        assert!(!p.may(Kind::Edit), "{b} may still edit: {p:?}");
    }
}

#[test]
fn the_sandbox_settings_read_back_and_bad_ones_name_the_field() {
    let p = perms(
        json!({"profile": "read", "allow": ["read:~/.aws", "edit:/srv/cache"],
                         "sandbox": "best_effort", "network": "none", "limits": {"file_mb": 5}}),
    );
    assert_eq!(p.sandbox_mode(), crate::sandbox::Mode::BestEffort);
    assert_eq!(p.network_reach(), crate::sandbox::Network::None);
    assert_eq!(p.sandbox_limits().file_mb, 5);
    let granted: Vec<(bool, &str)> = p.granted_paths().collect();
    assert_eq!(granted, [(false, "~/.aws"), (true, "/srv/cache")]);
    // A granted path never offers a tool the profile does not.
    assert!(!p.may(Kind::Edit));
    // It reads back as it was given.
    assert_eq!(perms(serde_json::to_value(&p).unwrap()), p);
    // Defaults: required and model below full, best_effort and any for it.
    let f = perms(json!("full"));
    assert_eq!(
        (f.sandbox_mode(), f.network_reach()),
        (
            crate::sandbox::Mode::BestEffort,
            crate::sandbox::Network::Any
        )
    );
    let e = perms(json!("edit"));
    assert_eq!(
        (e.sandbox_mode(), e.network_reach()),
        (
            crate::sandbox::Mode::Required,
            crate::sandbox::Network::Model
        )
    );
    let bad = |v: serde_json::Value, expect: &str| {
        let e = serde_json::from_value::<PermissionsArg>(v.clone())
            .map_err(|e| e.to_string())
            .and_then(|a| a.read())
            .unwrap_err();
        assert!(e.contains(expect), "{v}: {e}");
    };
    bad(
        json!({"sandbox": "maybe"}),
        "permissions.sandbox: unknown mode",
    );
    bad(
        json!({"network": "lan"}),
        "permissions.network: unknown value",
    );
    bad(
        json!({"allow": ["read:secrets"]}),
        "absolute or starts with ~/",
    );
    bad(json!({"allow": ["read:~/../.."]}), "may not hold `..`");
    bad(
        json!({"deny": ["edit:/srv"]}),
        "permissions.deny: edit:/srv",
    );
    bad(
        json!({"limits": {"cpu_s": 0}}),
        "permissions.limits.cpu_s is 0",
    );
}
