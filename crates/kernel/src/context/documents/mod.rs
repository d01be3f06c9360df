//! Shared documents: the rules every provider follows, and the tools' operations.
//!
//! - Where documents live is a [`Provider`]: [`file::FileProvider`] (the default: real
//!   files under `<data-dir>/workflows/<name>/<tag>/documents/`, or a directory the
//!   instance binds) or [`database::DatabaseProvider`] (the `documents` table). Providers
//!   only store; every rule is here, once.
//! - Paths are checked by [`DocPath`] before any provider sees them.
//! - A version is a hash of the content, so it is the same whichever provider holds the
//!   document and it notices edits made outside agent-worker (someone's editor). A
//!   write with `expected_version` runs its check and its write as one step under the
//!   provider's lock, so of two concurrent writers from the same version exactly one
//!   wins; the other is told the current version.
//! - A document is at most [`MAX_DOC_BYTES`].
//! - Ownership: when the instance names a `document_owner`, only the owner and the lead
//!   may write, append or create; others are pointed to `document_suggest`.

pub mod database;
pub mod file;
#[cfg(test)]
mod file_tests;
pub mod path;
pub mod settings;
#[cfg(test)]
mod tests;

use crate::Scope;
use crate::context::Context;
use crate::messaging::{MAX_MESSAGE_CHARS, Outgoing};
use domain::clock::fmt_ms;
use domain::error::{Error, Result};
pub use path::DocPath;
use schemars::JsonSchema;
use serde::Serialize;
use settings::{DocSettings, ProviderKind};
use sha2::{Digest, Sha256};
use std::future::Future;
use std::pin::Pin;

pub const MAX_DOC_BYTES: usize = 1024 * 1024;
/// The version of a document that does not exist yet. Writing with this as
/// `expected_version` means "only if nobody has created it meanwhile".
pub const ABSENT: &str = "absent";
/// team_doc_list lists at most this many files.
pub const MAX_LISTED: usize = 1000;

/// A document's current state, as a provider returns it.
#[derive(Debug, Clone)]
pub struct Doc {
    pub content: String,
    pub version: String,
    pub updated_at: i64,
}

/// One entry of a provider's listing.
#[derive(Debug, Clone)]
pub struct DocEntry {
    pub path: String,
    pub size: u64,
    pub updated_at: i64,
}

/// The version of some content: the first 16 hex digits of its SHA-256.
pub fn version_of(content: &str) -> String {
    hex::encode(&Sha256::digest(content.as_bytes())[..8])
}

pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = Result<T>> + Send + 'a>>;

/// Computes a document's new content from its current state (`None`: it does not
/// exist). Returning an error writes nothing.
pub type Edit = Box<dyn FnOnce(Option<&Doc>) -> Result<String> + Send>;

