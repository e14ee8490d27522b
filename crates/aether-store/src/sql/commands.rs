//! The command log.

use super::SqlStore;
use crate::db::{SqlExt, Value, args, bind};
use crate::{CommandEnd, CommandQuery, CommandRecord, CommandStart, Result, StoreError};

impl SqlStore {
    pub async fn command_started(&self, start: CommandStart) -> Result<i64> {
        self.write(move |conn| {
            conn.query_row(
                "INSERT INTO command_log (at_us, call_id, session, agent, tool, root, cwd, command, sandbox)
                 VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
                 RETURNING id",
                args![
                    start.at_us,
                    start.call_id,
                    start.session,
                    start.agent,
                    start.tool,
                    start.root,
                    start.cwd,
                    start.command,
                    start.sandbox,
                ],
                |r| r.get(0),
            )
            .map_err(StoreError::sql("write command log"))
        })
        .await
    }

    pub async fn command_ended(&self, id: i64, end: CommandEnd) -> Result<()> {
        self.write(move |conn| {
            let n = conn
                .execute(
                    "UPDATE command_log SET ended_at_us = ?, exit_code = ?, timed_out = ?
                     WHERE id = ? AND ended_at_us IS NULL",
                    args![end.at_us, end.exit_code, end.timed_out, id],
                )
                .map_err(StoreError::sql("write command log"))?;
            if n != 1 {
                return Err(StoreError::Invalid(format!(
                    "command log row {id} is not a running command"
                )));
            }
            Ok(())
        })
        .await
    }

    pub async fn commands(&self, q: CommandQuery) -> Result<Vec<CommandRecord>> {
        self.read(move |conn| {
            let mut sql = String::from(
                "SELECT id, at_us, call_id, session, agent, tool, root, cwd, command, sandbox,
                        ended_at_us, exit_code, timed_out
                 FROM command_log WHERE 1=1",
            );
            let mut args: Vec<Value> = Vec::new();
            for (column, value) in [("agent", &q.agent), ("call_id", &q.call_id)] {
                if let Some(v) = value {
                    sql.push_str(&format!(" AND {column} = ?"));
                    args.push(Value::from(v.clone()));
                }
            }
            sql.push_str(&format!(
                " ORDER BY id DESC LIMIT {}",
                q.limit.clamp(1, 100_000)
            ));
            conn.query_map(&sql, &bind(&args), |r| {
                let ended: Option<i64> = r.get(10)?;
                Ok(CommandRecord {
                    id: r.get(0)?,
                    start: CommandStart {
                        at_us: r.get(1)?,
                        call_id: r.get(2)?,
                        session: r.get(3)?,
                        agent: r.get(4)?,
                        tool: r.get(5)?,
                        root: r.get(6)?,
                        cwd: r.get(7)?,
                        command: r.get(8)?,
                        sandbox: r.get(9)?,
                    },
                    end: match ended {
                        Some(at_us) => Some(CommandEnd {
                            at_us,
                            exit_code: r.get(11)?,
                            timed_out: r.get(12)?,
                        }),
                        None => None,
                    },
                })
            })
            .map_err(StoreError::sql("read command log"))
        })
        .await
    }
}
