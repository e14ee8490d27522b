//! Calls that wait for a person (step 9: a Restricted tool, or an `ask_user` rule).
//!
//! The request is recorded in the store, so an operator in another process (`aether
//! approvals`, the admin API of another replica) can decide it; the waiting call learns of the
//! decision through the store's approvals counter, which every pipeline polls. The window
//! closes with a conditional update, so an approval and the timeout cannot both win. While it
//! waits, the client hears progress (when it asked for progress) and one log message saying
//! what it waits for. An agent cannot approve: decisions come from the CLI or the admin API
//! with an operator token. The one exception is the operator's to make: an agent configured
//! with `approval = "elicit"` has the person at its MCP client asked through elicitation,
//! which is only sound where that client is an interactive app with a person in front of it
//! (a script or agent framework answering elicitations would approve its own calls); the
//! decision is recorded as the client user's.

use std::time::{Duration, Instant};

use aether_policy::agent::ApprovalRoute;
use aether_policy::decision::Step;
use aether_store::{ApprovalRequest, ApprovalRow, ApprovalState};
use aether_tools_core::{AnswerShape, Field, FieldKind, LogLevel, Question, Reply};
use serde_json::{Value, json};

use crate::admission::{Call, Stop, halted};
use crate::{CallOutcome, Entry, Pipeline};

/// What asked for a person, and why.
pub(crate) struct Ask {
    /// `tier:restricted` or `rule:NAME`.
    pub asked_by: String,
    pub reason: Option<String>,
}

