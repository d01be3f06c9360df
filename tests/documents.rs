//! Shared documents through real MCP sessions over HTTP: both providers, path
//! safety, ownership with document_suggest, optimistic concurrency, bound folders.

use crate::common;
use common::*;
use serde_json::{Value, json};

/// An instance with agents alice and bob, its documents in `provider`.
async fn team(s: &impl Served, lead: &Client, wf: &str, provider: &str) -> (Client, Client) {
    let mut sessions = agent_sessions(s, lead, wf, &["alice", "bob"]).await;
    let set = call(
        lead,
        "workflow_context_set",
        json!({"workflow": wf, "documents": provider}),
    )
    .await
    .ok();
    assert_eq!(set["documents"], provider);
    let bob = sessions.pop().unwrap();
    (sessions.pop().unwrap(), bob)
}

fn files(list: &Value) -> Vec<(String, u64)> {
    list["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            (
                f["file"].as_str().unwrap().to_owned(),
                f["size"].as_u64().unwrap(),
            )
        })
        .collect()
}

/// Reads, writes and appends on the main document, with its versions checked.
async fn edits_with_versions(alice: &Client, bob: &Client) {
    // The main document reads as empty before anyone writes it.
    let r = call(alice, "team_doc_read", json!({})).await.ok();
    assert_eq!(
        (
            r["file"].as_str(),
            r["exists"].as_bool(),
            r["content"].as_str()
        ),
        (Some("notes.md"), Some(false), Some(""))
    );
    assert_eq!(r["version"], "absent");

    let w = call(
        alice,
        "team_doc_write",
        json!({"content": "# Plan\nstep one"}),
    )
    .await
    .ok();
    assert_eq!(w["created"], true, "{w}");
    let v1 = w["version"].as_str().unwrap().to_owned();
    let r = call(bob, "team_doc_read", json!({"file": "notes.md"}))
        .await
        .ok();
    assert_eq!(r["content"], "# Plan\nstep one");
    assert_eq!(r["version"], v1.as_str());
    assert_eq!(r["exists"], true);

    // Append puts a newline between the old text and the new.
    let a = call(bob, "team_doc_append", json!({"content": "step two"}))
        .await
        .ok();
    assert_eq!(a["created"], false);
    let r = call(alice, "team_doc_read", json!({})).await.ok();
    assert_eq!(r["content"], "# Plan\nstep one\nstep two");
    assert_eq!(r["version"], a["version"]);
    assert_ne!(a["version"], v1.as_str());

    // A stale version is refused and the current one is named; nothing changes.
    let e = call(
        alice,
        "team_doc_write",
        json!({"content": "overwrite", "expected_version": v1}),
    )
    .await
    .err();
    let now = a["version"].as_str().unwrap();
    assert!(
        e.contains("changed since you read it") && e.contains(now),
        "{e}"
    );
    let r = call(alice, "team_doc_read", json!({})).await.ok();
    assert_eq!(r["content"], "# Plan\nstep one\nstep two");
    // With the current version it goes through.
    call(
        alice,
        "team_doc_write",
        json!({"content": "# Plan v2", "expected_version": now}),
    )
    .await
    .ok();
}

/// Creating nested documents, naming a missing one, and listing them.
async fn creates_and_lists(alice: &Client, bob: &Client, provider: &str) {
    // Create refuses an existing file; nested folders are created.
    let c = call(
        bob,
        "team_doc_create",
        json!({"file": "design/api.md", "content": "GET /x"}),
    )
    .await
    .ok();
    assert_eq!(c["created"], true);
    let e = call(
        alice,
        "team_doc_create",
        json!({"file": "design/api.md", "content": "again"}),
    )
    .await
    .err();
    assert!(e.contains("already exists"), "{e}");
    assert_eq!(
        call(alice, "team_doc_read", json!({"file": "design/api.md"}))
            .await
            .ok()["content"],
        "GET /x"
    );
    // A named document that does not exist is an error that lists what exists.
    let e = call(alice, "team_doc_read", json!({"file": "nope.md"}))
        .await
        .err();
    assert!(
        e.contains("no document nope.md") && e.contains("design/api.md"),
        "{e}"
    );

    let l = call(bob, "team_doc_list", json!({})).await.ok();
    assert_eq!(
        files(&l),
        vec![("design/api.md".to_owned(), 6), ("notes.md".to_owned(), 9)]
    );
    assert_eq!(l["provider"], provider);
    assert_eq!(l["truncated"], false);
}

