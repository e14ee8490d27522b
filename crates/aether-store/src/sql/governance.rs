//! The registry's changes, calls waiting for a person, bearer tokens and the revision counters.
//!
//! Every change here is one write transaction (under the store's write lock) that also bumps
//! its kind's counter in `revisions`, so another process sharing the store sees it with one
//! read of that table.

use super::SqlStore;
use crate::db::{Conn, DbResult, Optional, Row, Sql, SqlExt, Tx, args};
use aether_vocab::RegistryState;

use crate::{
    ApprovalRequest, ApprovalRow, ApprovalState, AuditEvent, RegistryAction, RegistryChange,
    RegistryHistoryRow, RegistryRow, Result, Revisions, StoreError, TokenKind, TokenRow, now_us,
};

const REGISTRY_COLUMNS: &str = "name, state, approved_digest, definition, origin, updated_at_us, \
     updated_by, why, seen_digest, approved_definition";

pub(super) fn registry_row(r: &Row) -> DbResult<RegistryRow> {
    Ok(RegistryRow {
        name: r.get(0)?,
        // A state this build does not know is the least: offered to nobody.
        state: RegistryState::parse(&r.get::<String>(1)?).unwrap_or(RegistryState::Unapproved),
        approved_digest: r.get(2)?,
        definition: r.get(3)?,
        origin: r.get(4)?,
        updated_at_us: r.get(5)?,
        updated_by: r.get(6)?,
        why: r.get(7)?,
        seen_digest: r.get(8)?,
        approved_definition: r.get(9)?,
    })
}

pub(super) fn bump(tx: &mut dyn Sql, what: &str) -> DbResult<()> {
    tx.execute("UPDATE revisions SET n = n + 1 WHERE what = ?", args![what])?;
    Ok(())
}

/// The end of an operator's change: its kind's counter bumped and its audit row appended, in
/// the change's own transaction.
pub(super) fn changed(
    tx: &mut dyn Sql,
    ledger: &super::Ledger,
    what: &str,
    audit: Option<&AuditEvent>,
) -> DbResult<()> {
    bump(&mut *tx, what)?;
    super::append_audit(tx, ledger, &audit.into_iter().collect::<Vec<_>>())?;
    Ok(())
}

pub(super) fn immediate<'c>(
    conn: &'c mut dyn Conn,
    context: &'static str,
) -> Result<Box<dyn Tx + 'c>> {
    conn.begin().map_err(StoreError::sql(context))
}

fn invalid(message: impl Into<String>) -> StoreError {
    StoreError::Invalid(message.into())
}

fn history(
    tx: &mut dyn Sql,
    row: &RegistryRow,
    from_state: Option<RegistryState>,
    by: &str,
    why: &str,
    undoes: Option<i64>,
) -> DbResult<i64> {
    tx.query_row(
        "INSERT INTO registry_history (at_us, name, from_state, to_state, digest, by, why,
             approved_definition, undoes)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
         RETURNING id",
        args![
            row.updated_at_us,
            row.name,
            from_state.map(RegistryState::as_str),
            row.state.as_str(),
            row.approved_digest,
            by,
            why,
            row.approved_definition,
            undoes
        ],
        |r| r.get(0),
    )
}

