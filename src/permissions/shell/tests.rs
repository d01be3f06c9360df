use super::*;

/// The README's first contract: every way of running rm is refused.
#[test]
fn a_deny_on_rm_refuses_every_way_to_run_it() {
    for c in [
        "rm x",
        "/bin/rm x",
        "command rm x",
        "\\rm x",
        "'rm' x",
        "\"r\"m x",
        "env rm x",
        "env -i -u BAR FOO=1 rm x",
        "env -- rm x",
        "exec rm x",
        "nice -n 5 rm x",
        "nice -10 rm x",
        "nohup rm x",
        "timeout -s KILL 5 rm x",
        "sudo -u root rm x",
        "busybox rm x",
        "sh -c 'rm x'",
        "bash -ec \"rm x\"",
        "dash -c 'echo hi; /bin/rm x'",
        "sh -c \"sh -c 'rm x'\"",
        "su -c 'rm x' root",
        "flock /tmp/l -c 'rm x'",
        "watch -n 1 rm x",
        "eval 'rm x'",
        "trap 'rm x' EXIT",
        "find . -name x -delete",
        "find -L . -name x -exec rm {} +",
        "find . -execdir /bin/rm {} \\;",
        "unlink x",
        "shred -u x",
        "rmdir d",
        "echo x | xargs rm",
        "ls | xargs -n1 -I{} rm {}",
        "cd sub && rm x",
        "(rm x)",
        "true; { rm x; }",
        "echo $(rm x)",
        "echo `rm x`",
        "diff <(rm x) y",
        "if true; then rm x; fi",
        "FOO=1 rm x",
        "time rm x",
        "! rm x",
        "cat x # ok\nrm x",
    ] {
        assert!(deny_matches("rm *", c), "{c:?} slipped past rm *");
    }
}

/// What the line does not show is refused under any deny pattern (fail closed).
#[test]
fn what_cannot_be_decided_is_refused_by_any_deny() {
    for c in [
        "$X x",
        "${RM} x",
        "$(echo rm) x",
        "`echo rm` x",
        "/bin/r? x",
        "/bin/r[m] x",
        "{rm,x}",
        "$'\\x72m' x",
        "echo 'rm x' | sh",
        "sh script.sh",
        "bash -s < x",
        "source x.sh",
        ". ./x.sh",
        "eval \"$CMD\"",
        "alias r=rm",
        "python3 -c 'import os; os.remove(\"x\")'",
        "perl -e 'unlink \"x\"'",
        "perl -ne 'print'",
        "ruby -e 'File.delete(\"x\")'",
        "node -e 'require(\"fs\").rmSync(\"x\")'",
        "php -r 'unlink(\"x\");'",
        "echo 'import os' | python3",
        "awk 'BEGIN{system(\"rm x\")}'",
        "env -S 'rm x'",
        "echo x | xargs sh -c",
        "find . $ARGS",
        "xargs $X",
        "sh -c \"$CMD\"",
        "sh -c 'unterminated",
        "echo \"unterminated",
        "echo $(unterminated",
    ] {
        assert!(
            deny_matches("git push*", c),
            "{c:?} is undecidable but passed"
        );
    }
    // A known program with an argument only known when it runs: by its name.
    assert!(deny_matches("rm -rf *", "rm $TARGET"));
    assert!(!deny_matches("git push*", "rm $TARGET"));
}

#[test]
fn a_deny_leaves_other_commands_alone() {
    for c in [
        "ls -la",
        "echo rm x",
        "grep -r 'rm x' .",
        "git rm x",
        "cargo test",
        "command -v rm",
        "find . -name '*.rs'",
        "python3 script.py",
        "awk '{print $1}' f",
        "env FOO=1 ls",
        "sh -c 'ls; echo done'",
        "trap - EXIT",
        "bash --version",
        "cat <<EOF",
        "echo '$(rm x)'",
        "[ -f x ] && echo yes",
        "[[ -f x ]] && git show HEAD~1",
    ] {
        assert!(!deny_matches("rm *", c), "{c:?} matched rm *");
    }
}

