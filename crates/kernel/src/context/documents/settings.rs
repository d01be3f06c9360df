//! Per-instance document settings: the provider, a bound directory and the owner.
//!
//! They live on the `workflows` row. A workflow's YAML `context:` sets them when it is
//! run; the lead can set them for any instance with `workflow_context_set`. Switching
//! the provider or the directory of an instance that already has documents is refused:
//! documents are never moved behind anyone's back, and never silently hidden.

use crate::Scope;
use crate::context::Context;
use crate::registry::{agent_names, workflow_id_tx};
use domain::error::{Error, Result};
use domain::names::WorkflowRef;
use schemars::JsonSchema;
use serde::Serialize;
use std::path::{Path, PathBuf};
use store::sql::OptionalExtension;

/// Where an instance's documents are: real files, or rows of the store's database
/// (whichever engine it is; `"sqlite"` is its name in settings and YAML).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ProviderKind {
    #[default]
    File,
    Database,
}

impl ProviderKind {
    pub fn parse(s: &str) -> Result<Self> {
        match s.trim().to_ascii_lowercase().as_str() {
            "file" => Ok(Self::File),
            "sqlite" => Ok(Self::Database),
            other => Err(Error::invalid(format!(
                "unknown document provider {other:?}: use \"file\" (real files you can open in an editor) \
                 or \"sqlite\" (inside the database)"
            ))),
        }
    }
    pub fn as_str(self) -> &'static str {
        match self {
            Self::File => "file",
            Self::Database => "sqlite",
        }
    }
}

/// The default: the file provider in the instance's own folder, no owner.
#[derive(Debug, Clone, Default)]
pub struct DocSettings {
    pub provider: ProviderKind,
    /// A bound directory (file provider); `None` = the data dir's folder for the instance.
    pub dir: Option<PathBuf>,
    pub owner: Option<String>,
}