/// The size and extension limits, for writes, creates and appends.
async fn refuses_past_the_limits(alice: &Client) {
    // Limits: size and extension.
    let big = "x".repeat(1024 * 1024 + 1);
    let e = call(alice, "team_doc_write", json!({"content": big}))
        .await
        .err();
    assert!(e.contains("1 MiB"), "{e}");
    let e = call(
        alice,
        "team_doc_create",
        json!({"file": "tool.exe", "content": "MZ"}),
    )
    .await
    .err();
    assert!(e.contains("extension"), "{e}");
    // Appending past the limit is refused too and leaves the document as it was.
    let half = "y".repeat(600 * 1024);
    call(
        alice,
        "team_doc_write",
        json!({"file": "big.txt", "content": half}),
    )
    .await
    .ok();
    let e = call(
        alice,
        "team_doc_append",
        json!({"file": "big.txt", "content": "z".repeat(600 * 1024)}),
    )
    .await
    .err();
    assert!(e.contains("1 MiB"), "{e}");
    let r = call(alice, "team_doc_read", json!({"file": "big.txt"}))
        .await
        .ok();
    assert_eq!(r["size"], 600 * 1024);
}

#[tokio::test]
async fn round_trips_on_both_providers() {
    let dir = tempfile::tempdir().unwrap();
    let s = InProcess::start(dir.path()).await;
    let lead = s.lead(Proto::Legacy).await;
    for provider in ["file", "sqlite"] {
        let wf = format!("@docs:{provider}");
        let (alice, bob) = team(&s, &lead, &wf, provider).await;

        edits_with_versions(&alice, &bob).await;

        creates_and_lists(&alice, &bob, provider).await;

        refuses_past_the_limits(&alice).await;

        // The lead reaches the same documents by naming the instance.
        let r = call(&lead, "team_doc_read", json!({"workflow": wf}))
            .await
            .ok();
        assert_eq!(r["content"], "# Plan v2");
    }

    // The file provider keeps real files; the sqlite one keeps none.
    let on_disk = dir.path().join("workflows/docs/file/documents");
    assert_eq!(
        std::fs::read_to_string(on_disk.join("notes.md")).unwrap(),
        "# Plan v2"
    );
    assert_eq!(
        std::fs::read_to_string(on_disk.join("design/api.md")).unwrap(),
        "GET /x"
    );
    assert!(!dir.path().join("workflows/docs/sqlite").exists());
    let leftovers: Vec<_> = std::fs::read_dir(&on_disk)
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().ends_with(".tmp"))
        .collect();
    assert!(
        leftovers.is_empty(),
        "temp files left behind: {leftovers:?}"
    );

    // An edit made in an editor is a new version: a writer holding the old one is refused.
    let lead_read = call(&lead, "team_doc_read", json!({"workflow": "@docs:file"}))
        .await
        .ok();
    std::fs::write(on_disk.join("notes.md"), "# Plan v2\nedited by hand").unwrap();
    let e = call(
        &lead,
        "team_doc_write",
        json!({"workflow": "@docs:file", "content": "x", "expected_version": lead_read["version"]}),
    )
    .await
    .err();
    assert!(e.contains("changed since you read it"), "{e}");
}

