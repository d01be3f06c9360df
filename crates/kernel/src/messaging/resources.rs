//! Content-addressed resources: immutable text blobs whose id is a hash of the
//! content (same content, same id). Long content goes here and messages carry the id.

use crate::Scope;
use crate::messaging::Messaging;
use domain::clock::fmt_ms;
use domain::error::{Error, Result};
use schemars::JsonSchema;
use serde::Serialize;
use sha2::{Digest, Sha256};
use store::sql;
use store::sql::{Connection, OptionalExtension};

pub const MAX_RESOURCE_BYTES: usize = 1024 * 1024;
pub const RESOURCE_TYPES: &[&str] = &["text", "markdown", "json", "diff"];
pub const URI_PREFIX: &str = "agent-worker://resources/";

/// Content-addressed id: the same content always gets the same id.
pub(crate) fn resource_id(content: &str) -> String {
    format!(
        "res_{}",
        &hex::encode(Sha256::digest(content.as_bytes()))[..32]
    )
}

/// Stores content under its id inside a write job, by `by` at `now`; returns false
/// when it was already there (the first writer's type and author stay).
pub(crate) fn store_resource(
    c: &Connection,
    id: &str,
    (kind, content): (&str, &str),
    (by, now): (&str, i64),
) -> Result<bool> {
    let inserted = c.execute(
        "INSERT INTO resources (id, type, content, size, created_by, created_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6)
         ON CONFLICT (id) DO NOTHING",
        sql::params![id, kind, content, content.len() as i64, by, now],
    )?;
    Ok(inserted == 1)
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct Created {
    /// The resource id (a content hash): send it in a message so others can resource_read it.
    pub id: String,
    /// The same resource as a URI.
    pub uri: String,
    pub size: i64,
    /// False when identical content already existed (the id is the same).
    pub created: bool,
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct Resource {
    pub id: String,
    /// text, markdown, json or diff.
    #[serde(rename = "type")]
    pub kind: String,
    pub content: String,
    pub size: i64,
    pub created_by: String,
    pub created_at: String,
}

impl Messaging {
    pub async fn resource_create(
        &self,
        scope: &Scope,
        content: String,
        kind: Option<&str>,
    ) -> Result<Created> {
        let kind = kind.unwrap_or("text").to_owned();
        if !RESOURCE_TYPES.contains(&kind.as_str()) {
            return Err(Error::invalid(format!(
                "type {kind:?} is not one of {}",
                RESOURCE_TYPES.join(", ")
            )));
        }
        if content.is_empty() {
            return Err(Error::invalid("content is empty"));
        }
        if content.len() > MAX_RESOURCE_BYTES {
            return Err(Error::invalid(format!(
                "content is {} bytes; a resource holds at most {MAX_RESOURCE_BYTES} (1 MiB): split it into several resources",
                content.len()
            )));
        }
        if kind == "json"
            && let Err(e) = serde_json::from_str::<serde_json::Value>(&content)
        {
            return Err(Error::invalid(format!(
                "type is json but the content is not valid JSON: {e}"
            )));
        }
        let id = resource_id(&content);
        let (id2, by, now) = (id.clone(), scope.me.clone(), self.clock.now_ms());
        let size = content.len() as i64;
        let created = self
            .store
            .write(move |c| store_resource(c, &id2, (&kind, &content), (&by, now)))
            .await?;
        Ok(Created {
            uri: format!("{URI_PREFIX}{id}"),
            id,
            size,
            created,
        })
    }

    pub async fn resource_read(&self, id: &str) -> Result<Resource> {
        let id = id
            .trim()
            .trim_start_matches(URI_PREFIX)
            .trim_start_matches("resource:")
            .to_owned();
        let id2 = id.clone();
        self.store
            .read(move |c| {
                Ok(c.query_row(
                    "SELECT id, type, content, size, created_by, created_at FROM resources WHERE id = ?1",
                    [&id2],
                    |r| {
                        Ok(Resource {
                            id: r.get(0)?,
                            kind: r.get(1)?,
                            content: r.get(2)?,
                            size: r.get(3)?,
                            created_by: r.get(4)?,
                            created_at: fmt_ms(r.get(5)?),
                        })
                    },
                )
                .optional()?)
            })
            .await?
            .ok_or_else(|| Error::not_found(format!("no resource {id:?}: use an id returned by resource_create or quoted in a message")))
    }
}
