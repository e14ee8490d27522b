//! `aether://capabilities`: per capability, its status in the application and whether (and how)
//! MCP clients can reach it. A capability the build lacks is listed as planned, never
//! advertised as a tool.

use serde_json::{Value, json};

use crate::Catalog;

/// The capability groups of SPEC §3 and how far each has come in this build.
const CAPABILITIES: &[(&str, &str)] = &[
    (
        "workspace",
        "Read, search and write files under named roots (read-write, read-only, sealed); every write journaled for undo.",
    ),
    (
        "shell",
        "run_command (allowlisted programs, no shell), run_shell (in a bubblewrap sandbox) and read_logs.",
    ),
    (
        "research",
        "http_request, http_health_check, web_fetch, web_search, download_pdf (Restricted), capture_api_schema and capture_reference (a headless browser) through the egress gate.",
    ),
    ("knowledge", "search_knowledge, write_knowledge."),
    ("planning", "create_plan, read_plan, update_plan, todo."),
    ("comms", "notify_user, report_progress."),
    ("team", "send_message_to, read_messages."),
    (
        "quality",
        "run_tests, analyze_code, check_finishing, record_style, code_review, and play_test and validate_web_app (a headless browser, through the egress gate).",
    ),
    ("audio", "tts_render, tts_status."),
    ("calc", "calculate."),
    (
        "upstream",
        "Tools, prompts and resources of operator-configured MCP servers, as SERVER__TOOL (application-only until an upstream is configured and its tools approved).",
    ),
    (
        "orchestration",
        "delegate, reply, spawn_subagents: agent runs over the same pipeline (offered where a model connection is configured).",
    ),
];

/// The capability document for a catalog.
pub fn capabilities(catalog: &Catalog) -> Value {
    let list: Vec<Value> = CAPABILITIES
        .iter()
        .map(|(group, summary)| {
            // Upstream tools are in their upstream's own group; they are the external ones.
            let upstream = *group == "upstream";
            let tools: Vec<&str> = catalog
                .iter()
                .filter(|t| {
                    if upstream {
                        t.external
                    } else {
                        t.def().group == *group
                    }
                })
                .map(|t| t.def().name.as_str())
                .collect();
            let (status, exposure) = match (tools.is_empty(), upstream) {
                (true, true) => ("available", "application-only"),
                (true, false) => ("planned", "planned"),
                (false, _) => ("available", "exposed"),
            };
            json!({
                "capability": group,
                "summary": summary,
                "application_status": status,
                "mcp_exposure": exposure,
                "tools": tools,
            })
        })
        .collect();
    json!({ "capabilities": list })
}
