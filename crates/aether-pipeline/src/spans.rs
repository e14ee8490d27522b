//! A call's OpenTelemetry spans: one for the call (`tools/call TOOL`, a server span continuing
//! the caller's W3C trace context), a child for each step that does work of its own or may
//! wait: the rules, egress (a network tool's), the wait for a person (when one is asked), the
//! envelope (when it claims an idempotency key), the receipt (when one is written), the run
//! and an upstream's call inside it, the audit row. The checks of steps 2 to 6 are in memory
//! and have none (the call's span names a refusal among them); each span costs the exporter
//! as much as a step of theirs costs the call.
//!
//! Spans carry who and what, never the arguments or anything secret: the agent, the tool and
//! its group, the transport, the decision, and for a refusal its step and rule. The caller's
//! person (an OAuth subject) is not named either: the audit row keeps it.
//!
//! With no tracer (telemetry off) nothing here allocates or measures; the caller's trace
//! context is still handed on unchanged to the upstreams and model connections a call reaches.

use std::borrow::Cow;
use std::sync::Arc;

use opentelemetry::global::{BoxedSpan, BoxedTracer};
use opentelemetry::trace::{
    SpanContext, SpanId, SpanKind, Status, TraceContextExt, TraceFlags, TraceId, TraceState,
    Tracer as _,
};
use opentelemetry::{Context, KeyValue};

use crate::{CallOutcome, SessionContext};

/// The tracer the pipeline's spans are made with: `None` when telemetry is off.
pub type SharedTracer = Option<Arc<BoxedTracer>>;

/// The spans of one call in flight.
pub(crate) struct CallSpans {
    tracer: SharedTracer,
    /// The call's own span (in a context, for its children), when tracing.
    root: Option<Context>,
    /// The trace context the caller sent, handed on as it came when not tracing.
    incoming: Option<String>,
}

/// A step's span, ended when dropped (a step that refuses ends it by returning early).
pub(crate) struct StepSpan(Option<Context>);

impl Drop for StepSpan {
    fn drop(&mut self) {
        if let Some(cx) = &self.0 {
            cx.span().end();
        }
    }
}

impl CallSpans {
    /// No spans, and no trace context to hand on.
    pub(crate) fn off() -> CallSpans {
        CallSpans {
            tracer: None,
            root: None,
            incoming: None,
        }
    }

