//! A call's spans, as the pipeline makes them (the binary's OTLP export is tested end to end in
//! `aether-cli`'s `telemetry.rs`): a span per call continuing the caller's trace context, a
//! child per step that did work — the wait for a person and the receipt among them —, the
//! trace context the tool is handed, and no spans at all without a tracer.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use aether_pipeline::envelope::Envelope;
use aether_pipeline::operator;
use aether_policy::{Tier, ToolDef};
use aether_tools::{CallContext, NoClient, Tool, ToolError, ToolOutput};
use async_trait::async_trait;
use opentelemetry::global::BoxedTracer;
use opentelemetry::trace::{SpanKind, TracerProvider as _};
use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::trace::{SdkTracerProvider, SpanData, SpanExporter};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::support::*;

/// Keeps every span it is given.
#[derive(Clone, Debug, Default)]
struct Kept(Arc<Mutex<Vec<SpanData>>>);

impl SpanExporter for Kept {
    async fn export(&self, batch: Vec<SpanData>) -> OTelSdkResult {
        self.0.lock().unwrap().extend(batch);
        Ok(())
    }
}

impl Kept {
    fn spans(&self) -> Vec<SpanData> {
        self.0.lock().unwrap().clone()
    }
}

/// A tracer whose spans `Kept` receives as each one ends.
fn tracer() -> (Kept, SdkTracerProvider, Arc<BoxedTracer>) {
    let kept = Kept::default();
    let provider = SdkTracerProvider::builder()
        .with_simple_exporter(kept.clone())
        .build();
    let tracer = BoxedTracer::new(Box::new(provider.tracer("aether-tests")));
    (kept, provider, Arc::new(tracer))
}

/// A tool that keeps the trace context it was handed.
struct Heard {
    def: ToolDef,
    trace: Mutex<Vec<Option<String>>>,
}

#[async_trait]
impl Tool for Heard {
    fn def(&self) -> &ToolDef {
        &self.def
    }

    async fn call(&self, cx: CallContext, _args: Value) -> Result<ToolOutput, ToolError> {
        self.trace.lock().unwrap().push(cx.trace.clone());
        Ok(ToolOutput::text("heard"))
    }
}

const TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const PARENT: &str = "00f067aa0ba902b7";

fn attribute(span: &SpanData, key: &str) -> Option<String> {
    span.attributes
        .iter()
        .find(|kv| kv.key.as_str() == key)
        .map(|kv| kv.value.to_string())
}