impl SqlStore {
    pub async fn registry_change(
        &self,
        change: RegistryChange,
        audit: Option<AuditEvent>,
    ) -> Result<RegistryRow> {
        let ledger = self.inner.ledger.clone();
        self.write(move |conn| {
            let context = "change the registry";
            let mut tx = immediate(conn, context)?;
            let current = tx
                .query_row(
                    &format!("SELECT {REGISTRY_COLUMNS} FROM registry WHERE name = ?"),
                    args![change.name],
                    registry_row,
                )
                .optional()
                .map_err(StoreError::sql(context))?
                .ok_or_else(|| {
                    invalid(format!(
                        "the registry has no tool named {:?} (a tool is recorded when a server first offers it)",
                        change.name
                    ))
                })?;
            let mut next = current.clone();
            next.updated_at_us = now_us();
            next.updated_by = change.by.clone();
            next.why = change.why.clone();
            let mut undoes = None;
            match &change.action {
                RegistryAction::Approve { digest } => {
                    let Some(seen) = current.seen_digest.clone() else {
                        return Err(invalid(format!(
                            "{:?} has no recorded definition to approve",
                            change.name
                        )));
                    };
                    if let Some(d) = digest
                        && *d != seen
                    {
                        return Err(invalid(format!(
                            "{:?}'s definition is now {seen}, not the {d} you reviewed; \
                             look at it again (`aether registry show {}`) before approving",
                            change.name, change.name
                        )));
                    }
                    if current.state == RegistryState::Approved
                        && current.approved_digest.as_deref() == Some(&seen)
                    {
                        return Err(invalid(format!(
                            "{:?} is already approved with definition {seen}; nothing changed",
                            change.name
                        )));
                    }
                    next.state = RegistryState::Approved;
                    next.approved_digest = Some(seen);
                    next.approved_definition = Some(current.definition.clone());
                }
                RegistryAction::Withdraw => {
                    if current.state == RegistryState::Withdrawn {
                        return Err(invalid(format!(
                            "{:?} is already withdrawn; nothing changed",
                            change.name
                        )));
                    }
                    next.state = RegistryState::Withdrawn;
                }
                RegistryAction::Undo => {
                    // The newest change that is not itself undone, and the state before it.
                    let rows = tx
                        .query_map(
                            "SELECT id, to_state, digest, approved_definition, undoes
                             FROM registry_history WHERE name = ? ORDER BY id DESC",
                            args![change.name],
                            |r| {
                                Ok((
                                    r.get::<i64>(0)?,
                                    r.get::<String>(1)?,
                                    r.get::<Option<String>>(2)?,
                                    r.get::<Option<String>>(3)?,
                                    r.get::<Option<i64>>(4)?,
                                ))
                            },
                        )
                        .map_err(StoreError::sql(context))?;
                    // Skip undo rows and the changes they undid, newest first.
                    let mut undone = std::collections::HashSet::new();
                    for (id, .., undid) in &rows {
                        if let Some(undid) = undid {
                            undone.insert(*undid);
                            undone.insert(*id);
                        }
                    }
                    let live: Vec<_> = rows
                        .iter()
                        .filter(|(id, ..)| !undone.contains(id))
                        .collect();
                    let Some(last) = live.first() else {
                        return Err(invalid(format!(
                            "{:?} has no change left to undo",
                            change.name
                        )));
                    };
                    if live.len() < 2 {
                        return Err(invalid(format!(
                            "{:?}'s only change is its first record; there is no earlier state to go back to",
                            change.name
                        )));
                    }
                    let before = live[1];
                    next.state =
                        RegistryState::parse(&before.1).unwrap_or(RegistryState::Unapproved);
                    next.approved_digest = before.2.clone();
                    next.approved_definition = before.3.clone();
                    undoes = Some(last.0);
                }
            }
            tx.execute(
                "UPDATE registry SET state = ?, approved_digest = ?, approved_definition = ?,
                     updated_at_us = ?, updated_by = ?, why = ?
                 WHERE name = ?",
                args![
                    next.state.as_str(),
                    next.approved_digest,
                    next.approved_definition,
                    next.updated_at_us,
                    next.updated_by,
                    next.why,
                    next.name
                ],
            )
            .map_err(StoreError::sql(context))?;
            history(&mut *tx, &next, Some(current.state), &change.by, &change.why, undoes)
                .map_err(StoreError::sql(context))?;
            changed(&mut *tx, &ledger, "registry", audit.as_ref()).map_err(StoreError::sql(context))?;
            tx.commit().map_err(StoreError::sql(context))?;
            Ok(next)
        })
        .await
    }

