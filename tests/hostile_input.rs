//! Input that would hang or exhaust a careless server: files that never end or
//! never open (devices, FIFOs), huge files, and YAML nested or aliased to blow up
//! the parser. Each is refused fast, with what it is, and other clients are
//! served meanwhile.

use crate::common;
use common::*;
use serde_json::json;
use std::time::{Duration, Instant};

#[tokio::test]
async fn workflow_files_that_never_end_never_open_or_are_huge_are_refused_fast() {
    let dir = tempfile::tempdir().unwrap();
    let s = HttpServer::start(dir.path()).await;
    let lead = s.lead(Proto::Legacy).await;
    let other = s.lead(Proto::Modern).await;
    let pid = s.child.id().unwrap();
    let before = rss_kib(pid);

    let t = Instant::now();
    let e = call(&lead, "workflow_run", json!({"file": "/dev/zero"}))
        .await
        .err();
    assert!(e.contains("character device"), "{e}");
    assert!(t.elapsed() < Duration::from_secs(2), "{:?}", t.elapsed());

    // 300 MiB (sparse: no disk) is refused by its size, without reading it.
    let big = dir.path().join("big.yaml");
    std::fs::File::create(&big)
        .unwrap()
        .set_len(300 << 20)
        .unwrap();
    let t = Instant::now();
    let e = call(&lead, "workflow_run", json!({"file": big}))
        .await
        .err();
    assert!(e.contains("bytes; at most"), "{e}");
    assert!(t.elapsed() < Duration::from_secs(2), "{:?}", t.elapsed());

    // Two calls on a FIFO nobody writes: refused at once, and another client is
    // answered meanwhile.
    let fifo = dir.path().join("flow.yaml");
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::S_IRWXU).unwrap();
    let t = Instant::now();
    let (a, b, c) = tokio::join!(
        call(&lead, "workflow_run", json!({"file": fifo})),
        call(&lead, "workflow_run", json!({"file": fifo})),
        call(&other, "agent_list", json!({}))
    );
    assert!(a.err().contains("named pipe"));
    assert!(b.err().contains("named pipe"));
    c.ok();
    assert!(t.elapsed() < Duration::from_secs(3), "{:?}", t.elapsed());

    let after = rss_kib(pid);
    assert!(
        after < before + 64 * 1024,
        "RSS grew from {before} to {after} KiB"
    );
    s.stop().await;
}

#[tokio::test]
async fn a_fifo_among_the_documents_is_refused_not_waited_on() {
    let dir = tempfile::tempdir().unwrap();
    let docs = tempfile::tempdir().unwrap();
    nix::unistd::mkfifo(&docs.path().join("pipe.md"), nix::sys::stat::Mode::S_IRWXU).unwrap();
    let s = HttpServer::start(dir.path()).await;
    let lead = s.lead(Proto::Legacy).await;
    new_agents(&lead, "@d", &["a"]).await;
    call(
        &lead,
        "workflow_context_set",
        json!({"workflow": "@d", "documents_dir": docs.path()}),
    )
    .await
    .ok();
    let t = Instant::now();
    let e = call(
        &lead,
        "team_doc_read",
        json!({"workflow": "@d", "file": "pipe.md"}),
    )
    .await
    .err();
    assert!(e.contains("named pipe"), "{e}");
    let e = call(
        &lead,
        "team_doc_append",
        json!({"workflow": "@d", "file": "pipe.md", "content": "x"}),
    )
    .await
    .err();
    assert!(e.contains("named pipe"), "{e}");
    assert!(t.elapsed() < Duration::from_secs(3), "{:?}", t.elapsed());
    let list = call(&lead, "team_doc_list", json!({"workflow": "@d"}))
        .await
        .ok();
    assert!(list["files"].is_array(), "{list}");
    s.stop().await;
}

#[tokio::test]
async fn deep_or_aliased_yaml_is_refused_in_milliseconds_with_its_position() {
    let dir = tempfile::tempdir().unwrap();
    let s = HttpServer::start(dir.path()).await;
    let lead = s.lead(Proto::Legacy).await;
    let other = s.lead(Proto::Modern).await;
    let deep = format!(
        "name: deep\nparams: {}1{}\n",
        "[".repeat(100_000),
        "]".repeat(100_000)
    );
    let t = Instant::now();
    let (a, b, c) = tokio::join!(
        call(&lead, "workflow_run", json!({"yaml": deep})),
        call(&lead, "workflow_run", json!({"yaml": deep})),
        call(&other, "agent_list", json!({}))
    );
    let took = t.elapsed();
    for e in [a.err(), b.err()] {
        assert!(e.contains("<inline>:2:"), "{e}");
        assert!(e.contains("nests deeper than 64"), "{e}");
    }
    c.ok();
    assert!(
        took < Duration::from_secs(2),
        "two deep refusals took {took:?}"
    );

    let block = format!("name: block\nparams:\n  {}1\n", "- ".repeat(50_000));
    let e = call(&lead, "workflow_run", json!({"yaml": block}))
        .await
        .err();
    assert!(e.contains("<inline>:3:"), "{e}");

    // A billion laughs: aliases expanding to billions of nodes.
    let mut bomb = String::from("name: bomb\na: &a [x, x, x, x, x, x, x, x, x]\n");
    for (n, prev) in ["b", "c", "d", "e", "f", "g", "h", "i"]
        .iter()
        .zip(["a", "b", "c", "d", "e", "f", "g", "h"])
    {
        bomb.push_str(&format!("{n}: &{n} [*{prev}, *{prev}, *{prev}, *{prev}, *{prev}, *{prev}, *{prev}, *{prev}, *{prev}]\n"));
    }
    let t = Instant::now();
    let e = call(&lead, "workflow_run", json!({"yaml": bomb}))
        .await
        .err();
    assert!(
        t.elapsed() < Duration::from_secs(2),
        "{:?}: {e}",
        t.elapsed()
    );

    // A large legal workflow still runs (its bulk in the kickoff: the lead may post
    // up to 1 MiB; a system prompt is held to agent_new's 64 KiB).
    let mut big = String::from(
        "name: big\nagents:\n  a:\n    backend: mock\n    system_prompt: You help.\nkickoff: |\n  @a here is the brief\n",
    );
    while big.len() < 900_000 {
        big.push_str("  [a line of a long brief, with {braces} and [brackets] - and dashes]\n");
    }
    let r = call(&lead, "workflow_run", json!({"yaml": big})).await.ok();
    assert_eq!(r["workflow"], "@big:main", "{r}");
    s.stop().await;
}

