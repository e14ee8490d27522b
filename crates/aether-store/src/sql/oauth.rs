//! Aether's own authorization server's records: registered clients, authorization codes,
//! grants and their refresh tokens. Codes and refresh tokens are kept by their SHA-256 only,
//! and each is used once, inside one transaction, so two replicas cannot both redeem one.

use super::SqlStore;
use super::governance::immediate;
use crate::db::{DbResult, Optional, Row, SqlExt, args};
use crate::{OAuthClient, OAuthCode, OAuthGrant, Redeemed, Refreshed, Result, StoreError};

/// A grant's columns, in [`grant_row`]'s order (each prefixed `g.` where a query joins).
const GRANT_COLUMNS: &str =
    "g.grant_id, g.client_id, g.account, g.scope, g.resource, g.created_us, g.expires_us";

fn grant_row(r: &Row) -> DbResult<OAuthGrant> {
    Ok(OAuthGrant {
        grant_id: r.get(0)?,
        client_id: r.get(1)?,
        account: r.get(2)?,
        scope: r.get(3)?,
        resource: r.get(4)?,
        created_us: r.get(5)?,
        expires_us: r.get(6)?,
    })
}

impl SqlStore {
    pub async fn oauth_register_client(&self, client: OAuthClient) -> Result<()> {
        self.write(move |conn| {
            conn.execute(
                "INSERT INTO oauth_clients (client_id, name, redirect_uris, created_us) VALUES (?, ?, ?, ?)",
                args![
                    client.client_id,
                    client.name,
                    serde_json::to_string(&client.redirect_uris).unwrap_or_default(),
                    client.created_us
                ],
            )
            .map_err(StoreError::sql("register an OAuth client"))?;
            Ok(())
        })
        .await
    }

    pub async fn oauth_client(&self, client_id: String) -> Result<Option<OAuthClient>> {
        self.read(move |conn| {
            conn.query_row(
                "SELECT client_id, name, redirect_uris, created_us FROM oauth_clients WHERE client_id = ?",
                args![client_id],
                |r| {
                    let uris: String = r.get(2)?;
                    Ok(OAuthClient {
                        client_id: r.get(0)?,
                        name: r.get(1)?,
                        redirect_uris: serde_json::from_str(&uris).unwrap_or_default(),
                        created_us: r.get(3)?,
                    })
                },
            )
            .optional()
            .map_err(StoreError::sql("read an OAuth client"))
        })
        .await
    }

