//! The working tools' documents (plans, to-do lists) and team messages.

use super::SqlStore;
use super::governance::immediate;
use crate::db::{DbResult, Optional, Row, SqlExt, args};
use crate::{Document, Message, Result, StoreError};

const DOCUMENT_COLUMNS: &str = "kind, scope, name, version, body, updated_us, updated_by";

fn document_row(r: &Row) -> DbResult<Document> {
    Ok(Document {
        kind: r.get(0)?,
        scope: r.get(1)?,
        name: r.get(2)?,
        version: r.get(3)?,
        body: r.get(4)?,
        updated_us: r.get(5)?,
        updated_by: r.get(6)?,
    })
}

impl SqlStore {
    pub async fn document(
        &self,
        kind: String,
        scope: String,
        name: String,
    ) -> Result<Option<Document>> {
        self.read(move |conn| {
            conn.query_row(
                &format!(
                    "SELECT {DOCUMENT_COLUMNS} FROM documents WHERE kind = ? AND scope = ? AND name = ?"
                ),
                args![kind, scope, name],
                document_row,
            )
            .optional()
            .map_err(StoreError::sql("read a document"))
        })
        .await
    }

    /// The newest documents of a kind, across scopes.
    pub async fn documents_of_kind(&self, kind: String, limit: usize) -> Result<Vec<Document>> {
        self.read(move |conn| {
            conn.query_map(
                &format!(
                    "SELECT {DOCUMENT_COLUMNS} FROM documents WHERE kind = ? ORDER BY updated_us DESC LIMIT ?"
                ),
                args![kind, limit.clamp(1, 1_000) as i64],
                document_row,
            )
            .map_err(StoreError::sql("read documents"))
        })
        .await
    }

    /// Writes `doc` if the stored version is `doc.version - 1` (or, for version 1, if there is
    /// none): a change made on a stale read is refused, not lost.
    pub async fn put_document(&self, doc: Document) -> Result<()> {
        self.write(move |conn| {
            let context = "write a document";
            let mut tx = immediate(conn, context)?;
            let current: Option<i64> = tx
                .query_row(
                    "SELECT version FROM documents WHERE kind = ? AND scope = ? AND name = ?",
                    args![doc.kind, doc.scope, doc.name],
                    |r| r.get(0),
                )
                .optional()
                .map_err(StoreError::sql(context))?;
            if current.unwrap_or(0) != doc.version - 1 {
                return Err(match current {
                    Some(version) if doc.version == 1 => StoreError::DocumentExists {
                        kind: doc.kind,
                        name: doc.name,
                        version,
                    },
                    _ => StoreError::DocumentChanged {
                        kind: doc.kind,
                        name: doc.name,
                    },
                });
            }
            tx.execute(
                "INSERT INTO documents (kind, scope, name, version, body, updated_us, updated_by)
                 VALUES (?, ?, ?, ?, ?, ?, ?)
                 ON CONFLICT (kind, scope, name) DO UPDATE SET version = excluded.version,
                   body = excluded.body, updated_us = excluded.updated_us,
                   updated_by = excluded.updated_by",
                args![
                    doc.kind,
                    doc.scope,
                    doc.name,
                    doc.version,
                    doc.body,
                    doc.updated_us,
                    doc.updated_by
                ],
            )
            .map_err(StoreError::sql(context))?;
            tx.commit().map_err(StoreError::sql(context))
        })
        .await
    }

    pub async fn send_message(&self, m: Message) -> Result<i64> {
        self.write(move |conn| {
            conn.query_row(
                "INSERT INTO messages (team, from_agent, to_agent, at_us, body) VALUES (?, ?, ?, ?, ?)
                 RETURNING id",
                args![m.team, m.from_agent, m.to_agent, m.at_us, m.body],
                |r| r.get(0),
            )
            .map_err(StoreError::sql("send a message"))
        })
        .await
    }

    /// The unread messages for `to` in `team`, oldest first, marked read as they are taken.
    pub async fn take_messages(
        &self,
        team: String,
        to: String,
        limit: usize,
    ) -> Result<Vec<Message>> {
        self.write(move |conn| {
            let context = "read messages";
            let mut tx = immediate(conn, context)?;
            let rows = tx
                .query_map(
                    "SELECT id, team, from_agent, to_agent, at_us, body FROM messages
                     WHERE team = ? AND to_agent = ? AND read_us IS NULL ORDER BY id LIMIT ?",
                    args![team, to, limit.clamp(1, 1_000) as i64],
                    |r| {
                        Ok(Message {
                            id: r.get(0)?,
                            team: r.get(1)?,
                            from_agent: r.get(2)?,
                            to_agent: r.get(3)?,
                            at_us: r.get(4)?,
                            body: r.get(5)?,
                        })
                    },
                )
                .map_err(StoreError::sql(context))?;
            let now = crate::now_us();
            for m in &rows {
                tx.execute(
                    "UPDATE messages SET read_us = ? WHERE id = ?",
                    args![now, m.id],
                )
                .map_err(StoreError::sql(context))?;
            }
            tx.commit().map_err(StoreError::sql(context))?;
            Ok(rows)
        })
        .await
    }
}
