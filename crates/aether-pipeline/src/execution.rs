//! Steps 11 and 12: the admission receipt, durable before the tool runs, and the run — with
//! the call's cancellation, a time limit and panics caught, its result bounded, an upstream's
//! table kept as a data set. Also the tool's view of the call (`CallContext`), which the
//! operator's undo shares.

use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use aether_policy::journal::PendingReceipt;
use aether_store::{AdmissionReceipt, ReceiptOutcome};
use aether_tools_core::{CallContext, Content, DestinationCheck, PathCheck, ToolError, ToolOutput};
use futures::FutureExt;
use serde_json::Value;

use crate::admission::{Call, Stop, halted};
use crate::destinations::RuledCall;
use crate::{CallOutcome, Entry, Pipeline, tables};

impl Pipeline {
    /// Step 11, the receipt, durable before the tool runs; it meets a halt inside its transaction.
    pub(crate) async fn receipt(&self, call: &mut Call<'_>, entry: &Entry) -> Result<(), Stop> {
        // A call that can change nothing is admitted by its audit row alone, written before
        // its answer leaves: nothing it did can be seen before its record is durable.
        if side_effect_free(entry) {
            call.draft_mut().admitted_single();
            return Ok(());
        }
        let receipt = receipt_of(call, entry);
        // A tool whose only effects are file changes it journals first: the receipt rides its
        // first journal commit (one flush for both), and nothing it does is seen before then.
        if !entry.external && entry.tool.journals_every_effect() {
            let riding = Arc::new(PendingReceipt::new(receipt));
            call.riding = Some(riding.clone());
            call.draft_mut().riding(riding);
            return Ok(());
        }
        let _span = call.spans.step("receipt");
        let admitted = if self.alone().await {
            self.store.admit_alone(receipt).await
        } else {
            self.store.admit(receipt).await
        };
        match admitted {
            Ok(ReceiptOutcome::Durable) => {
                call.draft_mut().admitted();
                Ok(())
            }
            Ok(ReceiptOutcome::Halted(state)) => {
                self.halted.store(true, Ordering::Relaxed);
                Err(halted(Some(state.why.as_deref().unwrap_or_default())).into())
            }
            Err(e) => Err(Stop::Ended(CallOutcome::Failed(format!(
                "the admission receipt could not be written, so the call did not run: {e}"
            )))),
        }
    }

    /// Step 12, runs the tool with the call's cancellation, a time limit, and panics caught. The
    /// tool gets its own token: the time limit stops this call, never the caller's other
    /// calls that may share the caller's token.
    pub(crate) async fn run(&self, call: &mut Call<'_>, entry: &Entry) -> CallOutcome {
        let def = entry.def();
        // An upstream's tool is a call to another server: a client span inside the run's, and
        // the trace context handed on is that one's.
        let span = call.spans.step("run");
        let upstream = entry.external.then(|| {
            call.spans.inner(
                &span,
                "upstream",
                vec![opentelemetry::KeyValue::new(
                    "aether.tool.group",
                    def.group.clone(),
                )],
            )
        });
        let trace = call.spans.traceparent(upstream.as_ref().unwrap_or(&span));
        let tool_cancel = call.cancel.child_token();
        let ruled = Arc::new(RuledCall::new(
            self.rules.current(),
            self.roots.clone(),
            call,
            def,
        ));
        let mut cx = self.context(call, tool_cancel.clone(), ruled.clone(), ruled);
        cx.trace = trace;
        let limit = Duration::from_secs(self.limits.tool_seconds);
        // An upstream's table is kept as a data set; its arguments go with it (for reports).
        let table_args = entry.external.then(|| call.args.clone());
        let run = AssertUnwindSafe(entry.tool.call(cx, call.args.clone())).catch_unwind();
        let result = tokio::select! {
            biased;
            _ = call.cancel.cancelled() => return CallOutcome::Cancelled { timed_out: false },
            _ = self.shutdown.cancelled() => {
                tool_cancel.cancel();
                return CallOutcome::Cancelled { timed_out: false };
            }
            _ = tokio::time::sleep(limit) => {
                tool_cancel.cancel();
                return CallOutcome::Cancelled { timed_out: true };
            }
            result = run => result,
        };
        match result {
            Ok(Ok(output)) => {
                let output = match &table_args {
                    Some(args) => {
                        self.keep_table(call.id(), &call.ctx.agent.name, &def.name, args, output)
                            .await
                    }
                    None => output,
                };
                CallOutcome::Ran(bound(output, self.limits.result_chars))
            }
            Ok(Err(ToolError::Cancelled)) => CallOutcome::Cancelled { timed_out: false },
            Ok(Err(e)) => {
                call.draft_mut().tool_error(&e);
                // A tool's error text is bounded like its results (it may quote input).
                let output = ToolOutput {
                    content: vec![Content::Text(e.to_string())],
                    structured: None,
                    is_error: true,
                };
                CallOutcome::Ran(bound(output, self.limits.result_chars))
            }
            Err(panic) => {
                call.draft_mut().panicked();
                CallOutcome::Failed(format!(
                    "the tool failed inside Aether ({}); the failure is recorded in the audit",
                    panic_message(&panic)
                ))
            }
        }
    }

