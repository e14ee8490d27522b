//! Federation's records: upstream status, the vault, data sets and reports.

use super::SqlStore;
use super::governance::{bump, immediate};
use crate::db::{DbError, DbResult, Optional, Row, SqlExt, args};
use crate::{Dataset, DatasetSummary, Report, Result, SealedSecret, StoreError, UpstreamStatus};

const STATUS_COLUMNS: &str =
    "name, transport, connected, last_error, tool_count, fingerprint, listing, updated_us";
const REPORT_COLUMNS: &str = "name, tool, arguments, agent, saved_by, at_us, last_call";

fn report_row(r: &Row) -> DbResult<Report> {
    Ok(Report {
        name: r.get(0)?,
        tool: r.get(1)?,
        arguments: r.get(2)?,
        agent: r.get(3)?,
        saved_by: r.get(4)?,
        at_us: r.get(5)?,
        last_call: r.get(6)?,
    })
}

fn json_column<T: serde::de::DeserializeOwned>(r: &Row, i: usize) -> DbResult<T> {
    let text: String = r.get(i)?;
    serde_json::from_str(&text).map_err(|e| DbError::decode(i, e))
}

impl SqlStore {
    pub async fn put_upstream_status(&self, s: UpstreamStatus) -> Result<()> {
        self.write(move |conn| {
            conn.execute(
                &format!(
                    "INSERT INTO upstream_status ({STATUS_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?)
                     ON CONFLICT (name) DO UPDATE SET transport = excluded.transport,
                       connected = excluded.connected, last_error = excluded.last_error,
                       tool_count = excluded.tool_count, fingerprint = excluded.fingerprint,
                       listing = excluded.listing, updated_us = excluded.updated_us"
                ),
                args![
                    s.name,
                    s.transport,
                    s.connected,
                    s.last_error,
                    s.tool_count,
                    s.fingerprint,
                    s.listing,
                    s.updated_us
                ],
            )
            .map_err(StoreError::sql("write upstream status"))?;
            Ok(())
        })
        .await
    }

    pub async fn upstream_statuses(&self) -> Result<Vec<UpstreamStatus>> {
        self.read(|conn| {
            conn.query_map(
                &format!("SELECT {STATUS_COLUMNS} FROM upstream_status ORDER BY name"),
                &[],
                |r| {
                    Ok(UpstreamStatus {
                        name: r.get(0)?,
                        transport: r.get(1)?,
                        connected: r.get(2)?,
                        last_error: r.get(3)?,
                        tool_count: r.get(4)?,
                        fingerprint: r.get(5)?,
                        listing: r.get(6)?,
                        updated_us: r.get(7)?,
                    })
                },
            )
            .map_err(StoreError::sql("read upstream status"))
        })
        .await
    }

    pub async fn request_sources_refresh(&self) -> Result<()> {
        self.write(|conn| {
            let context = "request a sources refresh";
            let mut tx = immediate(conn, context)?;
            bump(&mut *tx, "sources").map_err(StoreError::sql(context))?;
            tx.commit().map_err(StoreError::sql(context))
        })
        .await
    }

    pub async fn vault_put(&self, secret: SealedSecret) -> Result<()> {
        self.write(move |conn| {
            conn.execute(
                "INSERT INTO vault (name, nonce, ciphertext, updated_us) VALUES (?, ?, ?, ?)
                 ON CONFLICT (name) DO UPDATE SET nonce = excluded.nonce,
                   ciphertext = excluded.ciphertext, updated_us = excluded.updated_us",
                args![
                    secret.name,
                    secret.nonce,
                    secret.ciphertext,
                    secret.updated_us
                ],
            )
            .map_err(StoreError::sql("write the vault"))?;
            Ok(())
        })
        .await
    }

    pub async fn vault_get(&self, name: String) -> Result<Option<SealedSecret>> {
        self.read(move |conn| {
            conn.query_row(
                "SELECT name, nonce, ciphertext, updated_us FROM vault WHERE name = ?",
                args![name],
                |r| {
                    Ok(SealedSecret {
                        name: r.get(0)?,
                        nonce: r.get(1)?,
                        ciphertext: r.get(2)?,
                        updated_us: r.get(3)?,
                    })
                },
            )
            .optional()
            .map_err(StoreError::sql("read the vault"))
        })
        .await
    }

