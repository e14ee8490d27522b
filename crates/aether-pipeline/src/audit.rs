//! The audit row of one call, filled in as the call moves through the pipeline and written,
//! durably, before the caller hears the outcome.
//!
//! Standard tools keep a summary of their arguments and result; Elevated and Restricted tools
//! keep them whole (bounded like every result). A refusal keeps the step and rule that refused
//! it. If the row cannot be written, a call that ran is not reported as a success: the caller
//! is told the audit failed.

use std::sync::Arc;
use std::time::Duration;

use aether_policy::decision::Step;
use aether_policy::journal::{PendingReceipt, Riding};
use aether_policy::{Digest, Tier, ToolDef, canonical_json, sha256};
use aether_store::{AuditEvent, Location, Store};
use aether_tools_core::{Content, ToolError};
use serde_json::Value;

use crate::{CallOutcome, SessionContext};

/// Characters of a refusal's reason an audit row keeps.
const REASON_CHARS: usize = 1024;

/// Characters of arguments or result a Standard tool's audit row keeps.
const SUMMARY_CHARS: usize = 512;

pub(crate) struct Draft {
    event: AuditEvent,
    tier: Tier,
    arguments_digest: Digest,
    denied_by_tool: Option<&'static str>,
    panicked: bool,
    /// Whether the receipt was written (a row without a step is an admitted call's, and
    /// `aether audit verify` expects its receipt).
    admitted: bool,
    /// The operator's rule that matched an admitted call, and who approved it.
    matched_rule: Option<String>,
    approval: Option<String>,
    /// The receipt riding the call's first journal commit, if it does (see
    /// [`PendingReceipt`]): where it got to says whether the call was admitted.
    riding: Option<Arc<PendingReceipt>>,
}

impl Draft {
    /// The row records the request's trace context (see [`Envelope::trace`]).
    ///
    /// [`Envelope::trace`]: crate::envelope::Envelope::trace
    pub fn traced(mut self, trace: Option<String>) -> Draft {
        self.event.trace = trace;
        self
    }

    pub fn new(call_id: &str, ctx: &SessionContext, tool: &str) -> Draft {
        let empty = sha256(b"{}");
        Draft {
            event: AuditEvent {
                at_us: aether_store::now_us(),
                call_id: call_id.to_string(),
                session: ctx.session_id.clone(),
                transport: ctx.transport.as_str().into(),
                agent: ctx.agent.name.clone(),
                team: ctx.agent.team.clone(),
                project: ctx.agent.project.clone(),
                tool: tool.chars().take(128).collect(),
                tier: "unknown".into(),
                outcome: String::new(),
                step: None,
                rule: None,
                reason: None,
                definition: None,
                arguments_digest: empty.to_string(),
                arguments: String::new(),
                result: String::new(),
                duration_us: 0,
                single: false,
                trace: None,
                subject: ctx.subject.clone(),
            },
            tier: Tier::Standard,
            arguments_digest: empty,
            denied_by_tool: None,
            panicked: false,
            admitted: false,
            matched_rule: None,
            approval: None,
            riding: None,
        }
    }

    /// The receipt rides the call's first journal commit.
    pub fn riding(&mut self, receipt: Arc<PendingReceipt>) {
        self.riding = Some(receipt);
    }

    /// Where the riding receipt got to, once the tool is done: committed (admitted), never
    /// boarded (the call changed nothing: its row is its only record), or halted (nothing was
    /// written; the outcome becomes the halt's refusal).
    async fn settle_riding(&mut self, store: &Store, outcome: CallOutcome) -> CallOutcome {
        let Some(riding) = self.riding.take() else {
            return outcome;
        };
        match riding.state() {
            Riding::Committed => self.admitted(),
            Riding::Waiting(_) => self.admitted_single(),
            // Its write failed: the call changed nothing, and is reported as a receipt that
            // could not be written is (the row says it was not admitted).
            Riding::Missed(_) => {
                let why = match &outcome {
                    CallOutcome::Ran(out) => result_text(&out.content),
                    _ => "its journal write failed".into(),
                };
                return CallOutcome::Failed(format!(
                    "the admission receipt could not be written, so the call did not run: it changed nothing ({why})"
                ));
            }
            // Its write was dropped midway (the call was cancelled): the store says.
            Riding::InFlight(r) => match store.receipt(&r.call_id).await {
                Ok(Some(_)) => self.admitted(),
                _ => self.admitted_single(),
            },
            Riding::Halted(why) => {
                return CallOutcome::Refused(crate::admission::halted(Some(&why)));
            }
        }
        outcome
    }

