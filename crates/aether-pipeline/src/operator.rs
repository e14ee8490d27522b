//! What an operator does, from any surface (CLI, admin API): halt and resume, decide a call
//! waiting for a person, change the registry. Each is one store change plus its own audit
//! row (agent `operator:BY`), and needs only the store, so the CLI can act on a store that a
//! running server shares; the server notices through the store's revision counters.

use aether_store::{
    ApprovalRow, ApprovalState, HaltState, RegistryAction, RegistryChange, RegistryRow, Store,
    StoreError,
};
use serde_json::json;

use crate::audit::operator_action;

/// Halts or resumes; a halt denies every call waiting for a person in the same commit.
pub async fn set_halt(
    store: &Store,
    halted: bool,
    by: &str,
    why: &str,
) -> Result<HaltState, StoreError> {
    if why.trim().is_empty() {
        return Err(StoreError::Invalid(
            "say why (it is recorded with the change)".into(),
        ));
    }
    let state = store.set_halt(halted, by, why).await?;
    operator_action(
        store,
        by,
        if halted { "halt" } else { "resume" },
        json!({ "why": why }),
    )
    .await?;
    Ok(state)
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
    if why.trim().is_empty() {
        return Err(StoreError::Invalid(
            "say why (it is recorded with the decision)".into(),
        ));
    }
    let to = if approve {
        ApprovalState::Approved
    } else {
        ApprovalState::Denied
    };
    let row = store.settle_approval(call_id, to, by, why).await?;
    operator_action(
        store,
        by,
        if approve {
            "approvals.approve"
        } else {
            "approvals.deny"
        },
        json!({
            "call_id": call_id,
            "tool": row.request.tool,
            "agent": row.request.agent,
            "why": why,
        }),
    )
    .await?;
    Ok(row)
}

/// Approves, withdraws or undoes a registry row, recorded in its history with who and why.
pub async fn change_registry(
    store: &Store,
    change: RegistryChange,
) -> Result<RegistryRow, StoreError> {
    if change.why.trim().is_empty() {
        return Err(StoreError::Invalid(
            "say why (it is recorded with the change)".into(),
        ));
    }
    let action = match &change.action {
        RegistryAction::Approve { .. } => "registry.approve",
        RegistryAction::Withdraw => "registry.withdraw",
        RegistryAction::Undo => "registry.undo",
    };
    let (by, why, name) = (change.by.clone(), change.why.clone(), change.name.clone());
    let row = store.registry_change(change).await?;
    operator_action(
        store,
        &by,
        action,
        json!({
            "tool": name,
            "why": why,
            "state": row.state,
            "digest": row.approved_digest,
        }),
    )
    .await?;
    Ok(row)
}
