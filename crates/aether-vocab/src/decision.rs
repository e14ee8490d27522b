//! Refusals as values.
//!
//! A refused call is a normal outcome, not a failure of Aether: it carries the pipeline step
//! that refused it and a reason written for the person or model reading it. `Err` is kept for
//! Aether itself failing (a store that cannot be written, say).

use std::fmt;

use serde::Serialize;

/// The pipeline step that refused a call, in pipeline order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Step {
    Halt,
    UnknownTool,
    Registry,
    Connection,
    Capability,
    Rate,
    Arguments,
    Rules,
    Egress,
    Tier,
    Envelope,
    Receipt,
}

impl Step {
    pub fn as_str(self) -> &'static str {
        match self {
            Step::Halt => "halt",
            Step::UnknownTool => "mcp-tool-not-implemented",
            Step::Registry => "registry",
            Step::Connection => "connection",
            Step::Capability => "capability",
            Step::Rate => "rate",
            Step::Arguments => "arguments",
            Step::Rules => "rules",
            Step::Egress => "egress",
            Step::Tier => "tier",
            Step::Envelope => "envelope",
            Step::Receipt => "receipt",
        }
    }
}

impl fmt::Display for Step {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why a call was not run.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Refusal {
    pub step: Step,
    /// The rule that decided, e.g. `tier:restricted` or a rule's name; never a secret.
    pub rule: String,
    pub reason: String,
    /// When the same call may pass, in seconds (a rate limit's refusal).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub retry_after_s: Option<u64>,
}

/// Characters of a refusal's reason kept: enough to say what and why, never a caller's
/// megabyte.
pub const REASON_CHARS: usize = 2_000;

impl Refusal {
    /// A refusal; its reason is bounded ([`REASON_CHARS`]) whatever went into it, so a
    /// refusal never echoes a megabyte of the caller's argument back.
    pub fn new(step: Step, rule: impl Into<String>, reason: impl Into<String>) -> Refusal {
        let reason = reason.into();
        Refusal {
            step,
            rule: crate::truncate::bound_text(&rule.into(), 200).into_owned(),
            reason: crate::truncate::bound_text(&reason, REASON_CHARS).into_owned(),
            retry_after_s: None,
        }
    }

    /// The same refusal, saying when the call may pass.
    pub fn retry_after(mut self, seconds: u64) -> Refusal {
        self.retry_after_s = Some(seconds);
        self
    }
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "refused by {} ({}): {}",
            self.step, self.rule, self.reason
        )
    }
}
