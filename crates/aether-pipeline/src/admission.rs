//! Admission: a call's way through the steps of SPEC §2, one function per step, in order.
//!
//! [`Pipeline::call_with`] makes the [`Call`] in flight (its audit row started, written
//! whatever happens to it), and [`Pipeline::steps`] walks it: each step either lets it on,
//! having learned something about it (the tool, the arguments, the rules' verdict, who
//! approved it), or stops it with a [`Stop`]. The order is [`STEPS`], which a test holds the
//! code, the `Step` enum and the module doc of `lib.rs` to. The receipt and the run (steps 11
//! and 12) are in `execution.rs`; step 13, the audit row, is written by `call_with` for every
//! outcome (`audit.rs`).

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Instant;

use aether_policy::decision::{Refusal, Step};
use aether_policy::dlp::Finding;
use aether_policy::{Hidden, Offer, Tier};
use aether_store::IdempotencyClaim;
use aether_tools_core::{ClientLink, Content, ToolOutput};
use serde_json::{Map, Value};
use tokio_util::sync::CancellationToken;

use crate::approval::Ask;
use crate::envelope::{self, Envelope};
use crate::execution::InFlight;
use crate::spans::CallSpans;
use crate::{CallOutcome, CallResult, Entry, Pipeline, SessionContext, audit, destinations};

/// The steps a call is judged by, in the order they run (SPEC §2; step 1, the session
/// context, is the transport's, and 12 and 13, the run and its audit row, follow).
pub const STEPS: [Step; 12] = [
    Step::Halt,
    Step::UnknownTool,
    Step::Registry,
    Step::Connection,
    Step::Capability,
    Step::Rate,
    Step::Arguments,
    Step::Rules,
    Step::Egress,
    Step::Tier,
    Step::Envelope,
    Step::Receipt,
];

/// Why a call goes no further: a step refused it, or it ended early with an outcome of its
/// own (a replayed result, a cancellation while it waited, a failure of Aether's).
#[derive(Debug)]
pub(crate) enum Stop {
    Refused(Refusal),
    Ended(CallOutcome),
}

impl From<Refusal> for Stop {
    fn from(refusal: Refusal) -> Stop {
        Stop::Refused(refusal)
    }
}

impl Stop {
    pub(crate) fn refused(step: Step, rule: impl Into<String>, reason: impl Into<String>) -> Stop {
        Stop::Refused(Refusal::new(step, rule, reason))
    }

    fn into_outcome(self) -> CallOutcome {
        match self {
            Stop::Refused(refusal) => CallOutcome::Refused(refusal),
            Stop::Ended(outcome) => outcome,
        }
    }
}

/// The refusal of a call that meets a halt: the same words whichever check meets it (the
/// flag, the receipt's transaction, a wait for a person, a read). `why` is the operator's,
/// when it could be read.
pub(crate) fn halted(why: Option<&str>) -> Refusal {
    let reason = match why {
        Some(why) => format!(
            "Aether is halted by an operator ({why}); no calls are admitted until it is resumed"
        ),
        None => "Aether is halted by an operator; no calls are admitted until it is resumed".into(),
    };
    Refusal::new(Step::Halt, "halt", reason)
}

/// A call in flight: who asked for what, and what the steps have learned of it so far. Its
/// audit row is filled in as it goes; if the call is dropped midway (a client that went away
/// without a cancellation, a server shutting down) the row is written as cancelled, from a
/// task of its own, so that no admitted call is left with a receipt and no audit row.
pub(crate) struct Call<'a> {
    pub ctx: &'a SessionContext,
    /// The name the caller asked for (its own text until the catalog knows it).
    pub tool_name: &'a str,
    pub envelope: &'a Envelope,
    pub client: Arc<dyn ClientLink>,
    pub cancel: CancellationToken,
    /// The arguments: as sent, then with the operator's defaults (step 6).
    pub args: Value,
    /// A credential found in the arguments of a tool that reaches the network (step 6 looks,
    /// so that whichever step refuses, the audit keeps none; step 8 refuses).
    pub leak: Option<Finding>,
    /// Who must approve before it runs (step 7's `ask_user`, step 9's tier or tool), if anyone.
    pub ask: Option<Ask>,
    /// An operator's `always_allow` rule admitted it in advance (no person is asked).
    pub allowed_by_rule: bool,
    /// The receipt's decision: admitted, allowed by a rule, or who approved it.
    pub decision: String,
    /// The idempotency key this call claimed (settled with its result when it ends).
    pub claimed: Option<String>,
    /// Its place among its agent's calls in flight (given back when the call is dropped).
    permit: Option<crate::rates::Permit>,
    /// The receipt, when it rides the tool's first journal commit (step 11).
    pub riding: Option<Arc<aether_policy::journal::PendingReceipt>>,
    /// Its spans (none when telemetry is off).
    pub spans: CallSpans,
    draft: Option<audit::Draft>,
    store: aether_store::Store,
    started: Instant,
}

