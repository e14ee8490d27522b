//! The console's accounts, sessions and setup links. Account changes bump the `accounts`
//! counter and carry their audit row in the same transaction.

use super::SqlStore;
use super::governance::{changed, immediate};
use crate::db::{DbResult, Optional, Row, SqlExt, args};
use crate::{Account, AuditEvent, ConsoleSession, Result, StoreError};

const ACCOUNT_COLUMNS: &str = "name, password_hash, role, created_us, created_by, changed_us";

fn account_row(r: &Row) -> DbResult<Account> {
    Ok(Account {
        name: r.get(0)?,
        password_hash: r.get(1)?,
        role: r.get(2)?,
        created_us: r.get(3)?,
        created_by: r.get(4)?,
        changed_us: r.get(5)?,
    })
}

impl SqlStore {
    pub async fn accounts(&self) -> Result<Vec<Account>> {
        self.read(|conn| {
            conn.query_map(
                &format!("SELECT {ACCOUNT_COLUMNS} FROM accounts ORDER BY name"),
                &[],
                account_row,
            )
            .map_err(StoreError::sql("read accounts"))
        })
        .await
    }

    pub async fn account(&self, name: String) -> Result<Option<Account>> {
        self.read(move |conn| {
            conn.query_row(
                &format!("SELECT {ACCOUNT_COLUMNS} FROM accounts WHERE name = ?"),
                args![name],
                account_row,
            )
            .optional()
            .map_err(StoreError::sql("read an account"))
        })
        .await
    }

    /// Creates an account; with `setup_token_hash`, only if that setup link is unused and
    /// unexpired and no account exists yet (the link is used up in the same transaction).
    pub async fn create_account(
        &self,
        account: Account,
        setup_token_hash: Option<String>,
        audit: Option<AuditEvent>,
    ) -> Result<()> {
        let ledger = self.inner.ledger.clone();
        self.write(move |conn| {
            let context = "create an account";
            let mut tx = immediate(conn, context)?;
            if let Some(hash) = setup_token_hash {
                let existing: i64 = tx
                    .query_row("SELECT count(*) FROM accounts", &[], |r| r.get(0))
                    .map_err(StoreError::sql(context))?;
                if existing > 0 {
                    return Err(StoreError::Invalid(
                        "the console is already set up: sign in, or ask an admin for an account".into(),
                    ));
                }
                let used = tx
                    .execute(
                        "UPDATE setup_links SET used_us = ? WHERE token_hash = ? AND used_us IS NULL AND expires_us > ?",
                        args![account.created_us, hash, account.created_us],
                    )
                    .map_err(StoreError::sql(context))?;
                if used != 1 {
                    return Err(StoreError::Invalid(
                        "this setup link is unknown, used or expired: make a new one with aether accounts setup-link".into(),
                    ));
                }
            }
            let n = tx
                .execute(
                    &format!("INSERT INTO accounts ({ACCOUNT_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING"),
                    args![
                        account.name,
                        account.password_hash,
                        account.role,
                        account.created_us,
                        account.created_by,
                        account.changed_us
                    ],
                )
                .map_err(StoreError::sql(context))?;
            if n != 1 {
                return Err(StoreError::Invalid(format!(
                    "an account named {:?} already exists",
                    account.name
                )));
            }
            changed(&mut *tx, &ledger, "accounts", audit.as_ref()).map_err(StoreError::sql(context))?;
            tx.commit().map_err(StoreError::sql(context))
        })
        .await
    }

    /// Changes an account's role and/or password hash; a new password ends its sessions.
    pub async fn update_account(
        &self,
        name: String,
        role: Option<String>,
        password_hash: Option<String>,
        audit: Option<AuditEvent>,
    ) -> Result<()> {
        let ledger = self.inner.ledger.clone();
        self.write(move |conn| {
            let context = "change an account";
            let mut tx = immediate(conn, context)?;
            let now = crate::now_us();
            // The last admin keeps the role (checked in the change's own transaction, so two
            // admins demoting each other at once cannot leave none).
            if let Some(role) = &role
                && role != "admin"
            {
                let (is_admin, admins): (bool, i64) = tx
                    .query_row(
                        "SELECT coalesce((SELECT CASE WHEN role = 'admin' THEN 1 ELSE 0 END FROM accounts WHERE name = ?), 0),
                                (SELECT count(*) FROM accounts WHERE role = 'admin')",
                        args![name],
                        |r| Ok((r.get(0)?, r.get(1)?)),
                    )
                    .map_err(StoreError::sql(context))?;
                if is_admin && admins <= 1 {
                    return Err(StoreError::Invalid(
                        "this is the last admin: make another admin first".into(),
                    ));
                }
            }
            let n = tx
                .execute(
                    "UPDATE accounts SET role = coalesce(?, role), password_hash = coalesce(?, password_hash), changed_us = ? WHERE name = ?",
                    args![role, password_hash, now, name],
                )
                .map_err(StoreError::sql(context))?;
            if n != 1 {
                return Err(StoreError::Invalid(format!("no account named {name:?}")));
            }
            if password_hash.is_some() || role.is_some() {
                tx.execute("DELETE FROM console_sessions WHERE account = ?", args![name])
                    .map_err(StoreError::sql(context))?;
            }
            changed(&mut *tx, &ledger, "accounts", audit.as_ref()).map_err(StoreError::sql(context))?;
            tx.commit().map_err(StoreError::sql(context))
        })
        .await
    }

