//! The operator's undo: every file change of a call reversed, as a call of its own — the same
//! receipt, tool context, run and audit row as an agent's call (`admission.rs`,
//! `execution.rs`), admitted by the operator rather than by the steps, and even while Aether
//! is halted (an undo is how an operator repairs what a halted agent did).

use std::sync::Arc;

use aether_policy::AgentProfile;
use tokio_util::sync::CancellationToken;

use crate::envelope::Envelope;
use crate::execution::receipt_of;
use crate::{CallOutcome, CallResult, Entry, Pipeline, SessionContext, Transport};

impl Pipeline {
    /// Undoes every file change of `call_id` (with `file`, its changes to that root and path
    /// only), as the operator `by`: a call of its own, with a receipt, journal entries and an
    /// audit row.
    pub async fn operator_undo(
        &self,
        by: &str,
        call_id: &str,
        file: Option<(&str, &str)>,
    ) -> CallResult {
        let ctx = SessionContext {
            session_id: format!("operator:{by}"),
            transport: Transport::InProcess,
            agent: Arc::new(AgentProfile::with_groups(&format!("operator:{by}"), &[])),
            groups: Arc::new(Default::default()),
            subject: None,
            scope: None,
            token: None,
        };
        let entry = match Entry::outside(self.undo.clone()) {
            Ok(entry) => entry,
            Err(e) => {
                return CallResult {
                    call_id: String::new(),
                    outcome: CallOutcome::Failed(format!("the undo tool is malformed: {e}")),
                };
            }
        };
        let envelope = Envelope::default();
        let args = match file {
            Some((root, path)) => {
                serde_json::json!({ "call_id": call_id, "root": root, "path": path })
            }
            None => serde_json::json!({ "call_id": call_id }),
        };
        let mut call = self.start(
            &ctx,
            &entry.def().name,
            &envelope,
            args,
            Arc::new(aether_tools_core::NoClient),
            CancellationToken::new(),
        );
        call.draft_mut().tool_known(entry.def(), entry.digest);
        call.record_arguments(entry.def().tier);
        call.decision = "operator".into();
        let outcome = match self.store.admit_operator(receipt_of(&call, &entry)).await {
            Err(e) => CallOutcome::Failed(format!(
                "the admission receipt could not be written, so nothing was undone: {e}"
            )),
            Ok(()) => {
                call.draft_mut().admitted();
                self.run(&mut call, &entry).await
            }
        };
        self.finish(call, outcome).await
    }
}