#[tokio::test]
async fn path_traversal_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    let secret = outside.path().join("secret.md");
    std::fs::write(&secret, "outside").unwrap();

    let s = InProcess::start(dir.path()).await;
    let lead = s.lead(Proto::Modern).await;
    let (alice, _bob) = team(&s, &lead, "@paths:t", "file").await;
    call(&alice, "team_doc_write", json!({"content": "inside"}))
        .await
        .ok();
    let docs = dir.path().join("workflows/paths/t/documents");
    std::os::unix::fs::symlink(&secret, docs.join("link.md")).unwrap();
    std::os::unix::fs::symlink(outside.path(), docs.join("out")).unwrap();
    std::os::unix::fs::symlink(docs.join("notes.md"), docs.join("alias.md")).unwrap();
    // Links must not make hidden entries (a repository's .git, .github) reachable.
    std::fs::create_dir_all(docs.join(".github/workflows")).unwrap();
    std::fs::write(docs.join(".github/token.md"), "hidden").unwrap();
    std::os::unix::fs::symlink(docs.join(".github/token.md"), docs.join("peek.md")).unwrap();
    std::os::unix::fs::symlink(docs.join(".github/workflows"), docs.join("ci")).unwrap();

    let attempts = [
        ("../x.md", "'..'"),
        ("a/../../b.md", "'..'"),
        ("/etc/passwd", "relative"),
        ("../../../../etc/passwd", "'..'"),
        ("link.md", "outside"),
        ("out/secret.md", "outside"),
        ("out/new.md", "outside"),
        (".hidden.md", "hidden"),
        ("peek.md", "hidden file"),
        ("ci/evil.yml", "hidden file"),
    ];
    for (path, why) in attempts {
        for (tool, args) in [
            ("team_doc_read", json!({"file": path})),
            ("team_doc_write", json!({"file": path, "content": "pwned"})),
            ("team_doc_append", json!({"file": path, "content": "pwned"})),
            ("team_doc_create", json!({"file": path, "content": "pwned"})),
        ] {
            let e = call(&alice, tool, args).await.err();
            assert!(e.contains(why), "{tool} {path:?}: {e}");
        }
    }
    assert_eq!(std::fs::read_to_string(&secret).unwrap(), "outside");
    assert!(!outside.path().join("new.md").exists());
    assert!(!docs.join(".github/workflows/evil.yml").exists());
    assert!(!dir.path().join("workflows/paths/x.md").exists());

    // A link that stays inside may be read, not written through; the listing shows
    // neither escaping link.
    let r = call(&alice, "team_doc_read", json!({"file": "alias.md"}))
        .await
        .ok();
    assert_eq!(r["content"], "inside");
    let e = call(
        &alice,
        "team_doc_write",
        json!({"file": "alias.md", "content": "x"}),
    )
    .await
    .err();
    assert!(e.contains("symbolic link"), "{e}");
    let l = call(&alice, "team_doc_list", json!({})).await.ok();
    let names: Vec<String> = files(&l).into_iter().map(|(f, _)| f).collect();
    assert_eq!(names, vec!["alias.md", "notes.md"]);

    // Binding: only an existing absolute folder that does not overlap the data dir.
    for (d, why) in [
        ("relative/dir".to_owned(), "absolute"),
        ("/does/not/exist".to_owned(), "create the folder"),
        (dir.path().display().to_string(), "overlaps"),
        (docs.display().to_string(), "overlaps"),
    ] {
        let e = call(
            &lead,
            "workflow_context_set",
            json!({"workflow": "@bind:t", "documents_dir": d}),
        )
        .await
        .err();
        assert!(e.contains(why), "{d}: {e}");
    }
    // Workflow names become folders: they cannot climb out either.
    let e = call(
        &lead,
        "agent_new",
        json!({"name": "x", "backend": "mock", "workflow": "@..:t"}),
    )
    .await
    .err();
    assert!(e.contains("must not start with '.'"), "{e}");
}

/// Switching a store that holds documents is refused; a vanished folder is an error until rebound.
async fn store_switches_are_guarded(lead: &Client) {
    // Switching the store while it holds documents would hide them: refused.
    let e = call(
        lead,
        "workflow_context_set",
        json!({"workflow": "@proj", "documents": "sqlite"}),
    )
    .await
    .err();
    assert!(e.contains("not moved") && e.contains("2 document"), "{e}");
    let e = call(
        lead,
        "workflow_context_set",
        json!({"workflow": "@proj", "documents_dir": ""}),
    )
    .await
    .err();
    assert!(e.contains("not moved"), "{e}");
    // A bound folder that disappears is an error, not an empty document set.
    let gone = tempfile::tempdir().unwrap();
    call(
        lead,
        "workflow_context_set",
        json!({"workflow": "@gone:t", "documents_dir": gone.path()}),
    )
    .await
    .ok();
    drop(gone);
    let e = call(lead, "team_doc_list", json!({"workflow": "@gone:t"}))
        .await
        .err();
    assert!(e.contains("does not exist"), "{e}");
    // ... and it can be rebound.
    call(
        lead,
        "workflow_context_set",
        json!({"workflow": "@gone:t", "documents_dir": ""}),
    )
    .await
    .ok();
    call(lead, "team_doc_list", json!({"workflow": "@gone:t"}))
        .await
        .ok();
    // An empty instance may switch freely.
    let set = call(
        lead,
        "workflow_context_set",
        json!({"workflow": "@fresh:t", "documents": "sqlite"}),
    )
    .await
    .ok();
    assert_eq!(set["documents"], "sqlite");
    let e = call(
        lead,
        "workflow_context_set",
        json!({"workflow": "@fresh:t", "documents": "tape"}),
    )
    .await
    .err();
    assert!(e.contains("\"file\"") && e.contains("\"sqlite\""), "{e}");
}

