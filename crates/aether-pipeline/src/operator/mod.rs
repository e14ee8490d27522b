//! What an operator does, from any surface (CLI, admin API): halt and resume, decide a call
//! waiting for a person, change the registry. Each is one store transaction holding the change
//! and its own audit row (agent `operator:BY`): both or neither. Each needs only the store, so
//! the CLI can act on a store that a running server shares; the server notices through the
//! store's revision counters. The same, on a running [`Pipeline`], bring it in step at once;
//! the operator's undo (`undo.rs`) is a receipted and audited call of its own.

mod undo;

use aether_store::{
    ApprovalRow, ApprovalState, HaltState, RegistryAction, RegistryChange, RegistryRow, Store,
    StoreError,
};
use serde_json::json;

use aether_policy::RegistryState;
use aether_policy::definition_screen::ScreenMode;

use crate::audit::operator_event;
use crate::{Pipeline, PipelineError};

fn need_why(why: &str, what: &str) -> Result<(), StoreError> {
    if why.trim().is_empty() {
        return Err(StoreError::Invalid(format!(
            "say why (it is recorded with the {what})"
        )));
    }
    Ok(())
}

/// Records something an operator should see that is not a change (a process that started
/// beside a configuration it does not use, say) as its own audit row.
pub async fn note(
    store: &Store,
    by: &str,
    action: &str,
    detail: serde_json::Value,
) -> Result<i64, StoreError> {
    store.audit(operator_event(by, action, detail)).await
}

/// Halts or resumes; a halt denies every call waiting for a person in the same commit.
pub async fn set_halt(
    store: &Store,
    halted: bool,
    by: &str,
    why: &str,
) -> Result<HaltState, StoreError> {
    need_why(why, "change")?;
    let action = if halted { "halt" } else { "resume" };
    let event = operator_event(by, action, json!({ "why": why }));
    store.set_halt(halted, by, why, Some(event)).await
}

/// Approves or denies a call waiting for a person. A call no longer waiting (decided,
/// expired, cancelled, or unknown) is a clear error and changes nothing.
pub async fn decide(
    store: &Store,
    call_id: &str,
    approve: bool,
    by: &str,
    why: &str,
) -> Result<ApprovalRow, StoreError> {
    need_why(why, "decision")?;
    let (to, action) = if approve {
        (ApprovalState::Approved, "approvals.approve")
    } else {
        (ApprovalState::Denied, "approvals.deny")
    };
    let event = operator_event(by, action, json!({ "call_id": call_id, "why": why }));
    store
        .settle_approval(call_id, to, by, why, Some(event))
        .await
}

/// Approves, withdraws or undoes a registry row, recorded in its history with who and why.
/// An approval binds the definition the screen looked at (its digest), and is refused when
/// `screen` blocks approval and the definition screen found something in it.
pub async fn change_registry(
    store: &Store,
    mut change: RegistryChange,
    screen: ScreenMode,
) -> Result<RegistryRow, StoreError> {
    need_why(&change.why, "change")?;
    if let RegistryAction::Approve { digest } = &mut change.action {
        let rows = store.registry().await?;
        if let Some(row) = rows.iter().find(|r| r.name == change.name) {
            crate::screening::check_approval(screen, &crate::screening::screen_for(&rows), row)?;
            if digest.is_none() {
                digest.clone_from(&row.seen_digest);
            }
        }
    }
    let (action, digest) = match &change.action {
        RegistryAction::Approve { digest } => ("registry.approve", digest.clone()),
        RegistryAction::Withdraw => ("registry.withdraw", None),
        RegistryAction::Undo => ("registry.undo", None),
    };
    let event = operator_event(
        &change.by,
        action,
        json!({ "tool": change.name, "why": change.why, "digest": digest }),
    );
    store.registry_change(change, Some(event)).await
}

/// Approves every tool of upstream `source` that waits for approval (new, or approved before
/// and changed since), each at the definition last seen; returns the rows approved.
///
/// With `fingerprint` (from `aether sources show`), nothing is approved unless the upstream's
/// recorded fingerprint is still that one: the operator approves what they reviewed.
pub async fn approve_source(
    store: &Store,
    source: &str,
    fingerprint: Option<&str>,
    by: &str,
    why: &str,
    screen: ScreenMode,
) -> Result<Vec<RegistryRow>, StoreError> {
    need_why(why, "approval")?;
    if let Some(expected) = fingerprint {
        let now = store
            .upstream_statuses()
            .await?
            .into_iter()
            .find(|s| s.name == source)
            .map(|s| s.fingerprint);
        if now.as_deref() != Some(expected) {
            return Err(StoreError::Invalid(format!(
                "upstream {source}'s tools are not the ones with fingerprint {expected} (now: {}); review them again (aether sources show {source})",
                now.as_deref().unwrap_or("not seen")
            )));
        }
    }
    let prefix = format!("{source}__");
    let rows = store.registry().await?;
    let waiting: Vec<RegistryRow> = rows
        .iter()
        .filter(|r| r.origin == "external" && r.name.starts_with(&prefix))
        .filter(|r| {
            r.state == RegistryState::Unapproved
                || (r.state == RegistryState::Approved && r.approved_digest != r.seen_digest)
        })
        .cloned()
        .collect();
    // All or none: an upstream is not half approved because some of its tools were blocked.
    let screen_all = crate::screening::screen_for(&rows);
    for row in &waiting {
        crate::screening::check_approval(screen, &screen_all, row)?;
    }
    let mut approved = Vec::new();
    for row in waiting {
        approved.push(
            change_registry(
                store,
                RegistryChange {
                    name: row.name.clone(),
                    action: RegistryAction::Approve {
                        digest: row.seen_digest.clone(),
                    },
                    by: by.to_string(),
                    why: why.to_string(),
                },
                screen,
            )
            .await?,
        );
    }
    Ok(approved)
}

impl Pipeline {
    /// Halts or resumes, as the operator `by` (see [`set_halt`]), and brings this
    /// process in step at once.
    pub async fn set_halt(
        &self,
        halted: bool,
        by: &str,
        why: &str,
    ) -> Result<HaltState, PipelineError> {
        let state = set_halt(&self.store, halted, by, why).await?;
        self.sync().await?;
        Ok(state)
    }

    /// An operator's decision on a call waiting for a person (see [`decide`]).
    pub async fn decide(
        &self,
        call_id: &str,
        approve: bool,
        by: &str,
        why: &str,
    ) -> Result<ApprovalRow, PipelineError> {
        let row = decide(&self.store, call_id, approve, by, why).await?;
        self.sync().await?;
        Ok(row)
    }

    /// An operator's change to the registry (see [`change_registry`]).
    pub async fn change_registry(
        &self,
        change: RegistryChange,
    ) -> Result<RegistryRow, PipelineError> {
        let row = change_registry(&self.store, change, self.screen).await?;
        self.sync().await?;
        Ok(row)
    }
}
