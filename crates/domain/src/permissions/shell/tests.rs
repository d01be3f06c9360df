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

/// Bypasses from a hostile review: each must be refused by a deny on rm.
#[test]
fn a_deny_on_rm_refuses_the_reviewed_bypasses() {
    for c in [
        "X='' rm -rf /tmp/x",
        "X=\"\"'' rm -rf /tmp/x",
        "env X=1\r# rm -rf /tmp/x",
        "true <&- ; rm -rf /tmp/x",
        "true >&- ; rm -rf /tmp/x",
        "true 2>&- ; rm -rf /tmp/x",
        "echo \"$(case x in x) rm -rf /tmp/x;; esac)\"",
        "cat <<EOF\n'\nEOF\nrm -rf /tmp/x # '",
        "cat <<-EOF\n'\n\tEOF\nrm -rf /tmp/x # '",
        "cat <<EOF\n$(rm -rf /tmp/x)\nEOF",
        "function f { rm -rf /tmp/x; }; f",
        "coproc rm -rf /tmp/x",
        "coproc NAME { rm -rf /tmp/x; }",
        "env -iu HOME rm -rf /tmp/x",
        "timeout -vs KILL 5 rm -rf /tmp/x",
        "flock --wait 5 /tmp/l rm -rf /tmp/x",
        "unshare -w /tmp rm -rf /tmp/x",
        "strace -fo /dev/null rm -rf /tmp/x",
        "env -iS ' rm -rf /tmp/x'",
        "ls | xargs -0n 1 rm",
        "watch -xn 1 rm -rf /tmp/x",
        "gawk --source='BEGIN{system(\"rm -rf /tmp/x\")}' /dev/null",
        "gawk -e 'BEGIN{}' -e 'BEGIN{system(\"rm -rf /tmp/x\")}' /dev/null",
        "awk -f prog.awk /dev/null",
        "echo | php -R 'system(\"rm -rf /tmp/x\");'",
        "perl -I . -e 'system(\"rm -rf /tmp/x\")'",
        "ruby -C /tmp -e 'system(\"rm -rf /tmp/x\")'",
        "node --eval='require(\"child_process\").execSync(\"rm -rf /tmp/x\")' x.js",
        "python3 --unknown-option x.py",
        "a='b[$(rm -rf /tmp/x)]'; (( a ))",
        "(( a ))",
        "echo $(( a + 1 ))",
        "echo $[ a ]",
        "let a",
        "[[ a -eq 1 ]]",
        "eatmydata rm -rf /tmp/x",
        "setpriv --reuid 1000 rm -rf /tmp/x",
        "parallel rm ::: /tmp/x",
        "expect -c 'spawn rm -rf /tmp/x'",
    ] {
        assert!(deny_matches("rm *", c), "{c:?} slipped past rm *");
    }
}

#[test]
fn the_reviewed_find_lines_are_not_covered_by_find() {
    for c in [
        "find . -name x\r# -o -delete",
        "function find { rm -rf ~; }; find .",
        "find() { rm -rf ~; }; find .",
    ] {
        assert!(!allow_matches(&["find *"], c), "{c:?} passed as find *");
    }
}

#[test]
fn ordinary_lines_stay_as_they_were() {
    for c in [
        "cat <<EOF\nrm x\nEOF",
        "cat <<'EOF'\n$(rm x)\nEOF",
        "echo $((1 + 2))",
        "(( 3 > 2 ))",
        "let 1+2",
        "X=\"a b\" ls",
        "env -i HOME=/ ls",
        "timeout -v 5 ls",
        "nice -10 ls",
        "true >&- ; ls",
        "python3 -B x.py",
        "ruby -E utf-8 x.rb",
        "awk -F: '{print $1}' /etc/passwd",
        "perl -w x.pl",
        "node x.js --eval",
    ] {
        assert!(!deny_matches("rm *", c), "{c:?} matched rm *");
    }
    // A here-document's body is not commands; what follows it is.
    assert!(deny_matches("ls*", "cat <<EOF\nhi\nEOF\nls"));
    assert!(!deny_matches("hi*", "cat <<EOF\nhi\nEOF\nls"));
    assert!(allow_matches(&["ls*"], "X='' ls"));
    assert!(allow_matches(&["ls*"], "(( 1 + 2 )) && ls"));
    assert!(!allow_matches(&["cat *"], "cat <<EOF\n$(rm x)\nEOF"));
    let w = &parse("X='1' 'Y'=2").commands[0].words;
    assert_eq!((w[0].quote_at, w[1].quote_at), (Some(2), Some(0)));
}
#[test]
fn options_are_read_as_each_program_reads_them() {
    for c in [
        "sudo rm x",
        "env -u X rm x",
        "time -p rm x",
        "xargs -I{} rm {}",
        "perl -lne 'print' f",
        "flock -n /tmp/l -c 'rm x'",
        "setsid -f rm x",
        "echo $(cat <<EOF\nx\nEOF\n); rm x",
    ] {
        assert!(deny_matches("rm *", c), "{c:?} slipped");
    }
    for c in [
        "python3 -m pytest -x",
        "node x.js",
        "timeout 5 cargo test",
        "sudo -u me ls",
        "command -v rm",
        "xargs -0 grep x",
        "watch -n 1 ls",
    ] {
        assert!(!deny_matches("rm *", c), "{c:?} matched");
    }
    assert!(allow_matches(&["python3 *"], "python3 -m pytest -x"));
    assert!(allow_matches(&["pwsh -Command*"], "pwsh -Command Get-Item"));
    assert!(allow_matches(&["node -e*"], "node -e 'x'"));
    assert!(allow_matches(
        &["timeout *", "cargo *"],
        "timeout 5 cargo test"
    ));
}