    /// Keeps an authorization code (by its hash); codes expired for a day are let go.
    pub async fn oauth_put_code(&self, code_hash: String, code: OAuthCode) -> Result<()> {
        self.write(move |conn| {
            let context = "keep an authorization code";
            conn.execute(
                "INSERT INTO oauth_codes (code_hash, client_id, redirect_uri, account, scope, resource,
                     challenge, expires_us, grant_id) VALUES (?, ?, ?, ?, ?, ?, ?, ?, NULL)",
                args![
                    code_hash,
                    code.client_id,
                    code.redirect_uri,
                    code.account,
                    code.scope,
                    code.resource,
                    code.challenge,
                    code.expires_us
                ],
            )
            .map_err(StoreError::sql(context))?;
            conn.execute(
                "DELETE FROM oauth_codes WHERE expires_us < ?",
                args![crate::now_us() - 86_400_000_000],
            )
            .map_err(StoreError::sql(context))?;
            Ok(())
        })
        .await
    }

    /// Redeems a code once: the first redemption starts `grant` with its first refresh token;
    /// a second one revokes the grant the first started (RFC 6749 §4.1.2: a code used twice
    /// may have been stolen).
    pub async fn oauth_redeem_code(
        &self,
        code_hash: String,
        grant_id: String,
        expires_us: i64,
        refresh_hash: String,
    ) -> Result<Redeemed> {
        self.write(move |conn| {
            let context = "redeem an authorization code";
            let mut tx = immediate(conn, context)?;
            let found: Option<(OAuthCode, Option<String>)> = tx
                .query_row(
                    "SELECT client_id, redirect_uri, account, scope, resource, challenge, expires_us, grant_id
                     FROM oauth_codes WHERE code_hash = ?",
                    args![code_hash],
                    |r| {
                        Ok((
                            OAuthCode {
                                client_id: r.get(0)?,
                                redirect_uri: r.get(1)?,
                                account: r.get(2)?,
                                scope: r.get(3)?,
                                resource: r.get(4)?,
                                challenge: r.get(5)?,
                                expires_us: r.get(6)?,
                            },
                            r.get(7)?,
                        ))
                    },
                )
                .optional()
                .map_err(StoreError::sql(context))?;
            let outcome = match found {
                None => Redeemed::Unknown,
                Some((_, Some(first))) => {
                    revoke(&mut *tx, &first).map_err(StoreError::sql(context))?;
                    Redeemed::Reused
                }
                Some((code, None)) => {
                    tx.execute(
                        "UPDATE oauth_codes SET grant_id = ? WHERE code_hash = ?",
                        args![grant_id, code_hash],
                    )
                    .map_err(StoreError::sql(context))?;
                    tx.execute(
                        "INSERT INTO oauth_grants (grant_id, client_id, account, scope, resource, created_us,
                             expires_us, revoked_us) VALUES (?, ?, ?, ?, ?, ?, ?, NULL)",
                        args![
                            grant_id,
                            code.client_id,
                            code.account,
                            code.scope,
                            code.resource,
                            crate::now_us(),
                            expires_us
                        ],
                    )
                    .map_err(StoreError::sql(context))?;
                    tx.execute(
                        "INSERT INTO oauth_refresh (token_hash, grant_id, expires_us, used_us) VALUES (?, ?, ?, NULL)",
                        args![refresh_hash, grant_id, expires_us],
                    )
                    .map_err(StoreError::sql(context))?;
                    Redeemed::Started(code)
                }
            };
            tx.commit().map_err(StoreError::sql(context))?;
            Ok(outcome)
        })
        .await
    }

    /// Uses a refresh token once: its grant gets `next_hash` as its new refresh token. A used
    /// token presented again revokes its grant (someone holds a copy).
    pub async fn oauth_refresh(
        &self,
        token_hash: String,
        next_hash: String,
        next_expires_us: i64,
    ) -> Result<Refreshed> {
        self.write(move |conn| {
            let context = "use a refresh token";
            let now = crate::now_us();
            let mut tx = immediate(conn, context)?;
            let found: Option<(String, i64, Option<i64>)> = tx
                .query_row(
                    "SELECT grant_id, expires_us, used_us FROM oauth_refresh WHERE token_hash = ?",
                    args![token_hash],
                    |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
                )
                .optional()
                .map_err(StoreError::sql(context))?;
            let outcome = match found {
                None => Refreshed::Unknown,
                Some((grant_id, _, Some(_))) => {
                    revoke(&mut *tx, &grant_id).map_err(StoreError::sql(context))?;
                    Refreshed::Reused
                }
                Some((_, expires, None)) if expires <= now => Refreshed::Expired,
                Some((grant_id, _, None)) => {
                    match live_grant(&mut *tx, &grant_id, now).map_err(StoreError::sql(context))? {
                        None => Refreshed::Revoked,
                        Some(grant) => {
                            tx.execute(
                                "UPDATE oauth_refresh SET used_us = ? WHERE token_hash = ?",
                                args![now, token_hash],
                            )
                            .map_err(StoreError::sql(context))?;
                            tx.execute(
                                "INSERT INTO oauth_refresh (token_hash, grant_id, expires_us, used_us)
                                 VALUES (?, ?, ?, NULL)",
                                args![next_hash, grant_id, next_expires_us.min(grant.expires_us)],
                            )
                            .map_err(StoreError::sql(context))?;
                            Refreshed::Rotated(grant)
                        }
                    }
                }
            };
            tx.commit().map_err(StoreError::sql(context))?;
            Ok(outcome)
        })
        .await
    }

    /// Revokes the grant a refresh token belongs to; whether the token was known.
    pub async fn oauth_revoke_refresh(&self, token_hash: String) -> Result<bool> {
        self.write(move |conn| {
            let context = "revoke a refresh token";
            let mut tx = immediate(conn, context)?;
            let grant: Option<String> = tx
                .query_row(
                    "SELECT grant_id FROM oauth_refresh WHERE token_hash = ?",
                    args![token_hash],
                    |r| r.get(0),
                )
                .optional()
                .map_err(StoreError::sql(context))?;
            if let Some(grant) = &grant {
                revoke(&mut *tx, grant).map_err(StoreError::sql(context))?;
            }
            tx.commit().map_err(StoreError::sql(context))?;
            Ok(grant.is_some())
        })
        .await
    }

    /// The grants given (of `account`, if named), newest first, at most 1,000, with when each
    /// was revoked.
    pub async fn oauth_grants(
        &self,
        account: Option<String>,
    ) -> Result<Vec<(OAuthGrant, Option<i64>)>> {
        self.read(move |conn| {
            let select = format!("SELECT {GRANT_COLUMNS}, g.revoked_us FROM oauth_grants g");
            let row = |r: &Row| Ok((grant_row(r)?, r.get(7)?));
            match account {
                Some(account) => conn.query_map(
                    &format!("{select} WHERE g.account = ? ORDER BY g.created_us DESC LIMIT 1000"),
                    args![account],
                    row,
                ),
                None => conn.query_map(
                    &format!("{select} ORDER BY g.created_us DESC LIMIT 1000"),
                    args![],
                    row,
                ),
            }
            .map_err(StoreError::sql("read OAuth grants"))
        })
        .await
    }

    /// Revokes every grant `account` gave; how many were live.
    pub async fn oauth_revoke_account(&self, account: String) -> Result<u64> {
        self.write(move |conn| {
            conn.execute(
                "UPDATE oauth_grants SET revoked_us = ? WHERE account = ? AND revoked_us IS NULL",
                args![crate::now_us(), account],
            )
            .map_err(StoreError::sql("revoke an account's OAuth grants"))
        })
        .await
    }

    pub async fn oauth_revoke_grant(&self, grant_id: String) -> Result<()> {
        self.write(move |conn| {
            revoke(conn, &grant_id).map_err(StoreError::sql("revoke an OAuth grant"))?;
            Ok(())
        })
        .await
    }

    /// The grant, if it is neither revoked nor expired.
    pub async fn oauth_live_grant(&self, grant_id: String) -> Result<Option<OAuthGrant>> {
        self.read(move |conn| {
            live_grant(conn, &grant_id, crate::now_us())
                .map_err(StoreError::sql("read an OAuth grant"))
        })
        .await
    }
}

fn revoke(conn: &mut dyn crate::db::Sql, grant_id: &str) -> crate::db::DbResult<u64> {
    conn.execute(
        "UPDATE oauth_grants SET revoked_us = ? WHERE grant_id = ? AND revoked_us IS NULL",
        args![crate::now_us(), grant_id],
    )
}

fn live_grant(
    conn: &mut dyn crate::db::Sql,
    grant_id: &str,
    now: i64,
) -> crate::db::DbResult<Option<OAuthGrant>> {
    // The account must still exist, unchanged since the grant: a password reset, a role change
    // or a removal ends the grants its person gave, as it ends their console sessions.
    conn.query_row(
        &format!(
            "SELECT {GRANT_COLUMNS} FROM oauth_grants g JOIN accounts a ON a.name = g.account
             WHERE g.grant_id = ? AND g.revoked_us IS NULL AND g.expires_us > ?
               AND g.created_us >= a.changed_us"
        ),
        args![grant_id, now],
        grant_row,
    )
    .optional()
}