#[tokio::test]
async fn a_call_waiting_for_a_person_is_a_span_with_its_approval_and_receipt_inside() {
    let h = Harness::new();
    let (kept, _provider, tracer) = tracer();
    let heard = Arc::new(Heard {
        def: def("launch", "alpha", Tier::Restricted, open_schema()),
        trace: Mutex::default(),
    });
    let p = h
        .pipeline_with(vec![worker()], vec![heard.clone() as Arc<dyn Tool>], |s| {
            s.tracer = Some(tracer)
        })
        .await;
    let _watch = p.watch(Duration::from_millis(20));
    let ctx = session(&p, "worker", "s1");
    let (p2, ctx2) = (p.clone(), ctx.clone());
    let task = tokio::spawn(async move {
        // An idempotency key: its claim is a store round trip, with a span of its own.
        let envelope = Envelope {
            trace: Some(format!("00-{TRACE}-{PARENT}-01")),
            idempotency_key: Some("launch-1".into()),
            ..Default::default()
        };
        p2.call_with(
            &ctx2,
            "launch",
            object(json!({"secret_argument": "aethermarker7731"})),
            envelope,
            Arc::new(NoClient),
            CancellationToken::new(),
        )
        .await
    });
    let row = loop {
        if let Some(row) = h.store.approvals(true, 10).await.unwrap().pop() {
            break row;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    operator::decide(&h.store, &row.request.id, true, "alice", "fine")
        .await
        .unwrap();
    let result = tokio::time::timeout(Duration::from_secs(10), task)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(ok_text(&result), "heard");

    let spans = kept.spans();
    let root = spans
        .iter()
        .find(|s| s.name == "tools/call launch")
        .expect("the call's span");
    assert_eq!(root.span_context.trace_id().to_string(), TRACE);
    assert_eq!(root.parent_span_id.to_string(), PARENT);
    assert!(root.parent_span_is_remote);
    assert_eq!(root.span_kind, SpanKind::Server);
    assert_eq!(attribute(root, "aether.agent").as_deref(), Some("worker"));
    assert_eq!(attribute(root, "aether.decision").as_deref(), Some("ran"));
    assert_eq!(
        attribute(root, "aether.call_id"),
        Some(result.call_id.clone())
    );
    let steps: Vec<&str> = spans
        .iter()
        .filter(|s| s.parent_span_id == root.span_context.span_id())
        .map(|s| s.name.as_ref())
        .collect();
    assert_eq!(
        steps,
        ["rules", "approval", "envelope", "receipt", "run", "audit"],
        "in the order they ran"
    );
    let approval = spans.iter().find(|s| s.name == "approval").unwrap();
    assert!(
        approval.end_time > approval.start_time,
        "the wait is the approval span's time"
    );
    // The tool was handed the run span's context, in the caller's trace.
    let run = spans.iter().find(|s| s.name == "run").unwrap();
    assert_eq!(
        heard.trace.lock().unwrap().as_slice(),
        [Some(format!(
            "00-{TRACE}-{}-01",
            run.span_context.span_id()
        ))]
    );
    // The audit row names the call's span.
    let row = row_of(&h.store, &result.call_id).await;
    assert_eq!(
        row.event.trace,
        Some(format!("00-{TRACE}-{}-01", root.span_context.span_id()))
    );
    // Who and what, never the arguments.
    let everything = format!("{spans:?}");
    assert!(!everything.contains("aethermarker7731"));
    h.check().await;
}

#[tokio::test]
async fn a_refused_call_says_where_and_a_pipeline_without_a_tracer_hands_the_callers_context_on() {
    let h = Harness::new();
    let (kept, _provider, tracer) = tracer();
    let tool = Echo::new("echo", "alpha", Tier::Standard);
    let p = h
        .pipeline_with(vec![worker()], vec![tool as Arc<dyn Tool>], |s| {
            s.tracer = Some(tracer)
        })
        .await;
    let ctx = session(&p, "worker", "s1");
    // No trace context from the caller: a new trace.
    let r = call(&p, &ctx, "echo", json!({"text": 5})).await;
    assert!(matches!(
        r.outcome,
        aether_pipeline::CallOutcome::Refused(_)
    ));
    let spans = kept.spans();
    let root = spans.iter().find(|s| s.name == "tools/call echo").unwrap();
    assert!(!root.parent_span_id.to_string().chars().any(|c| c != '0'));
    assert_eq!(
        attribute(root, "aether.decision").as_deref(),
        Some("refused")
    );
    assert_eq!(
        attribute(root, "aether.refused.step").as_deref(),
        Some("arguments")
    );
    assert_eq!(
        attribute(root, "aether.refused.rule").as_deref(),
        Some("schema")
    );
    let steps: Vec<&str> = spans
        .iter()
        .filter(|s| s.parent_span_id == root.span_context.span_id())
        .map(|s| s.name.as_ref())
        .collect();
    assert_eq!(steps, ["audit"], "a refusal among the checks ends the call");

    // Without a tracer: no spans, and the caller's context is handed on as it came.
    let h = Harness::new();
    let heard = Arc::new(Heard {
        def: def("listen", "alpha", Tier::Standard, open_schema()),
        trace: Mutex::default(),
    });
    let p = h
        .pipeline_with(vec![worker()], vec![heard.clone() as Arc<dyn Tool>], |_| {})
        .await;
    let ctx = session(&p, "worker", "s1");
    let sent = format!("00-{TRACE}-{PARENT}-01");
    let envelope = Envelope {
        trace: Some(sent.clone()),
        ..Default::default()
    };
    let r = p
        .call_with(
            &ctx,
            "listen",
            object(json!({})),
            envelope,
            Arc::new(NoClient),
            CancellationToken::new(),
        )
        .await;
    assert_eq!(ok_text(&r), "heard");
    call(&p, &ctx, "listen", json!({})).await;
    assert_eq!(heard.trace.lock().unwrap().as_slice(), [Some(sent), None]);
    h.check().await;
}