    pub async fn record_seen(
        &self,
        seen: Vec<crate::BuiltinDefinition>,
        origin: String,
    ) -> Result<()> {
        self.write(move |conn| {
            let context = "record seen tools";
            let mut tx = immediate(conn, context)?;
            let now = now_us();
            let mut changed = false;
            for t in seen {
                let known: Option<Option<String>> = tx
                    .query_row("SELECT seen_digest FROM registry WHERE name = ?", args![t.name], |r| r.get(0))
                    .optional()
                    .map_err(StoreError::sql(context))?;
                match known {
                    Some(digest) if digest.as_deref() == Some(&t.digest) => continue,
                    Some(_) => {
                        tx.execute(
                            "UPDATE registry SET seen_digest = ?, definition = ? WHERE name = ?",
                            args![t.digest, t.definition, t.name],
                        )
                        .map_err(StoreError::sql(context))?;
                    }
                    None => {
                        let row = RegistryRow {
                            name: t.name.clone(),
                            state: RegistryState::Unapproved,
                            approved_digest: None,
                            definition: t.definition.clone(),
                            origin: origin.clone(),
                            updated_at_us: now,
                            updated_by: "aether".into(),
                            why: "first seen; waiting for an operator's approval".into(),
                            seen_digest: Some(t.digest.clone()),
                            approved_definition: None,
                        };
                        tx.execute(
                            &format!("INSERT INTO registry ({REGISTRY_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"),
                            args![
                                row.name,
                                row.state.as_str(),
                                row.approved_digest,
                                row.definition,
                                row.origin,
                                row.updated_at_us,
                                row.updated_by,
                                row.why,
                                row.seen_digest,
                                row.approved_definition
                            ],
                        )
                        .map_err(StoreError::sql(context))?;
                        history(&mut *tx, &row, None, "aether", &row.why, None).map_err(StoreError::sql(context))?;
                    }
                }
                changed = true;
            }
            if changed {
                bump(&mut *tx, "registry").map_err(StoreError::sql(context))?;
            }
            tx.commit().map_err(StoreError::sql(context))?;
            Ok(())
        })
        .await
    }

    pub async fn registry_history(&self, name: Option<String>) -> Result<Vec<RegistryHistoryRow>> {
        self.read(move |conn| {
            let context = "read registry history";
            conn.query_map(
                "SELECT id, at_us, name, from_state, to_state, digest, by, why, undoes
                 FROM registry_history WHERE CAST(?1 AS TEXT) IS NULL OR name = ?1 ORDER BY id",
                args![name],
                |r| {
                    Ok(RegistryHistoryRow {
                        id: r.get(0)?,
                        at_us: r.get(1)?,
                        name: r.get(2)?,
                        from_state: r.get(3)?,
                        to_state: r.get(4)?,
                        digest: r.get(5)?,
                        by: r.get(6)?,
                        why: r.get(7)?,
                        undoes: r.get(8)?,
                    })
                },
            )
            .map_err(StoreError::sql(context))
        })
        .await
    }

    pub async fn revisions(&self) -> Result<Revisions> {
        self.read(|conn| {
            conn.query_row(
                "SELECT (SELECT halted FROM halt WHERE id = 1),
                        (SELECT n FROM revisions WHERE what = 'registry'),
                        (SELECT n FROM revisions WHERE what = 'approvals'),
                        (SELECT n FROM revisions WHERE what = 'tokens'),
                        (SELECT coalesce(max(generation), 0) FROM seals),
                        (SELECT n FROM revisions WHERE what = 'sources'),
                        (SELECT n FROM revisions WHERE what = 'accounts')",
                &[],
                |r| {
                    Ok(Revisions {
                        halted: r.get(0)?,
                        registry: r.get(1)?,
                        approvals: r.get(2)?,
                        tokens: r.get(3)?,
                        seals: r.get(4)?,
                        sources: r.get(5)?,
                        accounts: r.get(6)?,
                    })
                },
            )
            .map_err(StoreError::sql("read revisions"))
        })
        .await
    }