impl Pipeline {
    /// Waits for a person's decision on this call. `Ok` carries who approved it and why, for
    /// the audit; `Err` is how the call ends instead (denied, expired, halted, cancelled).
    pub(crate) async fn wait_for_person(
        &self,
        call: &Call<'_>,
        entry: &Entry,
        ask: Ask,
    ) -> Result<String, Stop> {
        let (ctx, call_id, client, cancel) =
            (call.ctx, call.id(), call.client.as_ref(), &call.cancel);
        let def = entry.def();
        let window = self.approval_window;
        let shown = aether_policy::canonical_json(&call.args);
        // A client that answers in rounds is asked in rounds (when it can be asked at all;
        // else the operators decide, the request held open as for any client).
        let rounds = client.in_rounds();
        if ctx.agent.approval == ApprovalRoute::Elicit
            && rounds
            && client.can_ask("elicitation/create")
        {
            return self.approve_in_rounds(call, entry, &ask, &shown).await;
        }
        // Subscribe before the request exists, so no decision can slip between the two.
        let mut changes = self.approvals_changed.subscribe();
        self.record_request(request_of(call, entry, &ask, &shown, window))
            .await?;
        // However this wait ends (a client that goes away drops it midway), the request does
        // not stay pending for an operator to approve a call that will never run.
        let _withdraw = WithdrawOnDrop {
            store: self.store.clone(),
            id: call_id.to_string(),
        };
        let what = match &ask.reason {
            Some(reason) => format!("{} ({reason})", ask.asked_by),
            None => ask.asked_by.clone(),
        };
        client
            .log(
                LogLevel::Notice,
                json!({
                    "message": format!(
                        "{} waits for a person's approval ({what}); it is denied if nobody decides within {} s",
                        def.name,
                        window.as_secs()
                    ),
                    "call_id": call_id,
                }),
            )
            .await;
        // An agent configured for it asks the person at its own client; the operator queue
        // stays open meanwhile, and whichever decides first wins.
        let elicited = if ctx.agent.approval == ApprovalRoute::Elicit && !rounds {
            let params = elicitation(&ctx.agent.name, &def.name, &what, &shown);
            futures::future::Either::Left(Box::pin(client.elicit(params)))
        } else {
            futures::future::Either::Right(futures::future::pending())
        };
        let mut elicited = std::pin::pin!(elicited);
        let started = Instant::now();
        let deadline = tokio::time::Instant::now() + window;
        let mut tick = tokio::time::interval(Duration::from_secs(1));
        tick.tick().await;
        let settle = |to: ApprovalState, by: &str, why: &str| {
            let (store, id) = (self.store.clone(), call_id.to_string());
            let (by, why) = (by.to_string(), why.to_string());
            async move { store.settle_approval(&id, to, &by, &why, None).await }
        };
        loop {
            let row = tokio::select! {
                biased;
                _ = cancel.cancelled() => {
                    let _ = settle(ApprovalState::Cancelled, "aether", "the caller cancelled the call").await;
                    return Err(Stop::Ended(CallOutcome::Cancelled { timed_out: false }));
                }
                _ = self.shutdown.cancelled() => {
                    let _ = settle(ApprovalState::Cancelled, "aether", "Aether shut down").await;
                    return Err(Stop::Ended(CallOutcome::Cancelled { timed_out: false }));
                }
                _ = tokio::time::sleep_until(deadline) => {
                    settle(ApprovalState::Expired, "aether", "nobody decided within the approval window").await
                }
                changed = changes.changed() => {
                    if changed.is_err() {
                        return Err(Stop::Ended(CallOutcome::Failed("the approval watcher stopped".into())));
                    }
                    self.store.approval(call_id).await.and_then(|row| {
                        row.ok_or_else(|| aether_store::StoreError::Invalid("the approval request vanished".into()))
                    })
                }
                answer = &mut elicited => {
                    // Asked once: from here on, only the operator queue decides.
                    elicited.set(futures::future::Either::Right(futures::future::pending()));
                    let answer = match answer {
                        Ok(answer) => answer,
                        Err(e) => {
                            tracing::info!(call = call_id, error = %e, "the client cannot ask its user; an operator decides");
                            continue;
                        }
                    };
                    let (to, why) = elicitation_decision(&answer);
                    // An operator may have decided first; the row says who won.
                    let _ = settle(to, "client-user (elicitation)", &why).await;
                    self.store.approval(call_id).await.and_then(|row| {
                        row.ok_or_else(|| aether_store::StoreError::Invalid("the approval request vanished".into()))
                    })
                }
                _ = tick.tick() => {
                    let waited = started.elapsed().as_secs_f64();
                    client
                        .progress(
                            waited,
                            Some(window.as_secs_f64()),
                            Some(format!(
                                "waiting for a person's approval: {} s left",
                                window.as_secs().saturating_sub(waited as u64)
                            )),
                        )
                        .await;
                    continue;
                }
            };
            let row = match row {
                Ok(row) => row,
                Err(e) => {
                    // Not knowing the decision is never an approval.
                    let _ = settle(
                        ApprovalState::Cancelled,
                        "aether",
                        "the decision could not be read",
                    )
                    .await;
                    return Err(Stop::Ended(CallOutcome::Failed(format!(
                        "the approval could not be read from the store, so the call did not run: {e}"
                    ))));
                }
            };
            if let Some(outcome) = decided(&row, &def.name) {
                return outcome;
            }
        }
    }
}

/// What a round's approval question goes under, and the request it asks about is kept under.
const ROUND_KEY: &str = "aether/approval";

/// The most approval requests one agent may have waiting on its user in rounds at once.
pub const MAX_ASKED_IN_ROUNDS: usize = 32;

impl Pipeline {
    /// Records a request for a person's decision; `Err` is how the call ends when it cannot
    /// be (halted, or the store failing).
    async fn record_request(&self, request: ApprovalRequest) -> Result<(), Stop> {
        match self.store.request_approval(request).await {
            Ok(None) => Ok(()),
            Ok(Some(halt)) => Err(halted(Some(halt.why.as_deref().unwrap_or_default())).into()),
            Err(e) => Err(Stop::Ended(CallOutcome::Failed(format!(
                "the call needs a person's approval, and the request could not be recorded, so it did not run: {e}"
            )))),
        }
    }

