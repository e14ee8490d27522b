//! MCP sessions over HTTP: each session's initialize request, so any replica can resume it.

use super::SqlStore;
use crate::db::{Optional, SqlExt, args};
use crate::{Result, StoreError, now_us};

impl SqlStore {
    pub async fn put_mcp_session(&self, id: String, state: String) -> Result<()> {
        self.write(move |conn| {
            conn.execute(
                "INSERT INTO mcp_sessions (id, state, created_us) VALUES (?, ?, ?)
                 ON CONFLICT (id) DO UPDATE SET state = excluded.state",
                args![id, state, now_us()],
            )
            .map_err(StoreError::sql("record an MCP session"))?;
            Ok(())
        })
        .await
    }

    pub async fn mcp_session(&self, id: String) -> Result<Option<String>> {
        self.read(move |conn| {
            conn.query_row(
                "SELECT state FROM mcp_sessions WHERE id = ?",
                args![id],
                |r| r.get(0),
            )
            .optional()
            .map_err(StoreError::sql("read an MCP session"))
        })
        .await
    }

    /// Binds session `id` to `agent` unless it is bound already; the agent it is bound to, or
    /// `None` for a session not on record.
    pub async fn bind_mcp_session(&self, id: String, agent: String) -> Result<Option<String>> {
        self.write(move |conn| {
            let context = "bind an MCP session";
            conn.execute(
                "UPDATE mcp_sessions SET agent = ? WHERE id = ? AND agent IS NULL",
                args![agent, id],
            )
            .map_err(StoreError::sql(context))?;
            conn.query_row(
                "SELECT agent FROM mcp_sessions WHERE id = ?",
                args![id],
                |r| r.get(0),
            )
            .optional()
            .map_err(StoreError::sql(context))
            .map(Option::flatten)
        })
        .await
    }

    /// Forgets one session, or (with `before_us`) every session begun before then.
    pub async fn remove_mcp_sessions(&self, id: Option<String>, before_us: i64) -> Result<u64> {
        self.write(move |conn| {
            conn.execute(
                "DELETE FROM mcp_sessions WHERE id = ? OR created_us < ?",
                args![id, before_us],
            )
            .map_err(StoreError::sql("forget MCP sessions"))
        })
        .await
    }
}