    pub fn call_id(&self) -> &str {
        &self.event.call_id
    }

    pub fn tool_known(&mut self, def: &ToolDef, digest: Digest) {
        self.tier = def.tier;
        self.event.tier = def.tier.as_str().into();
        self.event.definition = Some(digest.to_string());
    }

    /// Keeps the arguments' digest and (bounded) text; returns their size as JSON, in bytes.
    pub fn arguments(&mut self, args: &Value, tier: Tier) -> usize {
        let text = canonical_json(args);
        self.arguments_digest = sha256(text.as_bytes());
        self.event.arguments_digest = self.arguments_digest.to_string();
        self.event.arguments = keep(&text, tier);
        text.len()
    }

    pub fn arguments_digest(&self) -> Digest {
        self.arguments_digest
    }

    pub fn admitted(&mut self) {
        self.event.step = None;
        self.admitted = true;
    }

    /// Admitted by this row alone: a side-effect-free call has no receipt, and its row,
    /// written before the caller hears anything, is its only record.
    pub fn admitted_single(&mut self) {
        self.admitted();
        self.event.single = true;
    }

    pub fn tool_error(&mut self, e: &ToolError) {
        if let ToolError::Denied { rule, .. } = e {
            self.denied_by_tool = Some(rule);
        }
    }

    /// The call ended before admission without a refusal (cancelled while it waited for a
    /// person): the row says at which step, and so that it has no receipt.
    pub fn stopped_at(&mut self, step: Step, rule: &str) {
        self.event.step = Some(step.as_str().into());
        self.event.rule = Some(rule.to_string());
    }

    /// The arguments are not kept (they carried a credential, or a URL with one): the row
    /// keeps their digest and why they were withheld.
    pub fn withhold_arguments(&mut self, rule: &str) {
        self.event.arguments = format!("[withheld by {rule}]");
    }

    pub fn matched_rule(&mut self, rule: &str) {
        self.matched_rule = Some(rule.to_string());
    }

    /// Who approved the call and why (kept in the row's reason).
    pub fn approved(&mut self, note: &str) {
        self.approval = Some(note.chars().take(REASON_CHARS).collect());
    }

    pub fn panicked(&mut self) {
        self.panicked = true;
    }