    /// `approval = "elicit"` for a client that answers in rounds (2026-07-28), instead of a
    /// request held open: the first round records the request (operators see it, and may
    /// decide it) and ends the call asking the client's user; the next round brings the
    /// answer, with the request's id in the state this server sealed for this same call, and
    /// settles the request: only while it is pending, so an answer counts once and a round
    /// played again runs nothing. An answer without that state approves nothing.
    async fn approve_in_rounds(
        &self,
        call: &Call<'_>,
        entry: &Entry,
        ask: &Ask,
        shown: &str,
    ) -> Result<String, Stop> {
        let (ctx, client, def) = (call.ctx, call.client.as_ref(), entry.def());
        let window = self.approval_window;
        let what = match &ask.reason {
            Some(reason) => format!("{} ({reason})", ask.asked_by),
            None => ask.asked_by.clone(),
        };
        let question = || elicitation(&ctx.agent.name, &def.name, &what, shown);
        let asked = |id: &str| {
            client.remember(ROUND_KEY, json!(id));
            Stop::refused(
                Step::Tier,
                format!("approval:asked ({})", ask.asked_by),
                format!(
                    "{} needs the approval of the person at the client: they are asked, and the call is made again with their answer within {} s",
                    def.name,
                    window.as_secs()
                ),
            )
        };
        let earlier = client
            .recall(ROUND_KEY)
            .and_then(|id| id.as_str().map(str::to_string));
        let Some(id) = earlier else {
            // No request is held open to bound how many wait: an agent may have only so many
            // questions out to its user at once.
            let waiting = match self.store.approvals(true, MAX_ASKED_IN_ROUNDS * 8).await {
                Ok(rows) => rows
                    .iter()
                    .filter(|r| {
                        r.request.agent == ctx.agent.name
                            && r.request.expires_at_us > aether_store::now_us()
                    })
                    .count(),
                Err(e) => {
                    return Err(Stop::Ended(CallOutcome::Failed(format!(
                        "the call needs a person's approval, and the requests waiting could not be read, so it did not run: {e}"
                    ))));
                }
            };
            if waiting >= MAX_ASKED_IN_ROUNDS {
                return Err(Stop::refused(
                    Step::Tier,
                    format!("approval:too-many ({})", ask.asked_by),
                    format!(
                        "{} needs its user's approval, and {waiting} requests of agent {:?} already wait for one; answer those (or let them expire) first",
                        def.name, ctx.agent.name
                    ),
                ));
            }
            self.record_request(request_of(call, entry, ask, shown, window))
                .await?;
            // Asked: the round ends with the question (an answer sent with no state, for a
            // request never asked, is not one).
            let _ = client.elicit_as(ROUND_KEY, question()).await;
            return Err(asked(call.id()));
        };
        let Ok(reply) = client.elicit_as(ROUND_KEY, question()).await else {
            // Not answered (or not as asked): asked again, about the same request.
            return Err(asked(&id));
        };
        let row = match self.store.approval(&id).await {
            Ok(Some(row)) => row,
            Ok(None) => {
                return Err(Stop::refused(
                    Step::Tier,
                    "approval:unknown",
                    format!(
                        "{}'s approval request {id} is not in the store; make the call again to be asked anew",
                        def.name
                    ),
                ));
            }
            Err(e) => {
                return Err(Stop::Ended(CallOutcome::Failed(format!(
                    "the approval could not be read from the store, so the call did not run: {e}"
                ))));
            }
        };
        // The sealed state binds agent, tool and arguments; the request must name the same.
        let request = &row.request;
        if request.agent != ctx.agent.name
            || request.tool != def.name
            || request.definition != entry.digest.to_string()
            || request.arguments_digest != call.draft().arguments_digest().to_string()
        {
            return Err(Stop::refused(
                Step::Tier,
                "approval:mismatch",
                format!(
                    "the answer is for another call than this {} (agent, definition or arguments differ); make the call again to be asked anew",
                    def.name
                ),
            ));
        }
        let (to, why) = elicitation_decision(&reply);
        match self
            .store
            .settle_approval(&id, to, "client-user (input required)", &why, None)
            .await
        {
            Ok(row) => decided(&row, &def.name).unwrap_or_else(|| {
                Err(Stop::Ended(CallOutcome::Failed(
                    "the approval is still pending after it was answered".into(),
                )))
            }),
            Err(e) => Err(Stop::refused(
                Step::Tier,
                format!("approval:settled ({})", ask.asked_by),
                format!(
                    "{} did not run: {e}; an answer counts once: make the call again to be asked anew",
                    def.name
                ),
            )),
        }
    }
}

