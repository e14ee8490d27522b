//! Reads that are not tool calls: an upstream's resource or prompt, fetched for a session.
//! They run nothing, so they have no receipt; they meet the same halt, the same credential
//! screen on what would leave, and an audit row of their own (step `read`), written before
//! the answer leaves.

use std::future::Future;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::admission::halted;
use crate::{Pipeline, PipelineError, SessionContext};

/// What is read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReadKind {
    /// `resources/read`
    Resource,
    /// `prompts/get`
    Prompt,
}

impl ReadKind {
    /// The MCP method, as the audit names the read.
    pub fn method(self) -> &'static str {
        match self {
            ReadKind::Resource => "resources/read",
            ReadKind::Prompt => "prompts/get",
        }
    }

    fn noun(self) -> &'static str {
        match self {
            ReadKind::Resource => "resource",
            ReadKind::Prompt => "prompt",
        }
    }
}

/// Why a read gave nothing.
#[derive(Debug, PartialEq, Eq)]
pub enum ReadError {
    /// Aether is halted, the request carries a credential, or this session reaches nothing of
    /// that name.
    Refused(String),
    /// The upstream failed, or the audit row could not be written (nothing is returned then).
    Failed(String),
}

impl Pipeline {
    /// Reads for `ctx` what `request` names (`request["target"]`, the URI or prompt name),
    /// through `read` (which answers `None` when the session does not reach it): refused while
    /// halted (the store's flag, not a cached one; a halt state that cannot be read counts as
    /// halted) or when the request carries a credential (it is then not sent, nor kept in the
    /// audit), and audited either way.
    pub async fn read<F>(
        &self,
        ctx: &SessionContext,
        kind: ReadKind,
        request: Value,
        read: F,
    ) -> Result<Value, ReadError>
    where
        F: Future<Output = Option<Result<Value, String>>>,
    {
        let started = Instant::now();
        let leak = aether_policy::dlp::Scanner::shared().scan_json(&request);
        let arguments = match &leak {
            Some(finding) => format!("[withheld by {}]", finding.rule),
            None => request.to_string(),
        };
        let outcome = match self.store.halt_state().await {
            Ok(state) if state.halted => Err(ReadError::Refused(
                halted(Some(state.why.as_deref().unwrap_or_default())).reason,
            )),
            Err(_) => Err(ReadError::Refused(halted(None).reason)),
            Ok(_) => match &leak {
                Some(finding) => Err(ReadError::Refused(format!(
                    "the request carries what looks like a credential ({}, at {}); it was not sent upstream",
                    finding.rule, finding.place
                ))),
                None => match read.await {
                    None => Err(ReadError::Refused(format!(
                        "no {} {:?} for agent {:?}",
                        kind.noun(),
                        request["target"].as_str().unwrap_or_default(),
                        ctx.agent.name
                    ))),
                    Some(Err(why)) => Err(ReadError::Failed(why)),
                    Some(Ok(value)) => Ok(value),
                },
            },
        };
        let (label, detail) = match &outcome {
            Ok(v) => ("ok", format!("{} bytes", v.to_string().len())),
            Err(ReadError::Refused(why)) => ("refused", why.clone()),
            Err(ReadError::Failed(why)) => ("failed", why.clone()),
        };
        self.audit_read(
            ctx,
            kind.method(),
            &arguments,
            label,
            &detail,
            started.elapsed(),
        )
        .await
        .map_err(|e| {
            ReadError::Failed(format!(
                "the audit row could not be written, so nothing is returned: {e}"
            ))
        })?;
        outcome
    }

    /// Writes a read's audit row: who read what, how it ended (`ok`, `refused`, `failed`),
    /// `arguments` being the request as JSON (or why it is withheld).
    async fn audit_read(
        &self,
        ctx: &SessionContext,
        what: &str,
        arguments: &str,
        outcome: &str,
        detail: &str,
        elapsed: Duration,
    ) -> Result<(), PipelineError> {
        let event = aether_store::AuditEvent {
            at_us: aether_store::now_us(),
            call_id: uuid::Uuid::now_v7().to_string(),
            session: ctx.session_id.clone(),
            transport: ctx.transport.as_str().into(),
            agent: ctx.agent.name.clone(),
            team: ctx.agent.team.clone(),
            project: ctx.agent.project.clone(),
            tool: what.chars().take(128).collect(),
            tier: "standard".into(),
            outcome: outcome.into(),
            step: Some("read".into()),
            rule: None,
            reason: (outcome != "ok").then(|| detail.chars().take(1024).collect()),
            definition: None,
            arguments_digest: aether_policy::sha256(arguments.as_bytes()).to_string(),
            arguments: arguments.chars().take(2048).collect(),
            result: if outcome == "ok" {
                detail.into()
            } else {
                String::new()
            },
            duration_us: elapsed.as_micros() as i64,
            // A resource read's row names its own step (`read`); the halt was met at its
            // start, as for any call.
            single: false,
            trace: None,
            subject: ctx.subject.clone(),
        };
        self.store.audit(event).await?;
        Ok(())
    }
}