    pub async fn vault_names(&self) -> Result<Vec<(String, i64)>> {
        self.read(|conn| {
            conn.query_map(
                "SELECT name, updated_us FROM vault ORDER BY name",
                &[],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .map_err(StoreError::sql("read the vault"))
        })
        .await
    }

    pub async fn vault_remove(&self, name: String) -> Result<bool> {
        self.write(move |conn| {
            let n = conn
                .execute("DELETE FROM vault WHERE name = ?", args![name])
                .map_err(StoreError::sql("write the vault"))?;
            Ok(n > 0)
        })
        .await
    }

    pub async fn put_dataset(&self, d: Dataset) -> Result<()> {
        self.write(move |conn| {
            let columns = serde_json::to_string(&d.columns).unwrap_or_default();
            let rows = serde_json::to_string(&d.rows).unwrap_or_default();
            conn.execute(
                "INSERT INTO datasets (call_id, at_us, agent, tool, arguments, columns, rows, row_count, dropped)
                 VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
                 ON CONFLICT (call_id) DO UPDATE SET at_us = excluded.at_us, agent = excluded.agent,
                   tool = excluded.tool, arguments = excluded.arguments, columns = excluded.columns,
                   rows = excluded.rows, row_count = excluded.row_count, dropped = excluded.dropped",
                args![
                    d.call_id,
                    d.at_us,
                    d.agent,
                    d.tool,
                    d.arguments,
                    columns,
                    rows,
                    d.rows.len() as i64,
                    d.dropped
                ],
            )
            .map_err(StoreError::sql("write a data set"))?;
            Ok(())
        })
        .await
    }

    pub async fn dataset(&self, call_id: String) -> Result<Option<Dataset>> {
        self.read(move |conn| {
            conn.query_row(
                "SELECT call_id, at_us, agent, tool, arguments, columns, rows, dropped
                 FROM datasets WHERE call_id = ?",
                args![call_id],
                |r| {
                    Ok(Dataset {
                        call_id: r.get(0)?,
                        at_us: r.get(1)?,
                        agent: r.get(2)?,
                        tool: r.get(3)?,
                        arguments: r.get(4)?,
                        columns: json_column(r, 5)?,
                        rows: json_column(r, 6)?,
                        dropped: r.get(7)?,
                    })
                },
            )
            .optional()
            .map_err(StoreError::sql("read a data set"))
        })
        .await
    }

    pub async fn datasets(&self, limit: usize) -> Result<Vec<DatasetSummary>> {
        self.read(move |conn| {
            conn.query_map(
                &format!(
                    "SELECT call_id, at_us, agent, tool, columns, row_count, dropped
                     FROM datasets ORDER BY at_us DESC LIMIT {}",
                    limit.clamp(1, 100_000)
                ),
                &[],
                |r| {
                    Ok(DatasetSummary {
                        call_id: r.get(0)?,
                        at_us: r.get(1)?,
                        agent: r.get(2)?,
                        tool: r.get(3)?,
                        columns: json_column(r, 4)?,
                        row_count: r.get(5)?,
                        dropped: r.get(6)?,
                    })
                },
            )
            .map_err(StoreError::sql("read data sets"))
        })
        .await
    }

    pub async fn save_report(&self, report: Report) -> Result<()> {
        self.write(move |conn| {
            conn.execute(
                &format!(
                    "INSERT INTO reports ({REPORT_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?)
                     ON CONFLICT (name) DO UPDATE SET tool = excluded.tool,
                       arguments = excluded.arguments, agent = excluded.agent,
                       saved_by = excluded.saved_by, at_us = excluded.at_us,
                       last_call = excluded.last_call"
                ),
                args![
                    report.name,
                    report.tool,
                    report.arguments,
                    report.agent,
                    report.saved_by,
                    report.at_us,
                    report.last_call
                ],
            )
            .map_err(StoreError::sql("save a report"))?;
            Ok(())
        })
        .await
    }

    pub async fn reports(&self) -> Result<Vec<Report>> {
        self.read(|conn| {
            conn.query_map(
                &format!("SELECT {REPORT_COLUMNS} FROM reports ORDER BY name"),
                &[],
                report_row,
            )
            .map_err(StoreError::sql("read reports"))
        })
        .await
    }

    pub async fn remove_report(&self, name: String) -> Result<bool> {
        self.write(move |conn| {
            let n = conn
                .execute("DELETE FROM reports WHERE name = ?", args![name])
                .map_err(StoreError::sql("remove a report"))?;
            Ok(n > 0)
        })
        .await
    }

    pub async fn report_ran(&self, name: String, call_id: String) -> Result<()> {
        self.write(move |conn| {
            conn.execute(
                "UPDATE reports SET last_call = ? WHERE name = ?",
                args![call_id, name],
            )
            .map_err(StoreError::sql("record a report's run"))?;
            Ok(())
        })
        .await
    }

    pub async fn prune_datasets(&self, before_us: i64, keep: usize) -> Result<usize> {
        self.write(move |conn| {
            let context = "prune data sets";
            let old = conn
                .execute("DELETE FROM datasets WHERE at_us < ?", args![before_us])
                .map_err(StoreError::sql(context))?;
            let over = conn
                .execute(
                    "DELETE FROM datasets WHERE call_id NOT IN
                       (SELECT call_id FROM datasets ORDER BY at_us DESC LIMIT ?)",
                    args![keep as i64],
                )
                .map_err(StoreError::sql(context))?;
            Ok((old + over) as usize)
        })
        .await
    }
}
