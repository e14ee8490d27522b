//! What each session is offered: its context built from the agent, the same checks as a
//! call's steps 3 to 5 and the rules' outright denials (offered equals runnable), and the
//! catalog as it changes when an upstream lists its tools again.

use std::sync::Arc;

use aether_policy::{Hidden, Offer};
use aether_store::BuiltinDefinition;
use aether_tools_core::Tool;
use serde_json::Value;

use crate::{Entry, Pipeline, PipelineError, SessionContext, Transport, screening};

impl Pipeline {
    /// The session context for `agent` on `transport`.
    pub fn session(
        &self,
        agent: &str,
        transport: Transport,
        session_id: String,
    ) -> Result<SessionContext, PipelineError> {
        let profile =
            self.agents
                .get(agent)
                .cloned()
                .ok_or_else(|| PipelineError::UnknownAgent {
                    name: agent.to_string(),
                    known: self.agents.keys().cloned().collect::<Vec<_>>().join(", "),
                })?;
        let catalog = self.catalog();
        let groups = profile.groups(|name| catalog.get(name).map(|t| t.def().group.as_str()));
        Ok(SessionContext {
            session_id,
            transport,
            agent: profile,
            groups: Arc::new(groups),
            subject: None,
            scope: None,
            token: None,
        })
    }

    /// Whether `def` is offered to this session, and if not, why not. The same checks, in the
    /// same order, as a call's steps 3–5: offered equals runnable.
    pub fn offer(&self, ctx: &SessionContext, entry: &Entry) -> Offer {
        if let Err(hidden) = self.registry().admits(&entry.def().name, entry.digest) {
            return Offer::Hidden(hidden);
        }
        match ctx.agent.offer(entry.def(), &ctx.groups) {
            Offer::Offered => {}
            hidden => return hidden,
        }
        if let Some(Err(hidden)) = ctx.scope.as_ref().map(|s| s.check(entry.def())) {
            return Offer::Hidden(hidden);
        }
        if let Err(why) = entry.tool.available_to(&ctx.agent) {
            return Offer::Hidden(Hidden::Unavailable { why });
        }
        let rules = self.rules.current();
        if let Some(v) = rules.denies_outright(
            &entry.def().name,
            &ctx.agent.name,
            ctx.agent.team.as_deref(),
        ) {
            return Offer::Hidden(Hidden::DeniedByRule {
                rule: v.rule.to_string(),
            });
        }
        Offer::Offered
    }

    /// The session's catalog: every tool it may call, in catalog order.
    pub fn offered(&self, ctx: &SessionContext) -> Vec<Arc<Entry>> {
        self.catalog()
            .iter()
            .filter(|e| self.offer(ctx, e) == Offer::Offered)
            .cloned()
            .collect()
    }

    /// The session's catalog as OpenAI function schemas (the `tools` of a chat completion):
    /// the same view `tools/list` gives it.
    pub fn openai_functions(&self, ctx: &SessionContext) -> Vec<Value> {
        self.offered(ctx)
            .into_iter()
            .map(|e| {
                let def = e.def();
                serde_json::json!({
                    "type": "function",
                    "function": {
                        "name": def.name,
                        "description": def.description,
                        "parameters": def.input_schema,
                    }
                })
            })
            .collect()
    }

    /// Replaces upstream `source`'s tools (those named `SOURCE__…`) with `tools`, as listed
    /// again after its `tools/list_changed`, a restart or an operator's refresh: a new or
    /// changed definition is recorded as seen (held back until an operator approves it), one
    /// that went is no longer served, and every session is told its catalog changed.
    pub async fn replace_external(
        &self,
        source: &str,
        tools: Vec<Arc<dyn Tool>>,
    ) -> Result<(), PipelineError> {
        let prefix = format!("{source}__");
        let seen: Vec<_> = tools
            .iter()
            .map(|t| BuiltinDefinition {
                name: t.def().name.clone(),
                digest: t.def().digest().to_string(),
                definition: serde_json::to_string(t.def()).unwrap_or_default(),
            })
            .collect();
        if !seen.is_empty() {
            self.store.record_seen(seen, "external").await?;
            self.warn_of_findings(source).await;
        }
        {
            let mut catalog = self.catalog.write().unwrap_or_else(|e| e.into_inner());
            let next = catalog.replacing(&prefix, tools);
            *catalog = Arc::new(next);
        }
        self.reload_registry().await?;
        self.catalog_changed.send_modify(|n| *n += 1);
        Ok(())
    }

    /// Says in the log which of `source`'s tools waiting for approval the definition screen
    /// found something in (the operator sees the findings in `aether registry show`, the
    /// registry diff and the console).
    async fn warn_of_findings(&self, source: &str) {
        let Ok(rows) = self.store.registry().await else {
            return;
        };
        let screen = screening::screen_for(&rows);
        let prefix = format!("{source}__");
        for row in rows.iter().filter(|r| r.name.starts_with(&prefix)) {
            if row.approved_digest.is_some() && row.approved_digest == row.seen_digest {
                continue;
            }
            let found = screening::screen_row(&screen, row).findings;
            if !found.is_empty() {
                let rules: Vec<&str> = found.iter().map(|f| f.rule.as_str()).collect();
                tracing::warn!(
                    tool = %row.name,
                    findings = %rules.join(", "),
                    "the definition screen found something in a tool waiting for approval; review it with `aether registry show`"
                );
            }
        }
    }
}
