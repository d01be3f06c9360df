//! Documents: the path rules (as a table), what write, append and create do to
//! the current content (versions, a newline, the size cap), the same answers from
//! the file and the database provider, the document owner's rule and
//! suggestions, doc_write contracts, and what an instance's settings may change.

use super::path::{DocPath, MAX_NAME_BYTES};
use super::settings::ContextChange;
use super::{ABSENT, Doc, MAX_DOC_BYTES, Mode, edit_for, version_of};
use crate::events::Event;
use crate::testing::{Rooms, expect, said};

#[track_caller]
fn check_path(raw: &str, want: &str) {
    let got = match DocPath::parse(raw) {
        Ok(p) => format!("ok {p}"),
        Err(e) => e.to_string(),
    };
    assert!(
        got.starts_with(want) || got.contains(want),
        "{raw:?}: got {got:?}, want {want:?}"
    );
}

#[test]
fn a_path_is_relative_plain_shallow_and_of_a_text_format() {
    check_path(" notes.md ", "ok notes.md");
    check_path("a b/c-d_e.1.TXT", "ok a b/c-d_e.1.TXT");
    check_path("a/b/c/d/e/f/g/h.md", "ok a/b/c/d/e/f/g/h.md");
    check_path("a/./b.md", "'.' and '..'");
    check_path("a /b.md", "starts or ends with a space");
    check_path("über.md", "character 'ü' is not allowed");
    check_path("a:b.md", "relative");
    check_path("notes.md.exe", "extension");
    check_path(".md", "hidden");
    check_path(&format!("{}.md", "n".repeat(MAX_NAME_BYTES - 3)), "ok");
    check_path(
        &format!("{}.md", "n".repeat(MAX_NAME_BYTES - 2)),
        "a name is longer than 200 bytes",
    );
    assert!(DocPath::or_default(None).unwrap().is_default());
    assert!(!DocPath::parse("design/notes.md").unwrap().is_default());
}

fn doc(content: &str) -> Doc {
    Doc {
        content: content.into(),
        version: version_of(content),
        updated_at: 0,
    }
}

/// What `mode` with `content` makes of `current`: the new text, or the refusal.
#[track_caller]
fn check_edit(mode: Mode, current: Option<&str>, content: &str, want: &str) {
    let current = current.map(doc);
    let edit = edit_for(DocPath::parse("notes.md").unwrap(), mode, content.into());
    let got = match edit(current.as_ref()) {
        Ok(text) => format!("= {text}"),
        Err(e) => said::<()>(&Err(e)),
    };
    assert!(got.starts_with(want), "got {got:?}, want {want:?}");
}

#[test]
fn an_append_starts_on_a_line_of_its_own() {
    check_edit(Mode::Append, None, "x", "= x");
    check_edit(Mode::Append, Some(""), "x", "= x");
    check_edit(Mode::Append, Some("a"), "x", "= a\nx");
    check_edit(Mode::Append, Some("a\n"), "x", "= a\nx");
}

#[test]
fn a_write_with_a_version_must_meet_the_current_one() {
    let replace = |v: Option<&str>| Mode::Replace {
        expected: v.map(str::to_owned),
    };
    let v = version_of("old");
    check_edit(replace(None), Some("old"), "new", "= new");
    check_edit(replace(Some(&v)), Some("old"), "new", "= new");
    check_edit(replace(Some(ABSENT)), None, "new", "= new");
    check_edit(
        replace(Some(ABSENT)),
        Some("old"),
        "new",
        &format!(
            "conflict: notes.md changed since you read it: expected_version is absent but the current version is {v}"
        ),
    );
    check_edit(
        replace(Some(&v)),
        None,
        "new",
        "conflict: notes.md changed since you read it",
    );
    check_edit(Mode::Create, None, "new", "= new");
    check_edit(
        Mode::Create,
        Some("old"),
        "new",
        &format!("conflict: notes.md already exists (version {v})"),
    );
}

#[test]
fn a_document_holds_at_most_one_mebibyte() {
    let full = "x".repeat(MAX_DOC_BYTES);
    check_edit(Mode::Create, None, &full, "= x");
    check_edit(
        Mode::Append,
        Some(&full),
        "y",
        "invalid: notes.md would be 1048578 bytes",
    );
}

/// Rooms with alice and bob in `@global:main`, whose documents use `provider`.
async fn with_provider(provider: &str) -> Rooms {
    let r = Rooms::new().await;
    r.agents(&["alice", "bob"]).await;
    let change = ContextChange {
        documents: Some(provider.into()),
        ..Default::default()
    };
    r.context
        .workflow_context_set("@global:main", change)
        .await
        .unwrap();
    r
}