#[test]
fn an_allow_covers_a_line_only_if_every_run_matches() {
    let find = ["find *"];
    assert!(allow_matches(&find, "find . -name x"));
    assert!(allow_matches(&find, "find . -name '*.rs' -type f"));
    for c in [
        "find . -exec touch /tmp/p {} +",
        "find . -execdir rm {} \\;",
        "find . -ok sh -c 'rm x' \\;",
        "find . -delete",
        "find . -name x -fprint /tmp/out",
        "find . -fls out",
        "find . -name x > out",
        "find . -name x; rm y",
        "find . -name $(echo x)",
        "find $DIR",
        "find . | xargs rm",
        "/usr/bin/find .",
        "env find .",
        "sh -c 'find .'",
        "find . -name \"unterminated",
    ] {
        assert!(!allow_matches(&find, c), "{c:?} passed as find *");
    }
    // Every run covered: find and what it runs.
    assert!(allow_matches(
        &["find *", "grep *"],
        "find . -exec grep -l x {} +"
    ));
    assert!(allow_matches(&["npm test*", "ls*"], "npm test && ls"));
    assert!(!allow_matches(&["npm test*"], "npm test; rm -rf ~"));
    assert!(!allow_matches(&["npm test*"], "npm test > out.txt"));
    assert!(allow_matches(
        &["ls*", "xargs *", "grep *"],
        "ls | xargs grep x"
    ));
    assert!(!allow_matches(
        &["ls*", "xargs *", "grep x"],
        "ls | xargs grep x"
    ));
    assert!(!allow_matches(
        &["ls*", "xargs *", "find *"],
        "ls | xargs find ."
    ));
    assert!(!allow_matches(&["sh *", "ls*"], "sh x.sh"));
    assert!(allow_matches(&["sh *", "ls*"], "sh -c 'ls -la'"));
    assert!(!allow_matches(&["sh *", "ls*"], "sh -c 'ls; rm x'"));
}

#[test]
fn code_is_allowed_only_by_a_pattern_that_spells_out_its_option() {
    let c = "python3 -c \"open('x','w').write('ran')\"";
    assert!(allow_matches(&["python3 -c*"], c));
    assert!(!allow_matches(&["python3 *"], c));
    assert!(allow_matches(&["python3 *"], "python3 test.py -v"));
    assert!(!allow_matches(&["python3*"], "echo 'print(1)' | python3"));
    assert!(!allow_matches(&["*"], "eval \"$X\""));
    assert!(!allow_matches(&["*"], "$X"));
}

#[test]
fn the_reader_splits_quotes_and_substitutions_as_the_shell_does() {
    let l = parse("a 'b c' \"d $e\" f\\ g; h && i | j $(k l) # m");
    let words: Vec<Vec<&str>> = l
        .commands
        .iter()
        .map(|c| c.words.iter().map(|w| w.text.as_str()).collect())
        .collect();
    assert_eq!(
        words,
        [
            vec!["a", "b c", "d $", "f g"],
            vec!["h"],
            vec!["i"],
            vec!["k", "l"],
            vec!["j", "$"]
        ]
    );
    assert!(l.substituted && !l.broken);
    assert!(parse("echo x > out").commands[0].redirected);
    assert_eq!(parse("echo x 2>&1").commands[0].words.len(), 2);
    assert!(parse("a '").broken && parse("a \"").broken && parse("a $(b").broken);
    // Deep nesting is bounded, not a stack overflow.
    let deep = format!("{}x{}", "$(".repeat(10_000), ")".repeat(10_000));
    assert!(parse(&deep).broken);
    let deep = format!("{}x{}", "${".repeat(10_000), "}".repeat(10_000));
    assert!(parse(&deep).broken);
}
