//! The database provider (`documents: sqlite` in a workflow, the name it has always
//! had): documents as rows of the store's `documents` table, whichever engine the
//! store is. Each update is one store job, so the read, the rules and the write
//! happen in one transaction and concurrent writers are serialised by the writer
//! thread.

use super::{BoxFuture, Doc, DocEntry, DocPath, Edit, MAX_LISTED, Provider, version_of};
use crate::timing::Clock;
use store::Store;
use store::sql;
use store::sql::{Connection, OptionalExtension};

pub struct DatabaseProvider {
    store: Store,
    /// The kernel's clock: when a document was written.
    clock: Clock,
    workflow_id: i64,
}

impl DatabaseProvider {
    pub fn new(store: Store, clock: Clock, workflow_id: i64) -> Self {
        Self {
            store,
            clock,
            workflow_id,
        }
    }
}

fn read_row(c: &Connection, workflow_id: i64, path: &str) -> sql::Result<Option<Doc>> {
    c.prepare_cached(
        "SELECT content, version, updated_at FROM documents WHERE workflow_id = ?1 AND path = ?2",
    )?
    .query_row((workflow_id, path), |r| {
        Ok(Doc {
            content: r.get(0)?,
            version: r.get(1)?,
            updated_at: r.get(2)?,
        })
    })
    .optional()
}

impl Provider for DatabaseProvider {
    fn read<'a>(&'a self, path: &'a DocPath) -> BoxFuture<'a, Option<Doc>> {
        let (wid, path) = (self.workflow_id, path.to_string());
        Box::pin(self.store.read(move |c| Ok(read_row(c, wid, &path)?)))
    }

    fn update<'a>(
        &'a self,
        path: &'a DocPath,
        by: &'a str,
        edit: Edit,
    ) -> BoxFuture<'a, (Doc, bool)> {
        let (wid, path, by) = (self.workflow_id, path.to_string(), by.to_owned());
        let clock = self.clock.clone();
        Box::pin(self.store.write(move |c| {
            let current = read_row(c, wid, &path)?;
            let content = edit(current.as_ref())?;
            let doc = Doc {
                version: version_of(&content),
                content,
                updated_at: clock.now_ms(),
            };
            c.prepare_cached(
                "INSERT INTO documents (workflow_id, path, content, version, updated_at, updated_by)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6)
                 ON CONFLICT (workflow_id, path) DO UPDATE SET content = excluded.content,
                   version = excluded.version, updated_at = excluded.updated_at, updated_by = excluded.updated_by",
            )?
            .execute(sql::params![wid, path, doc.content, doc.version, doc.updated_at, by])?;
            Ok((doc, current.is_none()))
        }))
    }

    fn list(&self) -> BoxFuture<'_, Vec<DocEntry>> {
        let wid = self.workflow_id;
        Box::pin(self.store.read(move |c| {
            let mut st = c.prepare_cached(
                "SELECT path, octet_length(content), updated_at FROM documents
                 WHERE workflow_id = ?1 ORDER BY path LIMIT ?2",
            )?;
            let rows = st
                .query_map((wid, MAX_LISTED as i64 + 1), |r| {
                    Ok(DocEntry {
                        path: r.get(0)?,
                        size: r.get::<i64>(1)? as u64,
                        updated_at: r.get(2)?,
                    })
                })?
                .collect::<sql::Result<Vec<_>>>()?;
            Ok(rows)
        }))
    }
}