    pub async fn request_approval(
        &self,
        request: ApprovalRequest,
    ) -> Result<Option<crate::HaltState>> {
        self.write(move |conn| {
            let context = "record an approval request";
            let mut tx = immediate(conn, context)?;
            let halt = super::query_halt(&mut *tx).map_err(StoreError::sql(context))?;
            if halt.halted {
                return Ok(Some(halt));
            }
            let r = &request;
            tx.execute(
                "INSERT INTO approvals (id, requested_at_us, expires_at_us, session, transport, agent,
                     team, project, tool, tier, definition, arguments, arguments_digest, asked_by,
                     reason, state)
                 VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 'pending')",
                args![
                    r.id,
                    r.requested_at_us,
                    r.expires_at_us,
                    r.session,
                    r.transport,
                    r.agent,
                    r.team,
                    r.project,
                    r.tool,
                    r.tier,
                    r.definition,
                    r.arguments,
                    r.arguments_digest,
                    r.asked_by,
                    r.reason
                ],
            )
            .map_err(StoreError::sql(context))?;
            bump(&mut *tx, "approvals").map_err(StoreError::sql(context))?;
            tx.commit().map_err(StoreError::sql(context))?;
            Ok(None)
        })
        .await
    }

    /// Moves a pending approval to `to`. A person's decision (`Approved`, `Denied`) is refused
    /// with a clear error when the call is no longer waiting; the pipeline's own settling
    /// (`Expired`, `Cancelled`) returns the row as it stands either way.
    pub async fn settle_approval(
        &self,
        id: String,
        to: ApprovalState,
        by: String,
        why: String,
        audit: Option<AuditEvent>,
    ) -> Result<ApprovalRow> {
        let ledger = self.inner.ledger.clone();
        self.write(move |conn| {
            let context = "settle an approval";
            let mut tx = immediate(conn, context)?;
            let now = now_us();
            let current = approval_in(&mut *tx, &id)
                .map_err(StoreError::sql(context))?
                .ok_or_else(|| invalid(format!("no call waiting for approval has id {id:?}")))?;
            let by_person = matches!(to, ApprovalState::Approved | ApprovalState::Denied);
            if current.state != ApprovalState::Pending {
                if by_person {
                    return Err(invalid(format!(
                        "call {id} is no longer waiting: it was {} {}",
                        current.state.as_str(),
                        current
                            .decided_by
                            .as_deref()
                            .map(|b| format!("by {b}"))
                            .unwrap_or_default()
                    )));
                }
                return Ok(current);
            }
            if by_person && current.request.expires_at_us <= now {
                return Err(invalid(format!(
                    "call {id} is no longer waiting: its approval window closed (it is denied)"
                )));
            }
            tx.execute(
                "UPDATE approvals SET state = ?, decided_at_us = ?, decided_by = ?, why = ?
                 WHERE id = ? AND state = 'pending'",
                args![to.as_str(), now, by, why, id],
            )
            .map_err(StoreError::sql(context))?;
            changed(&mut *tx, &ledger, "approvals", audit.as_ref())
                .map_err(StoreError::sql(context))?;
            let row = approval_in(&mut *tx, &id)
                .map_err(StoreError::sql(context))?
                .ok_or_else(|| invalid(format!("approval {id} vanished")))?;
            tx.commit().map_err(StoreError::sql(context))?;
            Ok(row)
        })
        .await
    }

    pub async fn approval(&self, id: String) -> Result<Option<ApprovalRow>> {
        self.read(move |conn| approval_in(conn, &id).map_err(StoreError::sql("read an approval")))
            .await
    }

    /// Approvals, newest first; only the pending ones (past their window or not) with `pending`.
    pub async fn approvals(&self, pending: bool, limit: usize) -> Result<Vec<ApprovalRow>> {
        self.read(move |conn| {
            let context = "read approvals";
            conn.query_map(
                &format!(
                    "SELECT {APPROVAL_COLUMNS} FROM approvals
                     WHERE (?1 = 0 OR state = 'pending') ORDER BY requested_at_us DESC LIMIT ?2"
                ),
                args![pending, limit as i64],
                approval_row,
            )
            .map_err(StoreError::sql(context))
        })
        .await
    }

    /// Marks as expired every pending approval whose window closed before `now_us` (a process
    /// that stopped while a call waited leaves its request pending). Returns how many.
    pub async fn expire_approvals(&self, now_us: i64) -> Result<usize> {
        self.write(move |conn| {
            let context = "expire approvals";
            let mut tx = immediate(conn, context)?;
            let n = tx
                .execute(
                    "UPDATE approvals SET state = 'expired', decided_at_us = ?1, decided_by = 'aether',
                         why = 'nobody decided within the approval window'
                     WHERE state = 'pending' AND expires_at_us <= ?1",
                    args![now_us],
                )
                .map_err(StoreError::sql(context))?;
            if n > 0 {
                bump(&mut *tx, "approvals").map_err(StoreError::sql(context))?;
            }
            tx.commit().map_err(StoreError::sql(context))?;
            Ok(usize::try_from(n).unwrap_or(usize::MAX))
        })
        .await
    }

    pub async fn create_token(
        &self,
        row: TokenRow,
        hash: String,
        audit: Option<AuditEvent>,
    ) -> Result<TokenRow> {
        let ledger = self.inner.ledger.clone();
        self.write(move |conn| {
            let context = "create a token";
            let mut tx = immediate(conn, context)?;
            tx.execute(
                "INSERT INTO tokens (id, kind, subject, hash, label, created_at_us, created_by)
                 VALUES (?, ?, ?, ?, ?, ?, ?)",
                args![
                    row.id,
                    row.kind.as_str(),
                    row.subject,
                    hash,
                    row.label,
                    row.created_at_us,
                    row.created_by
                ],
            )
            .map_err(StoreError::sql(context))?;
            changed(&mut *tx, &ledger, "tokens", audit.as_ref())
                .map_err(StoreError::sql(context))?;
            tx.commit().map_err(StoreError::sql(context))?;
            Ok(row)
        })
        .await
    }

    pub async fn revoke_token(
        &self,
        id: String,
        by: String,
        audit: Option<AuditEvent>,
    ) -> Result<TokenRow> {
        let ledger = self.inner.ledger.clone();
        self.write(move |conn| {
            let context = "revoke a token";
            let mut tx = immediate(conn, context)?;
            let n = tx
                .execute(
                    "UPDATE tokens SET revoked_at_us = ?, revoked_by = ? WHERE id = ? AND revoked_at_us IS NULL",
                    args![now_us(), by, id],
                )
                .map_err(StoreError::sql(context))?;
            let row = tokens_in(&mut *tx, Some(&id))
                .map_err(StoreError::sql(context))?
                .into_iter()
                .next()
                .map(|(row, _)| row)
                .ok_or_else(|| invalid(format!("no token has id {id:?}")))?;
            if n == 0 {
                return Err(invalid(format!("token {id} was already revoked")));
            }
            changed(&mut *tx, &ledger, "tokens", audit.as_ref()).map_err(StoreError::sql(context))?;
            tx.commit().map_err(StoreError::sql(context))?;
            Ok(row)
        })
        .await
    }

    /// Every token with its hash (revoked ones included; see `revoked_at_us`).
    pub async fn tokens(&self) -> Result<Vec<(TokenRow, String)>> {
        self.read(|conn| tokens_in(conn, None).map_err(StoreError::sql("read tokens")))
            .await
    }
}