/// The request a person decides: the call whole (a person approves what will run, not a head
/// an agent could pad past), open for `window`.
fn request_of(
    call: &Call<'_>,
    entry: &Entry,
    ask: &Ask,
    shown: &str,
    window: Duration,
) -> ApprovalRequest {
    let (ctx, def) = (call.ctx, entry.def());
    let now = aether_store::now_us();
    ApprovalRequest {
        id: call.id().to_string(),
        requested_at_us: now,
        expires_at_us: now + window.as_micros() as i64,
        session: ctx.session_id.clone(),
        transport: ctx.transport.as_str().into(),
        agent: ctx.agent.name.clone(),
        team: ctx.agent.team.clone(),
        project: ctx.agent.project.clone(),
        tool: def.name.clone(),
        tier: def.tier.as_str().into(),
        definition: entry.digest.to_string(),
        arguments: shown.to_string(),
        arguments_digest: call.draft().arguments_digest().to_string(),
        asked_by: ask.asked_by.clone(),
        reason: ask.reason.clone(),
    }
}

/// What the person at an agent's client is asked (`approval = "elicit"`).
fn elicitation(agent: &str, tool: &str, what: &str, shown: &str) -> Question {
    let field = |name: &str, title: &str, kind, required| Field {
        name: name.into(),
        title: title.into(),
        kind,
        required,
    };
    Question {
        message: format!(
            "Aether: agent {agent:?} wants to run {tool} ({what}) with these arguments:\n{}\nApprove?",
            aether_policy::truncate::bound_text(shown, 2_000)
        ),
        answer: AnswerShape::Fields(vec![
            field("approve", "Approve this call", FieldKind::YesNo, true),
            field("why", "Why (recorded in the audit)", FieldKind::Text, false),
        ]),
    }
}

/// Settles a request as cancelled when its wait ends; a request already decided is left as
/// it is (the store only moves a pending one).
struct WithdrawOnDrop {
    store: aether_store::Store,
    id: String,
}

impl Drop for WithdrawOnDrop {
    fn drop(&mut self) {
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let (store, id) = (self.store.clone(), std::mem::take(&mut self.id));
        runtime.spawn(async move {
            let _ = store
                .settle_approval(
                    &id,
                    ApprovalState::Cancelled,
                    "aether",
                    "the call stopped waiting",
                    None,
                )
                .await;
        });
    }
}

/// The call's fate once its row is no longer pending; `None` while it is.
fn decided(row: &ApprovalRow, tool: &str) -> Option<Result<String, Stop>> {
    let by = row.decided_by.clone().unwrap_or_else(|| "unknown".into());
    let why = row.why.clone().unwrap_or_default();
    Some(match row.state {
        ApprovalState::Pending => return None,
        ApprovalState::Approved => Ok(format!("approved by {by}: {why}")),
        ApprovalState::Denied => Err(Stop::refused(
            Step::Tier,
            format!("approval:denied ({})", row.request.asked_by),
            format!("{tool} was denied by {by}: {why}"),
        )),
        ApprovalState::Expired => Err(Stop::refused(
            Step::Tier,
            format!("approval:expired ({})", row.request.asked_by),
            format!(
                "{tool} needed a person's approval and nobody decided in time, so it was denied"
            ),
        )),
        ApprovalState::Cancelled => Err(Stop::Ended(CallOutcome::Cancelled { timed_out: false })),
    })
}

/// An elicitation answer as a decision: only an explicit `accept` with `approve: true`
/// approves.
fn elicitation_decision(reply: &Reply) -> (ApprovalState, String) {
    let content = match reply {
        Reply::Accepted(content) => Some(content),
        _ => None,
    };
    let approve = content
        .and_then(|c| c.get("approve"))
        .and_then(Value::as_bool)
        == Some(true);
    let why: String = content
        .and_then(|c| c.get("why"))
        .and_then(Value::as_str)
        .unwrap_or("")
        .chars()
        .take(1_000)
        .collect();
    if approve {
        (ApprovalState::Approved, why)
    } else {
        (
            ApprovalState::Denied,
            format!(
                "the client's user did not approve ({}) {why}",
                reply.action()
            ),
        )
    }
}
