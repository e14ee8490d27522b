//! Aether's transports. MCP over stdio and over Streamable HTTP, both built on the official
//! Rust SDK (`rmcp`), and the HTTP listener's gate (exact `Host`, same-`Origin`) that runs
//! before any handler. This is the only crate that knows MCP, HTTP or JSON-RPC: it turns
//! protocol messages into [`aether_pipeline::Pipeline`] calls and the pipeline's outcomes back
//! into protocol messages, and nothing else.

// Logging, sampling and resource subscriptions are deprecated for the coming protocol revision
// (SEP-2577) but are part of every version Aether negotiates today.
#![allow(deprecated)]

mod admin;
mod api;
pub mod authz;
pub mod console;
pub mod console_oidc;
mod drain;
pub mod events;
mod fixtures;
mod gate;
mod handler;
mod http;
mod link;
pub mod oauth;
pub mod protocol;
mod stdio;
pub use admin::permissions as admin_permissions;
pub use aether_upstream as upstream;

pub use gate::HostGate;
pub use handler::{AetherMcp, Caller, Mode};
pub use http::{HttpOptions, router, serve_http, serve_http_with};

/// Serves one MCP session over this process's stdin and stdout until the client leaves.
pub async fn serve_stdio(handler: AetherMcp) -> std::io::Result<()> {
    use rmcp::ServiceExt;
    // rmcp reads and writes through pipes of ours: every line from the client is checked
    // first (a line that is not a message Aether takes is answered with its JSON-RPC error:
    // `protocol`), and rmcp's answers and those share stdout a whole line at a time.
    let (rmcp_in, to_rmcp) = tokio::io::duplex(1 << 16);
    let (from_rmcp, rmcp_out) = tokio::io::duplex(1 << 16);
    let (stdin, stdout) = stdio::streams();
    let mut lines = tokio::spawn(protocol::serve_stdio_lines(
        stdin, stdout, to_rmcp, from_rmcp,
    ));
    let served = async {
        let running = handler
            .serve((rmcp_in, rmcp_out))
            .await
            .map_err(|e| std::io::Error::other(format!("MCP session did not start: {e}")))?;
        running
            .waiting()
            .await
            .map_err(|e| std::io::Error::other(format!("MCP session ended badly: {e}")))?;
        Ok::<(), std::io::Error>(())
    }
    .await;
    // rmcp's end closed its output: the line pump writes what is left and ends (at once when
    // the client left; a moment's grace when rmcp ended with the client still there).
    match tokio::time::timeout(std::time::Duration::from_secs(2), &mut lines).await {
        Ok(Ok(Err(e))) if served.is_ok() => return Err(e),
        Ok(_) => {}
        Err(_) => lines.abort(),
    }
    served
}
