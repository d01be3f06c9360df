//! The file provider's containment, on a real folder: a symbolic link counts only
//! when it stays inside the folder and out of hidden entries, a write never goes
//! through a linked file, folders and files are what the path says they are, a
//! bound folder must exist, files put there by hand must be text of a document's
//! size, and the list shows documents only.

use super::file::FileProvider;
use super::{DocPath, MAX_DOC_BYTES, Provider};
use crate::testing::{expect, said};
use std::os::unix::fs::symlink;
use std::path::Path;

/// A provider on a fresh folder (created on first write when `own`).
fn provider(own: bool) -> (tempfile::TempDir, FileProvider) {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("docs");
    if !own {
        std::fs::create_dir(&root).unwrap();
    }
    (dir, FileProvider::new(root, own, Default::default()))
}

fn root(dir: &tempfile::TempDir) -> std::path::PathBuf {
    dir.path().join("docs")
}

async fn read(p: &FileProvider, path: &str) -> String {
    let path = DocPath::parse(path).unwrap();
    match p.read(&path).await {
        Ok(Some(d)) => format!("= {}", d.content),
        Ok(None) => "none".into(),
        Err(e) => said::<()>(&Err(e)),
    }
}

async fn write(p: &FileProvider, path: &str, text: &str) -> String {
    let path = DocPath::parse(path).unwrap();
    let text = text.to_owned();
    let got = p.update(&path, "alice", Box::new(move |_| Ok(text))).await;
    said(&got)
}

fn put(at: &Path, bytes: &[u8]) {
    std::fs::create_dir_all(at.parent().unwrap()).unwrap();
    std::fs::write(at, bytes).unwrap();
}

#[tokio::test]
async fn a_link_counts_only_inside_the_folder_and_out_of_hidden_entries() {
    let (dir, p) = provider(false);
    let r = root(&dir);
    put(&dir.path().join("secret.md"), b"outside");
    put(&r.join(".git/config.md"), b"hidden");
    put(&r.join("real.md"), b"inside");
    symlink(dir.path().join("secret.md"), r.join("out.md")).unwrap();
    symlink(r.join(".git/config.md"), r.join("git.md")).unwrap();
    symlink(r.join("real.md"), r.join("alias.md")).unwrap();
    symlink(r.join("gone.md"), r.join("broken.md")).unwrap();
    expect(
        &read(&p, "out.md").await,
        "forbidden: out.md is a symbolic link that points outside the documents folder",
        &[],
    );
    expect(
        &read(&p, "git.md").await,
        "forbidden",
        &["outside the documents folder (or to a hidden file in it)"],
    );
    expect(
        &read(&p, "broken.md").await,
        "forbidden: broken.md goes through a broken symbolic link",
        &[],
    );
    assert_eq!(read(&p, "alias.md").await, "= inside");
    expect(
        &write(&p, "alias.md", "x").await,
        "forbidden: alias.md is a symbolic link; write to the file it points to instead",
        &[],
    );
    expect(
        &write(&p, "out.md", "x").await,
        "forbidden",
        &["points outside"],
    );
    assert_eq!(
        std::fs::read_to_string(dir.path().join("secret.md")).unwrap(),
        "outside"
    );
    let listed: Vec<String> = p
        .list()
        .await
        .unwrap()
        .into_iter()
        .map(|e| e.path)
        .collect();
    assert_eq!(
        listed,
        ["alias.md", "real.md"],
        "only documents that stay inside"
    );
}

#[tokio::test]
async fn folders_and_files_are_what_the_path_says() {
    let (dir, p) = provider(false);
    let r = root(&dir);
    std::fs::create_dir_all(r.join("plans.md")).unwrap();
    put(&r.join("notes.md"), b"n");
    expect(
        &read(&p, "plans.md").await,
        "invalid: plans.md is a folder, not a document",
        &[],
    );
    expect(
        &write(&p, "notes.md/x.md", "x").await,
        "invalid: notes.md/x.md: notes.md is a file, not a folder",
        &[],
    );
    expect(&write(&p, "new/deep/file.md", "x").await, "ok", &[]);
    assert_eq!(read(&p, "new/deep/file.md").await, "= x");
}

/// The instance's own folder is made on first write; a bound one must exist.
#[tokio::test]
async fn an_own_folder_is_made_on_first_write_and_a_bound_one_must_exist() {
    let (dir, own) = provider(true);
    assert_eq!(read(&own, "notes.md").await, "none");
    assert!(own.list().await.unwrap().is_empty());
    expect(&write(&own, "notes.md", "x").await, "ok", &[]);
    assert!(root(&dir).join("notes.md").is_file());
    let gone = FileProvider::new(dir.path().join("nowhere"), false, Default::default());
    expect(
        &read(&gone, "notes.md").await,
        "invalid: the documents folder",
        &["does not exist; create it or bind another"],
    );
}

/// What someone put in the folder by hand is read only as a document would be.
#[tokio::test]
async fn a_file_put_by_hand_is_read_only_if_it_is_text_of_a_document_s_size() {
    let (dir, p) = provider(false);
    let r = root(&dir);
    put(&r.join("big.txt"), &vec![b'x'; MAX_DOC_BYTES + 1]);
    put(&r.join("bin.txt"), &[0xff, 0xfe, 0x00]);
    put(&r.join("script.sh"), b"echo");
    expect(
        &read(&p, "big.txt").await,
        "invalid: big.txt is 1048577 bytes, more than a document may hold",
        &[],
    );
    expect(
        &read(&p, "bin.txt").await,
        "invalid: bin.txt is not UTF-8 text",
        &[],
    );
    let listed: Vec<String> = p
        .list()
        .await
        .unwrap()
        .into_iter()
        .map(|e| e.path)
        .collect();
    assert_eq!(
        listed,
        ["big.txt", "bin.txt"],
        "a file of no document type is not listed"
    );
}
