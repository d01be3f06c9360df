//! SQLite's and PostgreSQL's schemas are two files of migrations kept by hand
//! (`schema.rs` and `postgres/schema.rs`): this test proves that what they build is
//! the same schema. Both engines are migrated to the end, then read back: the same
//! tables, the same columns in each with the same kind of value, and the same
//! named indexes on the same columns.

use super::super::{Location, Store};
use crate::sql::Connection;
use crate::testing::fresh_database;
use domain::error::Result;
use std::collections::BTreeMap;

/// A table's columns (name → kind of value) and its named indexes (name → table,
/// whether unique, and its columns in order; an expression is "").
#[derive(Debug, Default, PartialEq)]
struct Schema {
    columns: BTreeMap<String, BTreeMap<String, &'static str>>,
    indexes: BTreeMap<String, (String, bool, Vec<String>)>,
}

/// The kind of value a declared type holds, as both engines' rows give it to the
/// kernel (`sql/postgres.rs` converts PostgreSQL's booleans and INTEGERs to SQLite's
/// integers).
fn kind(declared: &str) -> &'static str {
    let t = declared.to_ascii_lowercase();
    if t.contains("int") || t == "boolean" {
        "integer"
    } else if t.contains("char") || t == "text" {
        "text"
    } else if t.contains("real") || t.contains("double") || t == "numeric" {
        "real"
    } else if t.contains("blob") || t == "bytea" {
        "bytes"
    } else {
        "unknown"
    }
}

fn rows(c: &Connection, sql: &str) -> Result<Vec<Vec<String>>> {
    let mut st = c.prepare(sql)?;
    let mut rows = st.query(())?;
    let mut out = Vec::new();
    while let Some(r) = rows.next()? {
        let mut row = Vec::new();
        for i in 0.. {
            match r.get::<Option<String>>(i) {
                Ok(v) => row.push(v.unwrap_or_default()),
                Err(_) => break,
            }
        }
        out.push(row);
    }
    Ok(out)
}

fn sqlite_schema(c: &Connection) -> Result<Schema> {
    let mut s = Schema::default();
    let tables = "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'";
    for t in rows(c, tables)? {
        let cols = rows(
            c,
            &format!("SELECT name, type FROM pragma_table_info('{}')", t[0]),
        )?;
        let cols = cols.into_iter().map(|r| (r[0].clone(), kind(&r[1])));
        s.columns.insert(t[0].clone(), cols.collect());
    }
    let indexes =
        "SELECT name, tbl_name, sql FROM sqlite_master WHERE type = 'index' AND sql IS NOT NULL";
    for i in rows(c, indexes)? {
        let cols = rows(
            c,
            &format!(
                "SELECT name FROM pragma_index_info('{}') ORDER BY seqno",
                i[0]
            ),
        )?;
        let cols = cols.into_iter().map(|r| r[0].clone()).collect();
        let unique = i[2].to_ascii_uppercase().starts_with("CREATE UNIQUE");
        s.indexes.insert(i[0].clone(), (i[1].clone(), unique, cols));
    }
    Ok(s)
}

fn postgres_schema(c: &Connection) -> Result<Schema> {
    let mut s = Schema::default();
    let columns = "SELECT table_name::text, column_name::text, data_type::text
                   FROM information_schema.columns WHERE table_schema = current_schema()";
    for r in rows(c, columns)? {
        let table = s.columns.entry(r[0].clone()).or_default();
        table.insert(r[1].clone(), kind(&r[2]));
    }
    // Indexes a CREATE INDEX made: not those behind a primary key or a UNIQUE
    // constraint, which SQLite does not list either.
    let indexes = "SELECT i.relname::text, t.relname::text,
                          CASE WHEN x.indisunique THEN 'unique' END, COALESCE(a.attname::text, '')
                   FROM pg_index x
                   JOIN pg_class i ON i.oid = x.indexrelid
                   JOIN pg_class t ON t.oid = x.indrelid
                   JOIN pg_namespace n ON n.oid = t.relnamespace
                   CROSS JOIN LATERAL unnest(x.indkey) WITH ORDINALITY AS k(attnum, pos)
                   LEFT JOIN pg_attribute a ON a.attrelid = t.oid AND a.attnum = k.attnum
                   WHERE n.nspname = current_schema()
                     AND NOT EXISTS (SELECT 1 FROM pg_constraint c WHERE c.conindid = x.indexrelid)
                   ORDER BY i.relname, k.pos";
    for r in rows(c, indexes)? {
        let entry = s
            .indexes
            .entry(r[0].clone())
            .or_insert_with(|| (r[1].clone(), r[2] == "unique", Vec::new()));
        entry.2.push(r[3].clone());
    }
    Ok(s)
}

#[tokio::test]
async fn both_engines_build_the_same_schema() {
    let Some(url) = fresh_database() else { return };
    let dir = tempfile::tempdir().unwrap();
    let sqlite = Store::open(&dir.path().join("state.db")).unwrap();
    let postgres = Store::open_at(&Location::Postgres(url)).unwrap();
    let lite = sqlite.read(sqlite_schema).await.unwrap();
    let pg = postgres.read(postgres_schema).await.unwrap();
    assert!(
        lite.columns.len() > 10,
        "SQLite's tables were not read: {lite:?}"
    );
    for (table, columns) in &lite.columns {
        assert_eq!(
            Some(columns),
            pg.columns.get(table),
            "table {table}: SQLite's columns, then PostgreSQL's"
        );
    }
    // PostgreSQL keeps its migration number in a table; SQLite in PRAGMA user_version.
    let extra: Vec<_> = pg
        .columns
        .keys()
        .filter(|t| !lite.columns.contains_key(*t) && *t != "agent_worker_schema")
        .collect();
    assert!(extra.is_empty(), "tables only PostgreSQL has: {extra:?}");
    assert_eq!(
        lite.indexes, pg.indexes,
        "named indexes: SQLite's, then PostgreSQL's"
    );
}