#[tokio::test]
async fn a_bound_folder_holds_the_documents() {
    let dir = tempfile::tempdir().unwrap();
    let project = tempfile::tempdir().unwrap();
    let s = InProcess::start(dir.path()).await;
    let lead = s.lead(Proto::Legacy).await;
    new_agents(&lead, "@proj:main", &["alice"]).await;
    let set = call(
        &lead,
        "workflow_context_set",
        json!({"workflow": "@proj", "documents_dir": project.path()}),
    )
    .await
    .ok();
    let canon = project.path().canonicalize().unwrap();
    assert_eq!(set["documents_dir"], canon.display().to_string());
    let alice = join(&s, &lead, "alice@proj", Proto::Modern).await;
    call(
        &alice,
        "team_doc_create",
        json!({"file": "docs/adr/0001-store.md", "content": "Use SQLite."}),
    )
    .await
    .ok();
    assert_eq!(
        std::fs::read_to_string(project.path().join("docs/adr/0001-store.md")).unwrap(),
        "Use SQLite."
    );
    // A file someone adds by hand shows up; files that are not documents do not.
    std::fs::write(project.path().join("README.md"), "hello").unwrap();
    std::fs::write(project.path().join("logo.png"), [0u8, 1, 2]).unwrap();
    std::fs::create_dir(project.path().join(".git")).unwrap();
    std::fs::write(project.path().join(".git/HEAD.txt"), "ref").unwrap();
    let l = call(&alice, "team_doc_list", json!({})).await.ok();
    assert_eq!(
        files(&l),
        vec![
            ("README.md".to_owned(), 5),
            ("docs/adr/0001-store.md".to_owned(), 11)
        ]
    );
    assert_eq!(l["dir"], canon.display().to_string());

    // A rewrite keeps the file's permissions.
    use std::os::unix::fs::PermissionsExt;
    let readme = project.path().join("README.md");
    std::fs::set_permissions(&readme, std::fs::Permissions::from_mode(0o600)).unwrap();
    call(
        &alice,
        "team_doc_write",
        json!({"file": "README.md", "content": "hello!"}),
    )
    .await
    .ok();
    let mode = std::fs::metadata(&readme).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);

    store_switches_are_guarded(&lead).await;
}

