//! What `/metrics` serves, in Prometheus' text format: calls by tool and decision, refusals
//! by step and rule (rate limits among them), the calls' latency, calls waiting for a person,
//! and the halt flag.

use std::sync::Mutex;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

use crate::CallOutcome;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CallLabels {
    tool: String,
    decision: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RefusalLabels {
    step: String,
    rule: String,
}

pub struct Metrics {
    registry: Mutex<Registry>,
    calls: Family<CallLabels, Counter>,
    refusals: Family<RefusalLabels, Counter>,
    latency: Histogram,
    pending: Gauge,
    halted: Gauge,
}

impl Default for Metrics {
    fn default() -> Metrics {
        let calls = Family::<CallLabels, Counter>::default();
        let refusals = Family::<RefusalLabels, Counter>::default();
        // 100 µs to about 100 s.
        let latency = Histogram::new([
            0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0,
            2.5, 5.0, 10.0, 30.0, 100.0,
        ]);
        let pending = Gauge::default();
        let halted = Gauge::default();
        let mut registry = Registry::with_prefix("aether");
        registry.register(
            "calls",
            "Tool calls by tool and decision (ok, tool_error, refused, cancelled, timed_out, failed)",
            calls.clone(),
        );
        registry.register(
            "refusals",
            "Refused calls by the step and rule that refused them (e.g. rate, rate:agent)",
            refusals.clone(),
        );
        registry.register(
            "call_duration_seconds",
            "Time from a call's arrival to its audited outcome",
            latency.clone(),
        );
        registry.register(
            "pending_approvals",
            "Calls waiting for a person",
            pending.clone(),
        );
        registry.register(
            "halted",
            "1 while an operator has halted Aether",
            halted.clone(),
        );
        Metrics {
            registry: Mutex::new(registry),
            calls,
            refusals,
            latency,
            pending,
            halted,
        }
    }
}

/// The decision label of an outcome.
pub fn decision(outcome: &CallOutcome) -> &'static str {
    match outcome {
        CallOutcome::Ran(out) if out.is_error => "tool_error",
        CallOutcome::Ran(_) => "ok",
        CallOutcome::Refused(_) => "refused",
        CallOutcome::Cancelled { timed_out: true } => "timed_out",
        CallOutcome::Cancelled { timed_out: false } => "cancelled",
        CallOutcome::Failed(_) => "failed",
    }
}

impl Metrics {
    pub fn record(&self, tool: &str, outcome: &CallOutcome, seconds: f64) {
        // Unknown tool names are the caller's text: one label for all of them.
        self.calls
            .get_or_create(&CallLabels {
                tool: tool.chars().take(64).collect(),
                decision: decision(outcome).into(),
            })
            .inc();
        if let CallOutcome::Refused(r) = outcome {
            // Rules are the operator's names (or Aether's): a bounded set; an unknown tool's
            // refusal names the catalog, not the caller's text.
            self.refusals
                .get_or_create(&RefusalLabels {
                    step: r.step.as_str().into(),
                    rule: r.rule.chars().take(64).collect(),
                })
                .inc();
        }
        self.latency.observe(seconds);
    }

    /// The text to serve, with the gauges set from the store's state now.
    pub fn render(&self, pending: usize, halted: bool) -> String {
        self.pending.set(pending as i64);
        self.halted.set(i64::from(halted));
        let mut out = String::new();
        let registry = self.registry.lock().unwrap_or_else(|e| e.into_inner());
        let _ = prometheus_client::encoding::text::encode(&mut out, &registry);
        out
    }
}