/// Both providers answer alike: the main document reads as absent until written,
/// another is not found, versions follow the content, the list names them.
#[tokio::test]
async fn both_providers_read_write_and_list_alike() {
    for provider in ["file", "sqlite"] {
        let r = with_provider(provider).await;
        let alice = r.scope("alice").await;
        let main = r.context.doc_read(&alice, None).await.unwrap();
        assert_eq!(
            (main.exists, main.version.as_str(), main.file.as_str()),
            (false, ABSENT, "notes.md"),
            "{provider}"
        );
        let got = said(&r.context.doc_read(&alice, Some("plan.md")).await);
        expect(
            &got,
            "not found: no document plan.md in @global:main; documents: none yet",
            &[],
        );
        let w = r
            .context
            .doc_write(&alice, None, "hello".into(), Some(ABSENT))
            .await
            .unwrap();
        assert_eq!(
            (w.created, w.version.clone(), w.size),
            (true, version_of("hello"), 5),
            "{provider}"
        );
        let a = r
            .context
            .doc_append(&alice, None, "world".into())
            .await
            .unwrap();
        assert!(!a.created);
        let read = r.context.doc_read(&alice, Some("notes.md")).await.unwrap();
        assert_eq!(
            (read.content.as_str(), read.version),
            ("hello\nworld", a.version),
            "{provider}"
        );
        r.context
            .doc_create(&alice, "design/api.md", "api".into())
            .await
            .unwrap();
        let got = said(
            &r.context
                .doc_create(&alice, "design/api.md", "again".into())
                .await,
        );
        expect(&got, "conflict: design/api.md already exists", &[]);
        let listed = r.context.doc_list(&alice).await.unwrap();
        let mut files: Vec<&str> = listed.files.iter().map(|f| f.file.as_str()).collect();
        files.sort();
        assert_eq!(
            (files, listed.provider.as_str()),
            (vec!["design/api.md", "notes.md"], provider)
        );
        expect(
            &said(&r.context.doc_append(&alice, None, String::new()).await),
            "invalid: nothing to append",
            &[],
        );
    }
}

#[tokio::test]
async fn a_write_is_announced_with_whether_it_created_the_document() {
    let r = with_provider("sqlite").await;
    let alice = r.scope("alice").await;
    let mut heard = r.events.subscribe();
    r.context
        .doc_write(&alice, Some("a.md"), "1".into(), None)
        .await
        .unwrap();
    r.context
        .doc_write(&alice, Some("a.md"), "2".into(), None)
        .await
        .unwrap();
    for want in [true, false] {
        match heard.try_recv() {
            Ok(Event::DocumentChanged { file, created, .. }) => {
                assert_eq!((file.as_str(), created), ("a.md", want))
            }
            other => panic!("{other:?}"),
        }
    }
}

/// With an owner, only the owner and the lead change documents; the others
/// suggest, which reaches the owner's inbox.
#[tokio::test]
async fn only_the_owner_and_the_lead_change_documents_and_the_others_suggest() {
    let r = with_provider("sqlite").await;
    let (alice, bob, lead) = (
        r.scope("alice").await,
        r.scope("bob").await,
        r.scope("user").await,
    );
    let got = said(&r.context.document_suggest(&bob, "add a title", None).await);
    expect(
        &got,
        "invalid: @global:main has no document owner, so anyone may write",
        &[],
    );
    let change = ContextChange {
        owner: Some("@ALICE".into()),
        ..Default::default()
    };
    let view = r
        .context
        .workflow_context_set("@global:main", change)
        .await
        .unwrap();
    assert_eq!(view.document_owner.as_deref(), Some("alice"));
    let got = said(&r.context.doc_write(&bob, None, "x".into(), None).await);
    expect(
        &got,
        "forbidden: only @alice (the document owner) and the lead may change documents",
        &["document_suggest"],
    );
    expect(
        &said(&r.context.doc_write(&alice, None, "a".into(), None).await),
        "ok",
        &[],
    );
    expect(
        &said(&r.context.doc_append(&lead, None, "b".into()).await),
        "ok",
        &[],
    );
    let s = r
        .context
        .document_suggest(&bob, "add a title", Some("notes.md"))
        .await
        .unwrap();
    assert_eq!(s.owner, "alice");
    let inbox = r.messaging.inbox_peek(&alice, 10).await.unwrap();
    assert_eq!(
        inbox.messages[0].content,
        "@alice suggestion for notes.md from bob:\nadd a title"
    );
    let got = said(&r.context.document_suggest(&alice, "x", None).await);
    expect(&got, "invalid: you are the document owner", &[]);
    expect(
        &said(&r.context.document_suggest(&bob, "  ", None).await),
        "invalid: suggestion is empty",
        &[],
    );
    let huge = "s".repeat(4000);
    expect(
        &said(&r.context.document_suggest(&bob, &huge, None).await),
        "invalid: suggestion too long",
        &[],
    );
}