impl Call<'_> {
    pub fn id(&self) -> &str {
        self.draft().call_id()
    }

    pub fn draft(&self) -> &audit::Draft {
        self.draft
            .as_ref()
            .expect("the draft is taken only when the call ends")
    }

    pub fn draft_mut(&mut self) -> &mut audit::Draft {
        self.draft
            .as_mut()
            .expect("the draft is taken only when the call ends")
    }

    /// Keeps the arguments (their digest, and their text as the tier says) in the audit row;
    /// returns their size as JSON, in bytes.
    pub fn record_arguments(&mut self, tier: Tier) -> usize {
        let draft = self
            .draft
            .as_mut()
            .expect("the draft is taken only when the call ends");
        draft.arguments(&self.args, tier)
    }
}

impl Drop for Call<'_> {
    fn drop(&mut self) {
        let Some(draft) = self.draft.take() else {
            return;
        };
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            tracing::error!(
                call = draft.call_id(),
                "call dropped outside a runtime; its audit row is lost"
            );
            return;
        };
        let (store, elapsed) = (self.store.clone(), self.started.elapsed());
        runtime.spawn(async move {
            draft
                .finish(
                    &store,
                    CallOutcome::Cancelled { timed_out: false },
                    elapsed,
                    false,
                )
                .await;
        });
    }
}

impl Pipeline {
    /// Runs one call through every step. Never panics; every outcome is audited.
    pub async fn call(
        &self,
        ctx: &SessionContext,
        tool_name: &str,
        arguments: Option<Map<String, Value>>,
        client: Arc<dyn ClientLink>,
        cancel: CancellationToken,
    ) -> CallResult {
        self.call_with(
            ctx,
            tool_name,
            arguments,
            Envelope::default(),
            client,
            cancel,
        )
        .await
    }

    /// [`Pipeline::call`] with the caller's command envelope (confirmation, idempotency key,
    /// issue and expiry times: [`envelope::Envelope`]).
    pub async fn call_with(
        &self,
        ctx: &SessionContext,
        tool_name: &str,
        arguments: Option<Map<String, Value>>,
        envelope: Envelope,
        client: Arc<dyn ClientLink>,
        cancel: CancellationToken,
    ) -> CallResult {
        let _in_flight = InFlight::enter(&self.in_flight);
        let started = Instant::now();
        let args = Value::Object(arguments.unwrap_or_default());
        let mut call = self.start(ctx, tool_name, &envelope, args, client, cancel);
        let outcome = self
            .steps(&mut call)
            .await
            .unwrap_or_else(Stop::into_outcome);
        self.settle_idempotency(&call, &outcome).await;
        let result = self.finish(call, outcome).await;
        // Only tools of the catalog get their own label: an unknown name is the caller's text.
        let label = if self.catalog().get(tool_name).is_some() {
            tool_name
        } else {
            "(unknown)"
        };
        self.metrics
            .record(label, &result.outcome, started.elapsed().as_secs_f64());
        result
    }