    /// The tool's view of the call.
    pub(crate) fn context(
        &self,
        call: &Call<'_>,
        cancel: tokio_util::sync::CancellationToken,
        destinations: Arc<dyn DestinationCheck>,
        paths: Arc<dyn PathCheck>,
    ) -> CallContext {
        CallContext {
            call_id: call.id().to_string(),
            session: call.ctx.session_id.clone(),
            agent: call.ctx.agent.clone(),
            roots: self.roots.clone(),
            limits: self.limits.clone(),
            cancel,
            client: call.client.clone(),
            ledger: self.ledger.clone(),
            destinations,
            paths,
            receipt: call.riding.clone(),
            subject: call.ctx.subject.clone(),
            scope: call.ctx.scope.clone(),
            trace: None,
        }
    }

    /// Keeps the table in an upstream tool's output as a data set and returns what the model
    /// sees (at most 50 rows and a reference). If the data set cannot be kept, the model sees
    /// the rows it would have seen and is told the rest was not kept.
    async fn keep_table(
        &self,
        call_id: &str,
        agent: &str,
        tool: &str,
        args: &Value,
        output: ToolOutput,
    ) -> ToolOutput {
        let Some((dataset, shown)) = tables::take(&output, call_id, agent, tool, args) else {
            return output;
        };
        let Err(e) = self.store.put_dataset(dataset).await else {
            return shown.unwrap_or(output);
        };
        tracing::warn!(call = call_id, error = %e, "cannot keep a data set");
        let mut shown = match shown {
            Some(mut cut) => {
                cut.content.pop(); // the note naming a data set that was not kept
                cut
            }
            None => output,
        };
        shown.content.push(Content::Text(format!(
            "[Aether could not keep this table as a data set ({e}): only the rows shown here are available]"
        )));
        shown
    }
}

/// Whether a call of this tool can change nothing anywhere: a built-in that declares it
/// writes nothing and reaches no network (an upstream's tool is another server's call).
pub(crate) fn side_effect_free(entry: &Entry) -> bool {
    let meta = &entry.def().meta;
    !entry.external && meta.read_only && !meta.reaches_network
}

/// Counts a call in [`Pipeline::in_flight`] while it lives.
pub(crate) struct InFlight<'a>(&'a AtomicUsize);

impl<'a> InFlight<'a> {
    pub(crate) fn enter(count: &'a AtomicUsize) -> InFlight<'a> {
        count.fetch_add(1, Ordering::Relaxed);
        InFlight(count)
    }
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Characters held back for the marker of a cut (the marker itself is about 100).
const MARKER_ROOM: usize = 200;

/// Cuts the text blocks of `output` so that together they fit in `max_chars`.
fn bound(mut output: ToolOutput, max_chars: usize) -> ToolOutput {
    let text_chars = |c: &Content| {
        if let Content::Text(t) = c {
            t.chars().count()
        } else {
            0
        }
    };
    if output.content.iter().map(text_chars).sum::<usize>() <= max_chars {
        return output;
    }
    // Too long together. Blocks are kept whole while a marker still fits after them; the first
    // one that does not is cut, marker included, and the text blocks after it are emptied.
    // (Bounding each block by what was left but never below 200 characters let every block
    // after the budget ran out add 200 more.)
    let mut left = max_chars.max(MARKER_ROOM);
    let mut cut = false;
    for block in &mut output.content {
        let Content::Text(text) = block else { continue };
        let n = text.chars().count();
        if cut {
            text.clear();
        } else if n + MARKER_ROOM <= left {
            left -= n;
        } else {
            // This block may fit, but then what follows does not: cut it so the marker shows.
            let keep = if n > left { left } else { left - MARKER_ROOM };
            *text = aether_policy::truncate::bound_text(text, keep).into_owned();
            cut = true;
        }
    }
    output
}

fn panic_message(panic: &Box<dyn std::any::Any + Send>) -> String {
    panic
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "panic".into())
}

/// The admission receipt of a call: what runs, for whom, decided how.
pub(crate) fn receipt_of(call: &Call<'_>, entry: &Entry) -> AdmissionReceipt {
    AdmissionReceipt {
        call_id: call.id().to_string(),
        at_us: aether_store::now_us(),
        session: call.ctx.session_id.clone(),
        transport: call.ctx.transport.as_str().into(),
        agent: call.ctx.agent.name.clone(),
        tool: entry.def().name.clone(),
        definition: entry.digest.to_string(),
        arguments: call.draft().arguments_digest().to_string(),
        decision: call.decision.clone(),
    }
}