/// Where an instance's documents are stored.
pub trait Provider: Send + Sync {
    fn read<'a>(&'a self, path: &'a DocPath) -> BoxFuture<'a, Option<Doc>>;
    /// Reads the document, applies `edit` and stores the result, with no other write
    /// to the same provider in between. Returns the new state and whether this
    /// created the document.
    fn update<'a>(
        &'a self,
        path: &'a DocPath,
        by: &'a str,
        edit: Edit,
    ) -> BoxFuture<'a, (Doc, bool)>;
    /// Every document, sorted by path; at most [`MAX_LISTED`] + 1 entries (one more
    /// than listed tells that the list was cut).
    fn list(&self) -> BoxFuture<'_, Vec<DocEntry>>;
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct DocRead {
    pub file: String,
    pub content: String,
    /// Pass it as expected_version to team_doc_write so that you never overwrite a change you have not seen.
    pub version: String,
    /// False when the file does not exist yet (only the main document, notes.md, reads as empty).
    pub exists: bool,
    pub size: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub updated_at: Option<String>,
    /// Who may write documents here besides the lead (none: everyone).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct DocWritten {
    pub file: String,
    /// The new version.
    pub version: String,
    pub size: u64,
    /// True when this call created the file.
    pub created: bool,
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct DocFile {
    /// The path to pass as `file`.
    pub file: String,
    pub size: u64,
    pub updated_at: String,
    /// Who may write it besides the lead (none: everyone).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct DocList {
    pub files: Vec<DocFile>,
    /// Where the documents are stored: file or sqlite.
    pub provider: String,
    /// The folder holding the documents (file provider).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dir: Option<String>,
    /// True when there were more than 1000 files and the list was cut.
    pub truncated: bool,
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct Suggested {
    /// The channel message carrying the suggestion.
    pub message_id: String,
    /// The owner it was addressed to.
    pub owner: String,
}

/// How a write treats the current content.
enum Mode {
    Replace { expected: Option<String> },
    Append,
    Create,
}

fn check_size(path: &DocPath, bytes: usize) -> Result<()> {
    if bytes > MAX_DOC_BYTES {
        return Err(Error::invalid(format!(
            "{path} would be {bytes} bytes; a document holds at most {MAX_DOC_BYTES} bytes (1 MiB). \
             Start another file, or store large content with resource_create and link its id"
        )));
    }
    Ok(())
}

/// The rules of write, append and create, applied to the current state.
fn edit_for(path: DocPath, mode: Mode, content: String) -> Edit {
    Box::new(move |current: Option<&Doc>| {
        let new = match mode {
            Mode::Create => {
                if let Some(d) = current {
                    return Err(Error::conflict(format!(
                        "{path} already exists (version {}); read it with team_doc_read, then change it with \
                         team_doc_write or team_doc_append",
                        d.version
                    )));
                }
                content
            }
            Mode::Replace { expected } => {
                if let Some(expected) = expected {
                    let now = current.map_or(ABSENT, |d| d.version.as_str());
                    if expected != now {
                        return Err(Error::conflict(format!(
                            "{path} changed since you read it: expected_version is {expected} but the current \
                             version is {now}. Read it again with team_doc_read, merge your change, and write \
                             with expected_version {now}"
                        )));
                    }
                }
                content
            }
            Mode::Append => match current {
                Some(d) if !d.content.is_empty() && !d.content.ends_with('\n') => {
                    format!("{}\n{content}", d.content)
                }
                Some(d) => format!("{}{content}", d.content),
                None => content,
            },
        };
        check_size(&path, new.len())?;
        Ok(new)
    })
}

impl Context {
    /// The provider holding a scope's documents.
    async fn documents(&self, scope: &Scope) -> Result<(DocSettings, Box<dyn Provider>)> {
        let settings = self.doc_settings(scope.workflow_id).await?;
        let provider: Box<dyn Provider> = match settings.provider {
            ProviderKind::File => Box::new(file::FileProvider::new(
                self.documents_dir(scope, &settings),
                settings.dir.is_none(),
                self.doc_writes.clone(),
            )),
            ProviderKind::Database => Box::new(database::DatabaseProvider::new(
                self.store.clone(),
                self.clock.clone(),
                scope.workflow_id,
            )),
        };
        Ok((settings, provider))
    }

    pub async fn doc_read(&self, scope: &Scope, file: Option<&str>) -> Result<DocRead> {
        let path = DocPath::or_default(file)?;
        let (settings, docs) = self.documents(scope).await?;
        match docs.read(&path).await? {
            Some(d) => Ok(DocRead {
                file: path.to_string(),
                size: d.content.len() as u64,
                content: d.content,
                version: d.version,
                exists: true,
                updated_at: Some(fmt_ms(d.updated_at)),
                owner: settings.owner,
            }),
            None if path.is_default() => Ok(DocRead {
                file: path.to_string(),
                content: String::new(),
                version: ABSENT.into(),
                exists: false,
                size: 0,
                updated_at: None,
                owner: settings.owner,
            }),
            None => {
                let listed = docs.list().await?;
                let names: Vec<&str> = listed.iter().take(20).map(|e| e.path.as_str()).collect();
                Err(Error::not_found(format!(
                    "no document {path} in {}; documents: {}. Create it with team_doc_create",
                    scope.workflow,
                    if names.is_empty() {
                        "none yet".to_owned()
                    } else {
                        names.join(", ")
                    }
                )))
            }
        }
    }

    pub async fn doc_write(
        &self,
        scope: &Scope,
        file: Option<&str>,
        content: String,
        expected_version: Option<&str>,
    ) -> Result<DocWritten> {
        let mode = Mode::Replace {
            expected: expected_version.map(str::to_owned),
        };
        self.doc_change(scope, file, mode, content).await
    }

    pub async fn doc_append(
        &self,
        scope: &Scope,
        file: Option<&str>,
        content: String,
    ) -> Result<DocWritten> {
        if content.is_empty() {
            return Err(Error::invalid("nothing to append: content is empty"));
        }
        self.doc_change(scope, file, Mode::Append, content).await
    }

    pub async fn doc_create(
        &self,
        scope: &Scope,
        file: &str,
        content: String,
    ) -> Result<DocWritten> {
        self.doc_change(scope, Some(file), Mode::Create, content)
            .await
    }

    async fn doc_change(
        &self,
        scope: &Scope,
        file: Option<&str>,
        mode: Mode,
        content: String,
    ) -> Result<DocWritten> {
        let path = DocPath::or_default(file)?;
        let (settings, docs) = self.documents(scope).await?;
        if let Some(owner) = &settings.owner
            && !scope.lead
            && !owner.eq_ignore_ascii_case(&scope.me)
        {
            return Err(Error::forbidden(format!(
                "only @{owner} (the document owner) and the lead may change documents in {}; \
                 send your change to @{owner} with document_suggest",
                scope.workflow
            )));
        }
        if !scope.lead {
            self.doc_contracts(scope, &path.to_string()).await?;
        }
        let edit = edit_for(path.clone(), mode, content);
        let (doc, created) = docs.update(&path, &scope.me, edit).await?;
        self.events.publish(crate::events::Event::DocumentChanged {
            workflow_id: scope.workflow_id,
            file: path.to_string(),
            created,
        });
        Ok(DocWritten {
            file: path.to_string(),
            size: doc.content.len() as u64,
            version: doc.version,
            created,
        })
    }

    /// What doc_write contracts say about an agent's write: refused (with the
    /// contract's reason, nothing written), or told to the members they name.
    async fn doc_contracts(&self, scope: &Scope, file: &str) -> Result<()> {
        use crate::governance::contracts::{Decision, in_force, record_tx};
        use domain::contracts::{self, Event};
        let all = self.contracts.all();
        let v = contracts::decide(
            in_force(&all, scope.workflow_id, &scope.workflow),
            &Event::DocWrite {
                agent: &scope.me,
                file,
            },
        );
        if !v.any() {
            return Ok(());
        }
        let (s, f, v2, now) = (
            scope.clone(),
            file.to_owned(),
            v.clone(),
            self.clock.now_ms(),
        );
        let posted = self
            .store
            .write(move |c| {
                let d = Decision::of(s.workflow_id, &s.me, "doc_write", &f, &v2);
                record_tx(c, &d, now)?;
                let mut out = Vec::new();
                for (contract, to) in &v2.notify {
                    out.push(crate::messaging::post_system_to(
                        c,
                        s.workflow_id,
                        &s.workflow,
                        to,
                        &format!(
                            "contract \"{contract}\": {} {} document {f}.",
                            s.me,
                            if v2.deny.is_some() {
                                "tried to write"
                            } else {
                                "writes"
                            }
                        ),
                        now,
                    )?);
                }
                Ok(out)
            })
            .await?;
        for p in &posted {
            self.messaging.announce(scope.workflow_id, p);
        }
        match v.deny {
            Some((_, why, _)) => Err(Error::forbidden(format!("{why} (nothing was written)"))),
            None => Ok(()),
        }
    }

    pub async fn doc_list(&self, scope: &Scope) -> Result<DocList> {
        let (settings, docs) = self.documents(scope).await?;
        let mut entries = docs.list().await?;
        let truncated = entries.len() > MAX_LISTED;
        entries.truncate(MAX_LISTED);
        Ok(DocList {
            files: entries
                .into_iter()
                .map(|e| DocFile {
                    file: e.path,
                    size: e.size,
                    updated_at: fmt_ms(e.updated_at),
                    owner: settings.owner.clone(),
                })
                .collect(),
            provider: settings.provider.as_str().into(),
            dir: (settings.provider == ProviderKind::File)
                .then(|| self.documents_dir(scope, &settings).display().to_string()),
            truncated,
        })
    }

    /// Posts a suggestion to the document owner in the channel, addressed with
    /// `@owner` so that it lands in the owner's inbox.
    pub async fn document_suggest(
        &self,
        scope: &Scope,
        suggestion: &str,
        file: Option<&str>,
    ) -> Result<Suggested> {
        let path = DocPath::or_default(file)?;
        if suggestion.trim().is_empty() {
            return Err(Error::invalid(
                "suggestion is empty: say what should change",
            ));
        }
        let settings = self.doc_settings(scope.workflow_id).await?;
        let Some(owner) = settings.owner else {
            return Err(Error::invalid(format!(
                "{} has no document owner, so anyone may write: change {path} directly with \
                 team_doc_write or team_doc_append",
                scope.workflow
            )));
        };
        if owner.eq_ignore_ascii_case(&scope.me) {
            return Err(Error::invalid(format!(
                "you are the document owner: change {path} directly with team_doc_write"
            )));
        }
        let message = format!(
            "@{owner} suggestion for {path} from {}:\n{suggestion}",
            scope.me
        );
        let room = MAX_MESSAGE_CHARS - (message.chars().count() - suggestion.chars().count());
        if !scope.lead && suggestion.chars().count() > room {
            return Err(Error::invalid(format!(
                "suggestion too long ({} characters; at most {room} here): store the full text with \
                 resource_create and suggest with its id",
                suggestion.chars().count()
            )));
        }
        let sent = self
            .messaging
            .channel_send(
                scope,
                Outgoing {
                    message,
                    to: None,
                    force: true,
                    urgent: false,
                },
            )
            .await?;
        Ok(Suggested {
            message_id: sent.id,
            owner,
        })
    }
}