#[tokio::test]
async fn an_owner_is_an_agent_of_the_instance() {
    let r = with_provider("sqlite").await;
    let change = ContextChange {
        owner: Some("zed".into()),
        ..Default::default()
    };
    let got = said(&r.context.workflow_context_set("@global:main", change).await);
    expect(
        &got,
        "not found: document_owner \"zed\" is not an agent of this instance; agents: alice, bob",
        &[],
    );
}

/// A doc_write contract refuses an agent's write (nothing written) or tells the
/// members it names; the lead's writes are not asked about.
#[tokio::test]
async fn doc_write_contracts_refuse_or_tell() {
    let r = with_provider("sqlite").await;
    for spec in [
        serde_json::json!({"name": "frozen", "when": {"event": "doc_write", "file": "spec/*"}, "then": {"action": "deny", "reason": "frozen"}}),
        serde_json::json!({"name": "watch", "when": {"event": "doc_write"}, "then": {"action": "notify", "to": "bob"}}),
    ] {
        let c = domain::contracts::parse(&spec).unwrap();
        r.contracts.set(c, spec).await.unwrap();
    }
    let (alice, bob, lead) = (
        r.scope("alice").await,
        r.scope("bob").await,
        r.scope("user").await,
    );
    let got = said(&r.context.doc_create(&alice, "spec/a.md", "x".into()).await);
    expect(
        &got,
        "forbidden: refused by contract \"frozen\": frozen (nothing was written)",
        &[],
    );
    expect(
        &said(&r.context.doc_read(&alice, Some("spec/a.md")).await),
        "not found",
        &[],
    );
    r.context
        .doc_create(&alice, "free.md", "x".into())
        .await
        .unwrap();
    let told: Vec<String> = r
        .messaging
        .inbox_peek(&bob, 10)
        .await
        .unwrap()
        .messages
        .into_iter()
        .map(|m| m.content)
        .collect();
    assert_eq!(
        told,
        [
            "@bob contract \"watch\": alice tried to write document spec/a.md.",
            "@bob contract \"watch\": alice writes document free.md."
        ]
    );
    expect(
        &said(&r.context.doc_create(&lead, "spec/b.md", "x".into()).await),
        "ok",
        &[],
    );
}

/// A provider or folder is not switched under documents already there; a folder
/// is bound only for the file provider, absolute, and outside the data dir.
#[tokio::test]
async fn an_instance_s_documents_are_never_moved_or_hidden() {
    let r = with_provider("sqlite").await;
    let alice = r.scope("alice").await;
    let set = |change: ContextChange| r.context.workflow_context_set("@global:main", change);
    let folder = tempfile::tempdir().unwrap();
    let bind = |d: &str| ContextChange {
        dir: Some(d.into()),
        ..Default::default()
    };
    let got = said(&set(bind(folder.path().to_str().unwrap())).await);
    expect(
        &got,
        "invalid: documents_dir binds a folder for the file provider",
        &[],
    );
    r.context
        .doc_write(&alice, None, "kept".into(), None)
        .await
        .unwrap();
    let to_files = ContextChange {
        documents: Some("file".into()),
        ..Default::default()
    };
    let got = said(&set(to_files).await);
    expect(
        &got,
        "conflict: @global:main already has 1 document(s) in its sqlite store (the database)",
        &[],
    );
    let got = said(
        &set(ContextChange {
            documents: Some("s3".into()),
            ..Default::default()
        })
        .await,
    );
    expect(&got, "invalid: unknown document provider \"s3\"", &[]);
    let other = "@fresh:main";
    let files = ContextChange {
        documents: Some("file".into()),
        dir: Some("relative".into()),
        ..Default::default()
    };
    expect(
        &said(&r.context.workflow_context_set(other, files).await),
        "invalid: documents_dir relative must be an absolute path",
        &[],
    );
    let inside = ContextChange {
        dir: Some(r.dir.path().join("workflows").display().to_string()),
        ..Default::default()
    };
    std::fs::create_dir_all(r.dir.path().join("workflows")).unwrap();
    expect(
        &said(&r.context.workflow_context_set(other, inside).await),
        "invalid",
        &["overlaps agent-worker's data dir"],
    );
    let bound = r
        .context
        .workflow_context_set(other, bind(folder.path().to_str().unwrap()))
        .await
        .unwrap();
    assert_eq!(bound.documents, "file");
    assert!(bound.documents_dir.is_some());
}
