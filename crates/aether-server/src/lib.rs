//! Aether's transports. MCP over stdio and over Streamable HTTP, both built on the official
//! Rust SDK (`rmcp`), and the HTTP listener's gate (exact `Host`, same-`Origin`) that runs
//! before any handler. This is the only crate that knows MCP, HTTP or JSON-RPC: it turns
//! protocol messages into [`aether_pipeline::Pipeline`] calls and the pipeline's outcomes back
//! into protocol messages, and nothing else.

// Logging, sampling and resource subscriptions are deprecated for the coming protocol revision
// (SEP-2577) but are part of every version Aether negotiates today.
#![allow(deprecated)]

mod admin;
pub mod console;
mod fixtures;
mod gate;
mod handler;
mod http;
mod link;
pub mod upstream;

pub use gate::HostGate;
pub use handler::{AetherMcp, Caller, Mode};
pub use http::{HttpOptions, router, serve_http, serve_http_with};

/// Serves one MCP session over this process's stdin and stdout until the client leaves.
pub async fn serve_stdio(handler: AetherMcp) -> std::io::Result<()> {
    use rmcp::ServiceExt;
    let transport = rmcp::transport::io::stdio_pipes();
    let running = handler
        .serve(transport)
        .await
        .map_err(|e| std::io::Error::other(format!("MCP session did not start: {e}")))?;
    running
        .waiting()
        .await
        .map_err(|e| std::io::Error::other(format!("MCP session ended badly: {e}")))?;
    Ok(())
}
