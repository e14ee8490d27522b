//! Aether's network tools (the `research` group: `http_request`, `http_health_check`,
//! `web_fetch`, `download_pdf`, `web_search`, and `capture_api_schema`, which saves what it
//! captures through the workspace's write; the browser tools `play_test`, `capture_reference`
//! and `validate_web_app`), the HTTP client they share, and the operator's speech server for
//! `tts_render` (`speech`).
//!
//! Every tool here reaches the network, so every one is Elevated or higher and declares
//! `reaches_network`; the pipeline's egress step (SPEC §2 step 8) scans its arguments for
//! credentials and checks its destination before the receipt, and the client (`client.rs`)
//! checks every hop again, resolves once and connects only to the vetted address.

mod api_schema;
mod browser;
mod client;
mod download_pdf;
mod health_check;
mod http_request;
pub mod speech;
mod web_fetch;
mod web_search;

use std::sync::Arc;

use aether_policy::AgentProfile;
use aether_policy::egress::EgressPolicy;
use aether_tools_core::{SaveFile, Tool, ToolError};

pub use client::{Request, Resolve, Response, SystemResolver, fetch, install_tls, outbound};

/// The network tools, resolving names through `resolver`.
pub fn tools(resolver: Arc<dyn Resolve>) -> Vec<Arc<dyn Tool>> {
    tools_with(resolver, None)
}

/// The network tools, with the operator's SearXNG instance for `web_search` (not offered
/// without one).
pub fn tools_with(resolver: Arc<dyn Resolve>, searxng: Option<url::Url>) -> Vec<Arc<dyn Tool>> {
    vec![
        Arc::new(http_request::HttpRequest::new(resolver.clone())),
        Arc::new(health_check::HealthCheck::new(resolver.clone())),
        Arc::new(web_fetch::WebFetch::new(resolver.clone())),
        Arc::new(download_pdf::DownloadPdf::new(resolver.clone())),
        Arc::new(web_search::WebSearch::new(resolver, searxng)),
    ]
}

/// The network tools that save what they capture into the workspace through `saver`
/// (`capture_api_schema`, and the browser's `play_test` and `capture_reference`), and the
/// browser's `validate_web_app`.
pub fn saving_tools(resolver: Arc<dyn Resolve>, saver: Arc<dyn SaveFile>) -> Vec<Arc<dyn Tool>> {
    vec![
        Arc::new(api_schema::CaptureApiSchema::new(
            resolver.clone(),
            saver.clone(),
        )),
        Arc::new(browser::play_test::PlayTest::new(
            resolver.clone(),
            saver.clone(),
        )),
        Arc::new(browser::capture_reference::CaptureReference::new(
            resolver.clone(),
            saver,
        )),
        Arc::new(browser::validate::ValidateWebApp::new(resolver)),
    ]
}

/// A research tool's definition: Elevated, in the `research` group, reaching the network;
/// `read_only` says whether it can change anything remotely.
pub(crate) fn research_def(
    name: &str,
    title: &str,
    description: &str,
    input_schema: serde_json::Value,
    output_schema: serde_json::Value,
    risk: aether_policy::Risk,
    read_only: bool,
) -> aether_policy::ToolDef {
    aether_policy::ToolDef {
        name: name.into(),
        title: title.into(),
        group: aether_policy::tool::groups::RESEARCH.into(),
        tier: aether_policy::Tier::Elevated,
        description: description.into(),
        input_schema,
        output_schema,
        arguments: Default::default(),
        meta: aether_policy::ToolMeta {
            risk,
            read_only,
            reaches_network: true,
            needs_confirmation: false,
            idempotent: read_only,
            destructive: !read_only,
        },
    }
}

/// Whether an agent can reach anything with a tool that goes where its arguments say: not
/// without an allowed domain (the tool is then not offered to it).
pub(crate) fn reaches_somewhere(agent: &AgentProfile) -> Result<(), String> {
    if agent.allowed_domains.is_empty() {
        return Err(format!(
            "agent {:?} has no allowed_domains, so it can reach no host",
            agent.name
        ));
    }
    Ok(())
}

/// The egress policy of the agent making the call.
pub fn policy_for(agent: &AgentProfile) -> Result<EgressPolicy, ToolError> {
    agent.egress().map_err(ToolError::failed)
}

/// Text of a body for a model: UTF-8 as it is, anything else described, not dumped.
pub(crate) fn body_text(body: &[u8], content_type: Option<&str>) -> String {
    match std::str::from_utf8(body) {
        Ok(text) => text.to_string(),
        Err(_) => format!(
            "[{} bytes of binary content{}]",
            body.len(),
            content_type.map(|t| format!(", {t}")).unwrap_or_default()
        ),
    }
}