    /// Writes the row (on the calling thread when `alone`, see `Store::audit_alone`) and
    /// returns what the caller should hear.
    pub async fn finish(
        mut self,
        store: &Store,
        outcome: CallOutcome,
        elapsed: Duration,
        alone: bool,
    ) -> CallOutcome {
        let outcome = self.settle_riding(store, outcome).await;
        let e = &mut self.event;
        e.duration_us = elapsed.as_micros() as i64;
        match &outcome {
            CallOutcome::Ran(out) => {
                e.outcome = match (out.is_error, self.denied_by_tool) {
                    (false, _) => "ok".into(),
                    (true, Some(_)) => "refused".into(),
                    (true, None) => "tool_error".into(),
                };
                e.rule = self
                    .denied_by_tool
                    .map(String::from)
                    .or(self.matched_rule.take());
                let text = result_text(&out.content);
                e.reason = if out.is_error {
                    Some(text.chars().take(SUMMARY_CHARS).collect())
                } else {
                    self.approval.take()
                };
                e.result = keep(&text, self.tier);
            }
            CallOutcome::Refused(r) => {
                e.outcome = "refused".into();
                e.step = Some(r.step.as_str().into());
                // A reason can quote what the caller sent (an unknown tool's name, say):
                // bounded, so that no caller can grow the audit at will.
                e.rule = Some(r.rule.chars().take(128).collect());
                e.reason = Some(r.reason.chars().take(REASON_CHARS).collect());
            }
            CallOutcome::Cancelled { timed_out } => {
                e.outcome = if *timed_out { "timed_out" } else { "cancelled" }.into();
            }
            CallOutcome::Failed(message) => {
                e.outcome = if self.panicked { "panicked" } else { "failed" }.into();
                e.reason = Some(message.clone());
            }
        }
        // A call that ended before its receipt (it failed to be written, or the call was
        // dropped on its way) says so, so that no row without a step lacks a receipt.
        if !self.admitted && e.step.is_none() {
            e.step = Some(Step::Receipt.as_str().into());
            e.rule.get_or_insert_with(|| "not-admitted".into());
        }
        let is_unknown = matches!(&outcome, CallOutcome::Refused(r) if r.step == Step::UnknownTool);
        // A database across the network can be gone for a while: the row is kept to be
        // written once it is back, so that the call is audited (late) rather than missing.
        let kept = matches!(store.location(), Location::Postgres(_)).then(|| self.event.clone());
        let written = if alone {
            store.audit_alone(self.event).await
        } else {
            store.audit_call(self.event).await
        };
        match written {
            // A side-effect-free call met a halt committed before its record: its result is
            // withheld (the row says so).
            Ok((_, Some(halt))) => {
                CallOutcome::Refused(crate::admission::halted(halt.why.as_deref()))
            }
            Ok(_) => outcome,
            Err(err) => {
                tracing::error!(error = %err, unknown_tool = is_unknown, "audit row could not be written");
                if let Some(mut event) = kept.filter(|_| err.is_unreachable()) {
                    let note = "audited late: the store was unreachable when the call ended, and the caller was told its outcome was not recorded";
                    event.reason = Some(match event.reason.take() {
                        Some(reason) => format!("{reason} ({note})"),
                        None => note.to_string(),
                    });
                    store.audit_when_back(event);
                }
                // No outcome reaches the caller as if recorded when it was not.
                match outcome {
                    CallOutcome::Ran(_) => CallOutcome::Failed(format!(
                        "the call ran, but its audit row could not be written ({err}); treat its result as lost"
                    )),
                    CallOutcome::Refused(r) => CallOutcome::Failed(format!(
                        "the call was refused ({}: {}), and the refusal could not be recorded ({err})",
                        r.step, r.reason
                    )),
                    CallOutcome::Cancelled { .. } => CallOutcome::Failed(format!(
                        "the call was stopped, and that could not be recorded ({err})"
                    )),
                    CallOutcome::Failed(message) => CallOutcome::Failed(format!(
                        "{message}; moreover its audit row could not be written ({err})"
                    )),
                }
            }
        }
    }
}

/// The audit row of an operator's action (halt, resume, a registry change, an approval
/// decision, a token made or revoked): agent `operator:BY`, transport `operator`. The store
/// writes it in the same transaction as the change itself.
pub(crate) fn operator_event(by: &str, action: &str, detail: Value) -> AuditEvent {
    let text = canonical_json(&detail);
    AuditEvent {
        at_us: aether_store::now_us(),
        call_id: uuid::Uuid::now_v7().to_string(),
        session: format!("operator:{by}"),
        transport: "operator".into(),
        agent: format!("operator:{by}"),
        team: None,
        project: None,
        tool: action.to_string(),
        tier: "operator".into(),
        outcome: "ok".into(),
        step: None,
        rule: None,
        reason: None,
        definition: None,
        arguments_digest: sha256(text.as_bytes()).to_string(),
        arguments: text,
        result: String::new(),
        duration_us: 0,
        single: false,
        trace: None,
        subject: None,
    }
}

/// `text` whole for Elevated and Restricted tools (bounded like a result), its head for
/// Standard ones.
fn keep(text: &str, tier: Tier) -> String {
    match tier {
        // Characters, not bytes: a short non-ASCII text is kept whole, not marked as cut.
        Tier::Standard if text.len() > SUMMARY_CHARS && text.chars().count() > SUMMARY_CHARS => {
            let head: String = text.chars().take(SUMMARY_CHARS).collect();
            format!("{head}… [{} characters]", text.chars().count())
        }
        _ => aether_policy::truncate::bound_text(text, aether_policy::truncate::RESULT_CHARS)
            .into_owned(),
    }
}

fn result_text(content: &[Content]) -> String {
    let mut out = String::new();
    for block in content {
        match block {
            Content::Text(t) => out.push_str(t),
            Content::Image {
                mime_type,
                data_base64,
            } => out.push_str(&format!(
                "[image {mime_type}, {} base64 characters]",
                data_base64.len()
            )),
            Content::Audio {
                mime_type,
                data_base64,
            } => out.push_str(&format!(
                "[audio {mime_type}, {} base64 characters]",
                data_base64.len()
            )),
            Content::Resource { uri, text, .. } => {
                out.push_str(&format!("[resource {uri}]"));
                if let Some(t) = text {
                    out.push_str(t);
                }
            }
        }
    }
    out
}