fn tokens_in(conn: &mut dyn Sql, id: Option<&str>) -> DbResult<Vec<(TokenRow, String)>> {
    conn.query_map(
        "SELECT id, kind, subject, label, created_at_us, created_by, revoked_at_us, revoked_by, hash
         FROM tokens WHERE CAST(?1 AS TEXT) IS NULL OR id = ?1 ORDER BY created_at_us",
        args![id],
        |r| {
            let kind: String = r.get(1)?;
            Ok((
                TokenRow {
                    id: r.get(0)?,
                    kind: TokenKind::parse(&kind).unwrap_or(TokenKind::Agent),
                    subject: r.get(2)?,
                    label: r.get(3)?,
                    created_at_us: r.get(4)?,
                    created_by: r.get(5)?,
                    revoked_at_us: r.get(6)?,
                    revoked_by: r.get(7)?,
                },
                r.get(8)?,
            ))
        },
    )
}

const APPROVAL_COLUMNS: &str = "id, requested_at_us, expires_at_us, session, transport, agent, team, \
     project, tool, tier, definition, arguments, arguments_digest, asked_by, reason, state, \
     decided_at_us, decided_by, why";

fn approval_row(r: &Row) -> DbResult<ApprovalRow> {
    let state: String = r.get(15)?;
    Ok(ApprovalRow {
        request: ApprovalRequest {
            id: r.get(0)?,
            requested_at_us: r.get(1)?,
            expires_at_us: r.get(2)?,
            session: r.get(3)?,
            transport: r.get(4)?,
            agent: r.get(5)?,
            team: r.get(6)?,
            project: r.get(7)?,
            tool: r.get(8)?,
            tier: r.get(9)?,
            definition: r.get(10)?,
            arguments: r.get(11)?,
            arguments_digest: r.get(12)?,
            asked_by: r.get(13)?,
            reason: r.get(14)?,
        },
        state: ApprovalState::parse(&state).unwrap_or(ApprovalState::Denied),
        decided_at_us: r.get(16)?,
        decided_by: r.get(17)?,
        why: r.get(18)?,
    })
}

fn approval_in(conn: &mut dyn Sql, id: &str) -> DbResult<Option<ApprovalRow>> {
    conn.query_row(
        &format!("SELECT {APPROVAL_COLUMNS} FROM approvals WHERE id = ?"),
        args![id],
        approval_row,
    )
    .optional()
}