/// A "PostgreSQL" that accepts the connection and never says a word: the kernel
/// gives up within its store timeout (`AGENT_WORKER_STORE_TIMEOUT`, here 2 s),
/// exits non-zero saying why and what to check, and never shows the password. It
/// used to wait forever, neither listening nor saying anything.
#[tokio::test]
async fn a_store_that_accepts_and_never_answers_is_given_up_on_with_the_cause() {
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = silent.local_addr().unwrap().port();
    // Accepts every connection and keeps it open, saying nothing.
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for c in silent.incoming() {
            held.push(c);
        }
    });
    let dir = tempfile::tempdir().unwrap();
    let url = format!("postgres://u:secret@127.0.0.1:{port}/db");
    let started = Instant::now();
    let mut child = tokio::process::Command::new(BIN)
        .arg("--data-dir")
        .arg(dir.path())
        .args(["--store", &url, "--http", "127.0.0.1:0"])
        .env("AGENT_WORKER_STORE_TIMEOUT", "2")
        .env_remove("AGENT_WORKER_STORE")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let (mut out, mut err) = (child.stdout.take().unwrap(), child.stderr.take().unwrap());
    let status = tokio::time::timeout(Duration::from_secs(20), child.wait())
        .await
        .expect("the kernel exits, not waits forever")
        .unwrap();
    let took = started.elapsed();
    use tokio::io::AsyncReadExt;
    let (mut o, mut e) = (String::new(), String::new());
    out.read_to_string(&mut o).await.unwrap();
    err.read_to_string(&mut e).await.unwrap();
    let log = std::fs::read_dir(dir.path().join("logs"))
        .into_iter()
        .flatten()
        .flatten()
        .map(|f| std::fs::read_to_string(f.path()).unwrap_or_default())
        .collect::<String>();
    assert!(!status.success(), "{status:?}");
    assert!(
        took >= Duration::from_secs(2) && took < Duration::from_secs(8),
        "{took:?}"
    );
    assert!(
        e.contains(&format!(
            "PostgreSQL at postgres://u:***@127.0.0.1:{port}/db"
        )) && e.contains("did not answer within 2 s")
            && e.contains("AGENT_WORKER_STORE_TIMEOUT"),
        "{e}"
    );
    // A store that does not answer is what the kernel was configured with, not a
    // fault inside it.
    assert!(!e.contains("internal error"), "{e}");
    for text in [&o, &e, &log] {
        assert!(!text.contains("secret"), "the password shows: {text}");
    }
    eprintln!("gave up after {took:?}: {e}");
}

/// A SKILL.md whose frontmatter nests 100,000 deep (200 KB) is refused before any
/// YAML parser sees it: one agent_new with it took 23 s of CPU, and every run of an
/// agent that could write its own skill folder paid it again.
#[tokio::test]
async fn a_deeply_nested_skill_is_refused_in_milliseconds() {
    let dir = tempfile::tempdir().unwrap();
    let s = HttpServer::start(dir.path()).await;
    let lead = s.lead(Proto::Modern).await;
    let skills = tempfile::tempdir().unwrap();
    let mut cases = Vec::new();
    for (name, depth, want) in [
        ("deep", 100_000, "bytes; at most 65536"),
        ("nested", 1_000, "nests deeper than 64 levels"),
    ] {
        let folder = skills.path().join(name);
        std::fs::create_dir(&folder).unwrap();
        let md = format!(
            "---\nname: {name}\ndescription: x\nmeta: {}1{}\n---\nbody\n",
            "[".repeat(depth),
            "]".repeat(depth)
        );
        std::fs::write(folder.join("SKILL.md"), md).unwrap();
        cases.push((folder, want));
    }
    for (folder, want) in cases {
        let t = Instant::now();
        let e = call(
            &lead,
            "agent_new",
            json!({"name": "x", "backend": "mock", "skills": [folder]}),
        )
        .await
        .err();
        let took = t.elapsed();
        assert!(e.contains(want) && e.contains("SKILL.md"), "{e}");
        assert!(took < Duration::from_secs(2), "{took:?}");
        eprintln!("refused in {took:?}: {e}");
    }
    s.stop().await;
}