/// What `workflow_context_set` changes; `None` leaves a setting as it is, and an empty
/// string clears `dir` or `owner`.
#[derive(Debug, Clone, Default)]
pub struct ContextChange {
    pub documents: Option<String>,
    pub dir: Option<String>,
    pub owner: Option<String>,
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct ContextView {
    pub workflow: String,
    /// file or sqlite.
    pub documents: String,
    /// The folder holding the documents (file provider).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub documents_dir: Option<String>,
    /// Who may write documents besides the lead (none: every member).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub document_owner: Option<String>,
}

impl Context {
    pub(crate) async fn doc_settings(&self, workflow_id: i64) -> Result<DocSettings> {
        let row: Option<(String, Option<String>, Option<String>)> = self
            .store
            .read(move |c| {
                Ok(c.prepare_cached(
                    "SELECT doc_provider, doc_dir, document_owner FROM workflows WHERE id = ?1",
                )?
                .query_row([workflow_id], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
                .optional()?)
            })
            .await?;
        let (provider, dir, owner) =
            row.ok_or_else(|| Error::not_found("this workflow instance no longer exists"))?;
        Ok(DocSettings {
            provider: ProviderKind::parse(&provider)?,
            dir: dir.map(PathBuf::from),
            owner,
        })
    }

    /// The folder of the file provider: the bound one, or the instance's own.
    pub(crate) fn documents_dir(&self, scope: &Scope, settings: &DocSettings) -> PathBuf {
        settings.dir.clone().unwrap_or_else(|| {
            self.data_dir
                .as_path()
                .join("workflows")
                .join(&scope.workflow.name)
                .join(&scope.workflow.tag)
                .join("documents")
        })
    }

    /// Refuses to change where an instance's documents are while it holds any
    /// (they are not moved); a bound folder that no longer exists holds nothing.
    async fn refuse_stranding(&self, scope: &Scope, current: &DocSettings) -> Result<()> {
        // A bound folder that no longer exists holds nothing: rebinding must work.
        let gone = match (current.provider, &current.dir) {
            (ProviderKind::File, Some(d)) => !tokio::fs::try_exists(d).await.unwrap_or(false),
            _ => false,
        };
        let (_, docs) = self.documents(scope).await?;
        let held = if gone { 0 } else { docs.list().await?.len() };
        if held > 0 {
            return Err(Error::conflict(format!(
                "{} already has {held} document(s) in its {} store ({}); they are not moved. Move \
                 them yourself, or keep the current setting",
                scope.workflow,
                current.provider.as_str(),
                match current.provider {
                    ProviderKind::File => self.documents_dir(scope, current).display().to_string(),
                    ProviderKind::Database => "the database".into(),
                }
            )));
        }
        Ok(())
    }

    /// Sets an instance's document provider, bound directory and owner (creating the
    /// instance if it does not exist yet).
    pub async fn workflow_context_set(
        &self,
        workflow: &str,
        change: ContextChange,
    ) -> Result<ContextView> {
        let wf = WorkflowRef::parse(workflow)?;
        let provider = change
            .documents
            .as_deref()
            .map(ProviderKind::parse)
            .transpose()?;
        let dir = match change.dir.as_deref().map(str::trim) {
            None => None,
            Some("") => Some(None),
            Some(d) => Some(Some(self.check_bound_dir(Path::new(d))?)),
        };
        let owner = change
            .owner
            .as_deref()
            .map(|o| o.trim().trim_start_matches('@').to_owned());

        // The instance is created (if new) in the same job that stores the settings, so
        // a refused change leaves nothing behind.
        let existing = match self.registry.workflow_id(&wf).await {
            Ok(id) => Some(id),
            Err(Error::NotFound(_)) => None,
            Err(e) => return Err(e),
        };
        let current = match existing {
            Some(id) => self.doc_settings(id).await?,
            None => DocSettings::default(),
        };
        let (new_provider, new_dir) = settled(&current, provider, dir)?;
        let mut scope = Scope {
            workflow: wf.clone(),
            workflow_id: existing.unwrap_or_default(),
            me: domain::names::LEAD.into(),
            lead: true,
            run_id: None,
        };
        if existing.is_some() && (new_provider != current.provider || new_dir != current.dir) {
            self.refuse_stranding(&scope, &current).await?;
        }
        let dir_text = new_dir.as_ref().map(|d| d.display().to_string());
        let (key, now) = (wf.clone(), self.clock.now_ms());
        let (workflow_id, owner_now) = self
            .store
            .write(move |c| {
                let workflow_id = workflow_id_tx(c, &key, Some(now))?.unwrap_or_default();
                let owner = match owner {
                    None => current.owner,
                    Some(o) => owner_named(c, workflow_id, &o)?,
                };
                c.execute(
                    "UPDATE workflows SET doc_provider = ?2, doc_dir = ?3, document_owner = ?4 WHERE id = ?1",
                    (workflow_id, new_provider.as_str(), &dir_text, &owner),
                )?;
                Ok((workflow_id, owner))
            })
            .await?;
        scope.workflow_id = workflow_id;
        let settings = DocSettings {
            provider: new_provider,
            dir: new_dir,
            owner: owner_now,
        };
        Ok(ContextView {
            workflow: wf.to_string(),
            documents: new_provider.as_str().into(),
            documents_dir: (new_provider == ProviderKind::File)
                .then(|| self.documents_dir(&scope, &settings).display().to_string()),
            document_owner: settings.owner,
        })
    }

    /// A folder an instance may bind: absolute, existing, and not holding the data dir
    /// (whose database, token and logs are not documents).
    fn check_bound_dir(&self, dir: &Path) -> Result<PathBuf> {
        if !dir.is_absolute() {
            return Err(Error::invalid(format!(
                "documents_dir {} must be an absolute path",
                dir.display()
            )));
        }
        let canon = dir.canonicalize().map_err(|e| {
            Error::invalid(format!(
                "documents_dir {} cannot be used ({e}); create the folder first",
                dir.display()
            ))
        })?;
        if !canon.is_dir() {
            return Err(Error::invalid(format!(
                "documents_dir {} is not a folder",
                dir.display()
            )));
        }
        let data = self
            .data_dir
            .canonicalize()
            .unwrap_or_else(|_| self.data_dir.as_path().to_owned());
        if data.starts_with(&canon) || canon.starts_with(&data) {
            return Err(Error::invalid(format!(
                "documents_dir {} overlaps agent-worker's data dir {}; bind a project folder instead",
                dir.display(),
                data.display()
            )));
        }
        Ok(canon)
    }
}

/// The instance's agent `o` names (any case; "" clears the owner).
fn owner_named(c: &store::sql::Connection, workflow_id: i64, o: &str) -> Result<Option<String>> {
    if o.is_empty() {
        return Ok(None);
    }
    let agents = agent_names(c, workflow_id)?;
    let Some(found) = agents.iter().find(|a| a.eq_ignore_ascii_case(o)) else {
        return Err(Error::not_found(format!(
            "document_owner {o:?} is not an agent of this instance; agents: {}. Create it \
             first with agent_new",
            if agents.is_empty() {
                "none yet".to_owned()
            } else {
                agents.join(", ")
            }
        )));
    };
    Ok(Some(found.clone()))
}

/// The provider and bound folder a change leaves (`None`: unchanged; a folder of
/// `Some(None)`: cleared); a folder bound for the database provider is refused.
fn settled(
    current: &DocSettings,
    provider: Option<ProviderKind>,
    dir: Option<Option<PathBuf>>,
) -> Result<(ProviderKind, Option<PathBuf>)> {
    let provider = provider.unwrap_or(current.provider);
    let dir = match dir {
        Some(d) => d,
        // A bound folder means nothing to the database provider.
        None if provider == ProviderKind::Database => None,
        None => current.dir.clone(),
    };
    if provider == ProviderKind::Database && dir.is_some() {
        return Err(Error::invalid(
            "documents_dir binds a folder for the file provider; with documents: \"sqlite\" leave it out \
             (or pass \"\" to clear it)",
        ));
    }
    Ok((provider, dir))
}