    /// Removes an account and its sessions; refuses to remove the last admin.
    pub async fn remove_account(&self, name: String, audit: Option<AuditEvent>) -> Result<()> {
        let ledger = self.inner.ledger.clone();
        self.write(move |conn| {
            let context = "remove an account";
            let mut tx = immediate(conn, context)?;
            let role: Option<String> = tx
                .query_row(
                    "SELECT role FROM accounts WHERE name = ?",
                    args![name],
                    |r| r.get(0),
                )
                .optional()
                .map_err(StoreError::sql(context))?;
            let Some(role) = role else {
                return Err(StoreError::Invalid(format!("no account named {name:?}")));
            };
            if role == "admin" {
                let admins: i64 = tx
                    .query_row(
                        "SELECT count(*) FROM accounts WHERE role = 'admin'",
                        &[],
                        |r| r.get(0),
                    )
                    .map_err(StoreError::sql(context))?;
                if admins <= 1 {
                    return Err(StoreError::Invalid(
                        "this is the last admin: make another admin first".into(),
                    ));
                }
            }
            tx.execute("DELETE FROM accounts WHERE name = ?", args![name])
                .map_err(StoreError::sql(context))?;
            tx.execute(
                "DELETE FROM console_sessions WHERE account = ?",
                args![name],
            )
            .map_err(StoreError::sql(context))?;
            changed(&mut *tx, &ledger, "accounts", audit.as_ref())
                .map_err(StoreError::sql(context))?;
            tx.commit().map_err(StoreError::sql(context))
        })
        .await
    }

    pub async fn create_console_session(
        &self,
        id_hash: String,
        session: ConsoleSession,
    ) -> Result<()> {
        self.write(move |conn| {
            let context = "start a console session";
            conn.execute(
                "DELETE FROM console_sessions WHERE expires_us < ?",
                args![session.created_us],
            )
            .map_err(StoreError::sql(context))?;
            conn.execute(
                "INSERT INTO console_sessions (id_hash, key_hash, account, created_us, expires_us) VALUES (?, ?, ?, ?, ?)",
                args![id_hash, session.key_hash, session.account, session.created_us, session.expires_us],
            )
            .map_err(StoreError::sql(context))?;
            Ok(())
        })
        .await
    }

    pub async fn console_session(&self, id_hash: String) -> Result<Option<ConsoleSession>> {
        self.read(move |conn| {
            conn.query_row(
                "SELECT account, key_hash, created_us, expires_us FROM console_sessions WHERE id_hash = ?",
                args![id_hash],
                |r| {
                    Ok(ConsoleSession {
                        account: r.get(0)?,
                        key_hash: r.get(1)?,
                        created_us: r.get(2)?,
                        expires_us: r.get(3)?,
                    })
                },
            )
            .optional()
            .map_err(StoreError::sql("read a console session"))
        })
        .await
    }

    pub async fn end_console_session(&self, id_hash: String) -> Result<()> {
        self.write(move |conn| {
            conn.execute(
                "DELETE FROM console_sessions WHERE id_hash = ?",
                args![id_hash],
            )
            .map_err(StoreError::sql("end a console session"))?;
            Ok(())
        })
        .await
    }

    /// Records a new setup link; older unused ones stop working (one link is live at a time).
    pub async fn create_setup_link(&self, token_hash: String, expires_us: i64) -> Result<()> {
        self.write(move |conn| {
            let context = "make a setup link";
            let mut tx = immediate(conn, context)?;
            tx.execute("DELETE FROM setup_links WHERE used_us IS NULL", &[])
                .map_err(StoreError::sql(context))?;
            tx.execute(
                "INSERT INTO setup_links (token_hash, created_us, expires_us) VALUES (?, ?, ?)",
                args![token_hash, crate::now_us(), expires_us],
            )
            .map_err(StoreError::sql(context))?;
            tx.commit().map_err(StoreError::sql(context))
        })
        .await
    }

    pub async fn setup_link_valid(&self, token_hash: String) -> Result<bool> {
        self.read(move |conn| {
            let n: i64 = conn
                .query_row(
                    "SELECT count(*) FROM setup_links WHERE token_hash = ? AND used_us IS NULL AND expires_us > ?
                       AND NOT EXISTS (SELECT 1 FROM accounts)",
                    args![token_hash, crate::now_us()],
                    |r| r.get(0),
                )
                .map_err(StoreError::sql("read setup links"))?;
            Ok(n == 1)
        })
        .await
    }
}