    /// A call in flight, its audit row begun.
    pub(crate) fn start<'a>(
        &self,
        ctx: &'a SessionContext,
        tool_name: &'a str,
        envelope: &'a Envelope,
        args: Value,
        client: Arc<dyn ClientLink>,
        cancel: CancellationToken,
    ) -> Call<'a> {
        let call_id = uuid::Uuid::now_v7().to_string();
        let known = self.tracer.is_some() && self.catalog().get(tool_name).is_some();
        let spans = CallSpans::start(
            &self.tracer,
            envelope.trace.as_deref(),
            ctx,
            tool_name,
            known,
            &call_id,
        );
        Call {
            ctx,
            tool_name,
            envelope,
            client,
            cancel,
            args,
            leak: None,
            ask: None,
            allowed_by_rule: false,
            decision: "admitted".into(),
            claimed: None,
            permit: None,
            riding: None,
            draft: Some(audit::Draft::new(&call_id, ctx, tool_name).traced(spans.recorded())),
            spans,
            store: self.store.clone(),
            started: Instant::now(),
        }
    }

    /// Step 13, the audit row, durable before the caller hears the outcome (which is a failure if
    /// the row could not be written).
    pub(crate) async fn finish(&self, mut call: Call<'_>, outcome: CallOutcome) -> CallResult {
        let draft = call.draft.take().expect("the draft is taken only here");
        let spans = std::mem::replace(&mut call.spans, CallSpans::off());
        let call_id = draft.call_id().to_string();
        let alone = self.alone().await;
        let audit = spans.step("audit");
        let outcome = draft
            .finish(&self.store, outcome, call.started.elapsed(), alone)
            .await;
        drop(audit);
        spans.end(&outcome);
        CallResult { call_id, outcome }
    }

    /// Steps 2 to 12, in SPEC order ([`STEPS`]): the outcome of the run, or where and why the
    /// call stopped.
    async fn steps(&self, call: &mut Call<'_>) -> Result<CallOutcome, Stop> {
        // Steps 2 to 6 check what is in memory: no spans of their own (a refusal among them is
        // named by the call's span).
        self.halt(call).await?;
        let entry = self.look_up(call)?;
        self.registry_step(call, &entry)?;
        connection(call, &entry)?;
        capability(call, &entry)?;
        self.rate(call).await?;
        self.arguments(call, &entry)?;
        let rules = call.spans.step("rules");
        self.rules_step(call, &entry)?;
        drop(rules);
        if entry.def().meta.reaches_network {
            let _egress = call.spans.step("egress");
            egress(call, &entry)?;
        }
        self.tier_gate(call, &entry).await?;
        self.envelope(call, &entry).await?;
        self.receipt(call, &entry).await?;
        Ok(self.run(call, &entry).await)
    }

    /// Step 2, halt: refused while an operator has halted Aether (or it is shutting down). The
    /// fast check; the receipt's transaction makes it exact.
    async fn halt(&self, _call: &mut Call<'_>) -> Result<(), Stop> {
        if self.shutdown.is_cancelled() {
            return Err(Stop::refused(
                Step::Halt,
                "shutdown",
                "Aether is shutting down; no calls are admitted",
            ));
        }
        if !self.halted.load(Ordering::Relaxed) {
            return Ok(());
        }
        // The flag may be stale: a receipt that meets a halt sets it, and only the watch
        // clears it, so a pipeline nobody watches would refuse every call forever after a
        // resume. The store is authoritative: ask it before refusing (one read, and only
        // while the flag is up).
        match self.store.halt_state().await {
            Ok(state) if !state.halted => {
                self.halted.store(false, Ordering::Relaxed);
                Ok(())
            }
            Ok(state) => Err(halted(Some(state.why.as_deref().unwrap_or_default())).into()),
            Err(_) => Err(halted(None).into()),
        }
    }

    /// The tool, by name: an unknown one is refused before anything else is looked at
    /// (`mcp-tool-not-implemented`).
    fn look_up(&self, call: &mut Call<'_>) -> Result<Arc<Entry>, Stop> {
        let Some(entry) = self.catalog().get(call.tool_name).cloned() else {
            return Err(Stop::refused(
                Step::UnknownTool,
                "catalog",
                format!(
                    "no tool named {:?}",
                    call.tool_name.chars().take(128).collect::<String>()
                ),
            ));
        };
        call.draft_mut().tool_known(entry.def(), entry.digest);
        call.spans.tool_known(&entry.def().group);
        Ok(entry)
    }

    /// Step 3, registry: approved, and the definition approved is the one served.
    fn registry_step(&self, call: &Call<'_>, entry: &Entry) -> Result<(), Stop> {
        let def = entry.def();
        self.registry()
            .admits(&def.name, entry.digest)
            .map_err(|hidden| registry_refusal(&hidden, &def.name, &call.ctx.agent.name).into())
    }

    /// Step 5b, rate limits: the agent's calls per window (all its callers, each caller, this
    /// tool) and in flight; a refused call counts nowhere.
    async fn rate(&self, call: &mut Call<'_>) -> Result<(), Stop> {
        call.permit = self
            .rates
            .admit(call.ctx, call.tool_name, aether_store::now_us())
            .await?;
        Ok(())
    }

    /// Step 6, arguments: the operator's defaults fill what the caller left out; the limits every
    /// tool shares (before anything reads them further); a network tool's credential scan
    /// (the audit keeps no arguments that carry one, whichever step refuses); the schema.
    fn arguments(&self, call: &mut Call<'_>, entry: &Entry) -> Result<(), Stop> {
        let def = entry.def();
        if let (Some(defaults), Value::Object(args)) =
            (call.ctx.agent.arg_defaults.get(&def.name), &mut call.args)
        {
            for (k, v) in defaults {
                args.entry(k.clone()).or_insert_with(|| v.clone());
            }
        }
        let size = call.record_arguments(def.tier);
        // A call refused for its limits is not scanned for credentials, so its arguments are
        // not kept either (the row keeps their digest).
        if size as u64 > self.limits.argument_bytes {
            call.draft_mut().withhold_arguments("limits:arguments");
            return Err(Stop::refused(
                Step::Arguments,
                "limits:arguments",
                format!(
                    "the arguments are {size} bytes, more than the {} a call may carry (limits.argument_bytes)",
                    self.limits.argument_bytes
                ),
            ));
        }
        if let Some((rule, why)) = crate::limits::arguments_out_of_bounds(def, &call.args) {
            call.draft_mut().withhold_arguments(rule);
            return Err(Stop::refused(Step::Arguments, rule, why));
        }
        if def.meta.reaches_network {
            // Together with the pieces the agent sent in its recent calls (any session of
            // its): a credential sent a piece per call is found when its last piece would leave.
            call.leak = self.scan_with_recent(&call.ctx.agent.name, &call.args);
            if let Some(finding) = &call.leak {
                let rule = finding.rule;
                call.draft_mut().withhold_arguments(rule);
            }
        }
        self.catalog()
            .validate(&def.name, &call.args)
            .map_err(|problems| {
                Stop::refused(
                    Step::Arguments,
                    "schema",
                    format!(
                        "the arguments do not match {}'s input schema: {problems}",
                        def.name
                    ),
                )
            })
    }

    /// The credential scan of a network call's arguments, with the pieces its agent sent
    /// recently (one agent's calls take turns here; other agents' do not wait).
    fn scan_with_recent(&self, agent: &str, args: &Value) -> Option<Finding> {
        let recent = self
            .fragments
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .entry(agent.to_string())
            .or_default()
            .clone();
        let mut recent = recent.lock().unwrap_or_else(|e| e.into_inner());
        recent.scan_json(aether_policy::dlp::Scanner::shared(), Instant::now(), args)
    }

    /// Step 7, the operator's rules: `always_deny` refuses, `ask_user` asks a person (step 9),
    /// `always_allow` admits without one.
    fn rules_step(&self, call: &mut Call<'_>, entry: &Entry) -> Result<(), Stop> {
        let def = entry.def();
        let rules = self.rules.current();
        let Some(v) = self.verdict(&rules, call.ctx, def, &call.args) else {
            return Ok(());
        };
        let rule = format!("rule:{}", v.rule);
        call.draft_mut().matched_rule(&rule);
        match v.action {
            aether_policy::rules::Action::AlwaysDeny => {
                return Err(destinations::denial(&v, def).into());
            }
            aether_policy::rules::Action::AskUser => {
                call.ask = Some(Ask {
                    asked_by: rule,
                    reason: v.reason.map(String::from),
                });
            }
            aether_policy::rules::Action::AlwaysAllow => {
                call.allowed_by_rule = true;
                call.decision = format!("allowed by {rule}");
            }
        }
        Ok(())
    }

    /// Step 9, tier gate: a Restricted tool (or an `ask_user` rule, or the tool's own judgement of
    /// these arguments) waits for a person, unless an `always_allow` rule admitted it. After
    /// the wait, the registry and the rules are asked again on fresh facts.
    async fn tier_gate(&self, call: &mut Call<'_>, entry: &Entry) -> Result<(), Stop> {
        let def = entry.def();
        if !call.allowed_by_rule && call.ask.is_none() {
            if def.tier == Tier::Restricted {
                call.ask = Some(Ask {
                    asked_by: "tier:restricted".into(),
                    reason: None,
                });
            } else if let Some(why) = entry.tool.needs_person(&call.args) {
                call.ask = Some(Ask {
                    asked_by: format!("tool:{}", def.name),
                    reason: Some(why),
                });
            }
        }
        let Some(ask) = call.ask.take() else {
            return Ok(());
        };
        let waiting = call.spans.step("approval");
        let waited = self.wait_for_person(call, entry, ask).await;
        drop(waiting);
        let note = match waited {
            Ok(note) => note,
            Err(stop) => {
                match &stop {
                    Stop::Ended(CallOutcome::Cancelled { .. }) => call
                        .draft_mut()
                        .stopped_at(Step::Tier, "approval:cancelled"),
                    Stop::Ended(CallOutcome::Failed(_)) => {
                        call.draft_mut().stopped_at(Step::Tier, "approval:failed")
                    }
                    _ => {}
                }
                return Err(stop);
            }
        };
        // The wait may have been long: what was true when the call asked may not be now. The
        // definition too: an upstream that changed its tool while the call waited has the new
        // one in the catalog, held back until approved, and the call (approved for the old
        // one) does not run on it.
        let admitted = match self.catalog().get(&def.name).map(|e| e.digest) {
            Some(digest) if digest != entry.digest => Err(Hidden::DefinitionChanged),
            Some(_) => self.registry().admits(&def.name, entry.digest),
            None => Err(Hidden::Withdrawn),
        };
        if let Err(hidden) = admitted {
            return Err(registry_refusal(&hidden, &def.name, &call.ctx.agent.name).into());
        }
        if let Some(refusal) = self.denied_now(call.ctx, def, &call.args) {
            return Err(refusal.into());
        }
        call.draft_mut().approved(&note);
        call.decision = note;
        Ok(())
    }

    /// Step 10, the command envelope: well-formed, not expired (a wait for a person counts), from
    /// no future, confirmed where the tool needs it; an idempotency key's repeat gets the
    /// first call's result instead of running again.
    async fn envelope(&self, call: &mut Call<'_>, entry: &Entry) -> Result<(), Stop> {
        let def = entry.def();
        let envelope = call.envelope;
        if let Some(problem) = &envelope.problem {
            return Err(Stop::refused(
                Step::Envelope,
                "envelope:malformed",
                format!("the call's envelope (_meta) is malformed: {problem}"),
            ));
        }
        let now = aether_store::now_us();
        if let Some(expires) = envelope.expires_at_us
            && expires <= now
        {
            return Err(Stop::refused(
                Step::Envelope,
                "envelope:expired",
                format!(
                    "the call's envelope expired {} s ago (aether/expiresAt); nothing ran",
                    (now - expires) / 1_000_000
                ),
            ));
        }
        if let Some(issued) = envelope.issued_at_us
            && issued > now + envelope::ISSUED_SKEW_US
        {
            return Err(Stop::refused(
                Step::Envelope,
                "envelope:future",
                "the call's envelope says it was issued in the future (aether/issuedAt); check the caller's clock",
            ));
        }
        // A Restricted tool waited for a person: that is its explicit confirmation. Any other
        // tool that needs one gets it from the caller's envelope. An explicit "no" stops either.
        if def.meta.needs_confirmation && !envelope.confirm.unwrap_or(def.tier == Tier::Restricted)
        {
            return Err(Stop::refused(
                Step::Envelope,
                "envelope:unconfirmed",
                format!(
                    "{} needs an explicit confirmation: send the call with _meta {{\"aether/confirm\": true}}",
                    def.name
                ),
            ));
        }
        match &envelope.idempotency_key {
            Some(key) => {
                // The claim is a store round trip: a span of its own.
                let _span = call.spans.step("envelope");
                self.claim_idempotency(call, entry, key, now).await
            }
            None => Ok(()),
        }
    }

    /// Claims an idempotency key for this call, or ends it with the first call's result.
    async fn claim_idempotency(
        &self,
        call: &mut Call<'_>,
        entry: &Entry,
        key: &str,
        now: i64,
    ) -> Result<(), Stop> {
        let digest = call.draft().arguments_digest().to_string();
        let claim = self
            .store
            .claim_idempotency(
                &call.ctx.owner(),
                &entry.def().name,
                key,
                &digest,
                call.id(),
                now - envelope::IDEMPOTENCY_RETENTION_US,
            )
            .await;
        match claim {
            Ok(IdempotencyClaim::Claimed) => {
                call.claimed = Some(key.to_string());
                Ok(())
            }
            Ok(IdempotencyClaim::Done { call_id, result }) => {
                match serde_json::from_str::<ToolOutput>(&result) {
                    Ok(mut out) => {
                        call.draft_mut()
                            .stopped_at(Step::Envelope, "idempotency:replayed");
                        out.content.push(Content::Text(format!(
                            "[the result of call {call_id}, which had this idempotency key; nothing ran again]"
                        )));
                        Err(Stop::Ended(CallOutcome::Ran(out)))
                    }
                    Err(e) => Err(Stop::Ended(CallOutcome::Failed(format!(
                        "the result kept for idempotency key {key:?} is unreadable: {e}"
                    )))),
                }
            }
            Ok(IdempotencyClaim::Running { call_id }) => Err(Stop::refused(
                Step::Envelope,
                "idempotency:running",
                format!(
                    "call {call_id} with this idempotency key is still running; ask again when it has ended"
                ),
            )),
            Ok(IdempotencyClaim::OtherArguments { call_id }) => Err(Stop::refused(
                Step::Envelope,
                "idempotency:other-arguments",
                format!(
                    "this idempotency key was used by call {call_id} with other arguments; use a new key"
                ),
            )),
            Err(e) => Err(Stop::Ended(CallOutcome::Failed(format!(
                "the idempotency key could not be checked, so the call did not run: {e}"
            )))),
        }
    }

    /// A key this call claimed keeps its result (a repeat gets it), or is let go if the call
    /// did not run (a retry may run it).
    async fn settle_idempotency(&self, call: &Call<'_>, outcome: &CallOutcome) {
        let Some(key) = &call.claimed else { return };
        let result = match outcome {
            // A call that ended asking its client is made again with the answer: that one's
            // result is the key's.
            CallOutcome::Ran(out) if !call.client.asking() => serde_json::to_string(out).ok(),
            _ => None,
        };
        if let Err(e) = self
            .store
            .settle_idempotency(&call.ctx.owner(), call.tool_name, key, call.id(), result)
            .await
        {
            tracing::warn!(call = %call.id(), error = %e, "cannot settle an idempotency key");
        }
    }
}