/// Bob's suggestion reaches alice's inbox; the owner cannot suggest, and long ones are refused.
async fn bob_suggests_to_alice(alice: &Client, bob: &Client) {
    // Bob suggests; it lands in alice's inbox, from bob, addressed to her.
    let sug = call(
        bob,
        "document_suggest",
        json!({"suggestion": "add a risks section", "file": "notes.md"}),
    )
    .await
    .ok();
    assert_eq!(sug["owner"], "alice");
    let inbox = call(alice, "my_inbox", json!({})).await.ok();
    let m = inbox["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["id"] == sug["message_id"])
        .unwrap_or_else(|| panic!("suggestion not in alice's inbox: {inbox}"));
    assert_eq!(m["from"], "bob");
    let text = m["content"].as_str().unwrap();
    assert!(
        text.starts_with("@alice")
            && text.contains("notes.md")
            && text.contains("add a risks section"),
        "{text}"
    );
    let e = call(alice, "document_suggest", json!({"suggestion": "x"}))
        .await
        .err();
    assert!(e.contains("you are the document owner"), "{e}");
    // The limit applies to the suggestion the caller wrote, and says so.
    let e = call(
        bob,
        "document_suggest",
        json!({"suggestion": "s".repeat(3990)}),
    )
    .await
    .err();
    assert!(
        e.contains("suggestion too long (3990") && e.contains("resource_create"),
        "{e}"
    );
}

#[tokio::test]
async fn only_the_owner_writes_and_others_suggest() {
    let dir = tempfile::tempdir().unwrap();
    let s = InProcess::start(dir.path()).await;
    let lead = s.lead(Proto::Legacy).await;
    let (alice, bob) = team(&s, &lead, "@own:t", "file").await;

    // Without an owner everyone writes, and there is nobody to suggest to.
    call(&bob, "team_doc_write", json!({"content": "draft"}))
        .await
        .ok();
    let e = call(&bob, "document_suggest", json!({"suggestion": "more"}))
        .await
        .err();
    assert!(e.contains("no document owner"), "{e}");

    let e = call(
        &lead,
        "workflow_context_set",
        json!({"workflow": "@own:t", "document_owner": "zed"}),
    )
    .await
    .err();
    assert!(e.contains("not an agent") && e.contains("alice"), "{e}");
    // A refused change to an instance that did not exist leaves no instance behind.
    let e = call(
        &lead,
        "workflow_context_set",
        json!({"workflow": "@ghost:t", "document_owner": "zed"}),
    )
    .await
    .err();
    assert!(e.contains("not an agent"), "{e}");
    let e = call(&lead, "team_members", json!({"workflow": "@ghost:t"}))
        .await
        .err();
    assert!(e.contains("no workflow instance @ghost:t"), "{e}");
    let set = call(
        &lead,
        "workflow_context_set",
        json!({"workflow": "@own:t", "document_owner": "@Alice"}),
    )
    .await
    .ok();
    assert_eq!(set["document_owner"], "alice");

    for (tool, args) in [
        ("team_doc_write", json!({"content": "mine now"})),
        ("team_doc_append", json!({"content": "more"})),
        ("team_doc_create", json!({"file": "b.md", "content": "x"})),
    ] {
        let e = call(&bob, tool, args).await.err();
        assert!(
            e.contains("only @alice") && e.contains("document_suggest"),
            "{tool}: {e}"
        );
    }
    assert_eq!(
        call(&bob, "team_doc_read", json!({})).await.ok()["content"],
        "draft",
        "a refused write changes nothing"
    );
    let r = call(&bob, "team_doc_read", json!({})).await.ok();
    assert_eq!(r["owner"], "alice");
    let l = call(&bob, "team_doc_list", json!({})).await.ok();
    assert_eq!(l["files"][0]["owner"], "alice");

    // The owner and the lead write.
    call(&alice, "team_doc_append", json!({"content": "by alice"}))
        .await
        .ok();
    call(
        &lead,
        "team_doc_append",
        json!({"workflow": "@own:t", "content": "by the lead"}),
    )
    .await
    .ok();
    assert_eq!(
        call(&alice, "team_doc_read", json!({})).await.ok()["content"],
        "draft\nby alice\nby the lead"
    );

    bob_suggests_to_alice(&alice, &bob).await;

    // Deleting the owner frees the documents again.
    call(&lead, "agent_delete", json!({"target": "alice@own:t"}))
        .await
        .ok();
    call(&bob, "team_doc_append", json!({"content": "bob again"}))
        .await
        .ok();
}

#[tokio::test]
async fn concurrent_writers_with_a_version_exactly_one_wins() {
    let dir = tempfile::tempdir().unwrap();
    let s = InProcess::start(dir.path()).await;
    let lead = s.lead(Proto::Modern).await;
    for provider in ["file", "sqlite"] {
        let wf = format!("@race:{provider}");
        let sessions = agent_sessions(&s, &lead, &wf, &["a1", "a2", "a3", "a4", "a5", "a6"]).await;
        call(
            &lead,
            "workflow_context_set",
            json!({"workflow": wf, "documents": provider}),
        )
        .await
        .ok();
        let base = call(&sessions[0], "team_doc_write", json!({"content": "base"}))
            .await
            .ok()["version"]
            .as_str()
            .unwrap()
            .to_owned();
        let writes = sessions.iter().enumerate().map(|(i, c)| {
            let base = base.clone();
            async move {
                call(
                    c,
                    "team_doc_write",
                    json!({"content": format!("writer {i}"), "expected_version": base}),
                )
                .await
            }
        });
        let results = futures::future::join_all(writes).await;
        let winners: Vec<usize> = results
            .iter()
            .enumerate()
            .filter(|(_, r)| matches!(r, Out::Ok(_)))
            .map(|(i, _)| i)
            .collect();
        assert_eq!(
            winners.len(),
            1,
            "{provider}: exactly one wins: {results:?}"
        );
        for r in &results {
            if let Out::Err(e) = r {
                assert!(e.contains("changed since you read it"), "{e}");
            }
        }
        let r = call(&lead, "team_doc_read", json!({"workflow": wf}))
            .await
            .ok();
        assert_eq!(r["content"], format!("writer {}", winners[0]));
    }
}