    /// Starts the call's span, continuing `incoming` (a well-formed `traceparent`) when there is
    /// one. The tool's name is its own only for a tool of the catalog (`known`): a caller's
    /// made-up name never becomes a span name.
    pub(crate) fn start(
        tracer: &SharedTracer,
        incoming: Option<&str>,
        ctx: &SessionContext,
        tool: &str,
        known: bool,
        call_id: &str,
    ) -> CallSpans {
        let Some(t) = tracer else {
            return CallSpans {
                tracer: None,
                root: None,
                incoming: incoming.map(str::to_string),
            };
        };
        let parent = incoming
            .and_then(remote_context)
            .map(|sc| Context::new().with_remote_span_context(sc))
            .unwrap_or_default();
        let name: Cow<'static, str> = if known {
            format!("tools/call {tool}").into()
        } else {
            "tools/call".into()
        };
        let mut attributes = vec![
            KeyValue::new("mcp.method.name", "tools/call"),
            KeyValue::new("gen_ai.operation.name", "execute_tool"),
            KeyValue::new("aether.agent", ctx.agent.name.clone()),
            KeyValue::new("aether.transport", ctx.transport.as_str()),
            KeyValue::new("aether.call_id", call_id.to_string()),
        ];
        if known {
            attributes.push(KeyValue::new("gen_ai.tool.name", tool.to_string()));
        }
        let span = t.build_with_context(
            t.span_builder(name)
                .with_kind(SpanKind::Server)
                .with_attributes(attributes),
            &parent,
        );
        CallSpans {
            tracer: tracer.clone(),
            root: Some(parent.with_span(span)),
            incoming: incoming.map(str::to_string),
        }
    }

    /// A child of the call's span, named for its step.
    pub(crate) fn step(&self, name: &'static str) -> StepSpan {
        self.child(self.root.as_ref(), name, SpanKind::Internal, Vec::new())
    }

    /// A child of `parent` (a step's span), as a client span when it reaches another server.
    pub(crate) fn inner(
        &self,
        parent: &StepSpan,
        name: &'static str,
        attributes: Vec<KeyValue>,
    ) -> StepSpan {
        self.child(parent.0.as_ref(), name, SpanKind::Client, attributes)
    }

    fn child(
        &self,
        parent: Option<&Context>,
        name: &'static str,
        kind: SpanKind,
        attributes: Vec<KeyValue>,
    ) -> StepSpan {
        let (Some(t), Some(parent)) = (&self.tracer, parent) else {
            return StepSpan(None);
        };
        let span: BoxedSpan = t.build_with_context(
            t.span_builder(name)
                .with_kind(kind)
                .with_attributes(attributes),
            parent,
        );
        StepSpan(Some(parent.with_span(span)))
    }

    /// The trace context to hand on from inside `span` (to an upstream, a model connection, a
    /// call the tool makes through the pipeline): the span's own when it is traced, else the
    /// caller's as it came.
    pub(crate) fn traceparent(&self, span: &StepSpan) -> Option<String> {
        match &span.0 {
            Some(cx) => traceparent_of(cx),
            None => self.incoming.clone(),
        }
    }

    /// The trace context the call's audit row keeps: its own span's when traced (so the row
    /// names the span to look for), else the caller's as it came.
    pub(crate) fn recorded(&self) -> Option<String> {
        match &self.root {
            Some(cx) => traceparent_of(cx),
            None => self.incoming.clone(),
        }
    }

    /// Names the tool's group, once the catalog knows the tool.
    pub(crate) fn tool_known(&self, group: &str) {
        if let Some(cx) = &self.root {
            cx.span()
                .set_attribute(KeyValue::new("aether.tool.group", group.to_string()));
        }
    }

    /// Ends the call's span with its outcome.
    pub(crate) fn end(self, outcome: &CallOutcome) {
        let Some(cx) = self.root else { return };
        let span = cx.span();
        let decision = match outcome {
            CallOutcome::Ran(out) if out.is_error => "tool-error",
            CallOutcome::Ran(_) => "ran",
            CallOutcome::Refused(_) => "refused",
            CallOutcome::Cancelled { timed_out: true } => "timed-out",
            CallOutcome::Cancelled { timed_out: false } => "cancelled",
            CallOutcome::Failed(_) => "failed",
        };
        span.set_attribute(KeyValue::new("aether.decision", decision));
        match outcome {
            CallOutcome::Refused(refusal) => {
                span.set_attribute(KeyValue::new("aether.refused.step", refusal.step.as_str()));
                span.set_attribute(KeyValue::new("aether.refused.rule", refusal.rule.clone()));
            }
            // Aether's own failure: its message names what failed (a store, a panic), not what
            // the call carried.
            CallOutcome::Failed(why) => {
                span.set_attribute(KeyValue::new("error.type", "aether"));
                span.set_status(Status::error(why.clone()));
            }
            CallOutcome::Ran(out) if out.is_error => {
                span.set_attribute(KeyValue::new("error.type", "tool_error"));
            }
            _ => {}
        }
        span.end();
    }
}

/// The `traceparent` naming the span of `cx`.
fn traceparent_of(cx: &Context) -> Option<String> {
    let sc = cx.span().span_context().clone();
    sc.is_valid().then(|| {
        format!(
            "00-{}-{}-{:02x}",
            sc.trace_id(),
            sc.span_id(),
            sc.trace_flags().to_u8()
        )
    })
}

/// The span context a well-formed `traceparent` names (already checked by
/// [`crate::envelope::traceparent`]).
fn remote_context(traceparent: &str) -> Option<SpanContext> {
    let mut parts = traceparent.split('-');
    let (_version, trace, parent, flags) =
        (parts.next()?, parts.next()?, parts.next()?, parts.next()?);
    let flags = u8::from_str_radix(flags, 16).ok()?;
    let sc = SpanContext::new(
        TraceId::from_hex(trace).ok()?,
        SpanId::from_hex(parent).ok()?,
        TraceFlags::new(flags & 1),
        true,
        TraceState::NONE,
    );
    sc.is_valid().then_some(sc)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_traceparent_names_the_remote_span_it_continues() {
        let sc = remote_context("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01").unwrap();
        assert_eq!(
            sc.trace_id().to_string(),
            "4bf92f3577b34da6a3ce929d0e0e4736"
        );
        assert_eq!(sc.span_id().to_string(), "00f067aa0ba902b7");
        assert!(sc.is_sampled() && sc.is_remote());
        let unsampled =
            remote_context("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00").unwrap();
        assert!(!unsampled.is_sampled());
        assert!(
            remote_context("00-00000000000000000000000000000000-00f067aa0ba902b7-01").is_none()
        );
    }
}