/// Step 4, connection layer: the agent reaches the tool's group.
fn connection(call: &Call<'_>, entry: &Entry) -> Result<(), Stop> {
    match call.ctx.agent.offer(entry.def(), &call.ctx.groups) {
        Offer::Hidden(hidden @ Hidden::GroupNotAllowed { .. }) => Err(Stop::refused(
            Step::Connection,
            Step::Connection.as_str(),
            hidden.explain(&entry.def().name, &call.ctx.agent.name),
        )),
        _ => Ok(()),
    }
}

/// Step 5, capability layer: the agent's tool list names the tool, and the tool is of use to it.
fn capability(call: &Call<'_>, entry: &Entry) -> Result<(), Stop> {
    let (def, agent) = (entry.def(), &call.ctx.agent);
    if let Offer::Hidden(hidden) = agent.offer(def, &call.ctx.groups) {
        return Err(Stop::refused(
            Step::Capability,
            Step::Capability.as_str(),
            hidden.explain(&def.name, &agent.name),
        ));
    }
    if let Some(Err(hidden)) = call.ctx.scope.as_ref().map(|s| s.check(def)) {
        return Err(Stop::refused(
            Step::Capability,
            "scope",
            hidden.explain(&def.name, &agent.name),
        ));
    }
    entry.tool.available_to(agent).map_err(|why| {
        Stop::refused(
            Step::Capability,
            "unavailable",
            Hidden::Unavailable { why }.explain(&def.name, &agent.name),
        )
    })
}

/// Step 8, egress and DLP, for every tool that can reach the network: no credential leaves in its
/// arguments (raw or encoded; found at step 6), and every URL it names is one this agent may
/// reach. The tool's client checks each hop again, resolves once and connects only to the
/// vetted address. (Other tools have nothing to check here.)
fn egress(call: &mut Call<'_>, entry: &Entry) -> Result<(), Stop> {
    let leak = call.leak.take();
    destinations::egress_check(call.ctx, entry.def(), &call.args, leak).map_err(|refusal| {
        // What was refused may be a secret: the audit keeps the rule, not the arguments.
        call.draft_mut().withhold_arguments(&refusal.rule);
        Stop::Refused(refusal)
    })
}

/// The registry's refusal of `tool` for `agent`.
fn registry_refusal(hidden: &Hidden, tool: &str, agent: &str) -> Refusal {
    let rule = match hidden {
        Hidden::Unapproved => "unapproved",
        Hidden::Withdrawn => "withdrawn",
        Hidden::DefinitionChanged => "definition-changed",
        _ => "hidden",
    };
    Refusal::new(
        Step::Registry,
        format!("registry:{rule}"),
        hidden.explain(tool, agent),
    )
}
