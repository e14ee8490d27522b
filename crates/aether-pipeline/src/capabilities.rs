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
        "run_command (allowlisted programs, no shell) and read_logs; run_shell is planned.",
    ),
    (
        "research",
        "http_request, http_health_check, web_fetch and web_search through the egress gate; download_pdf is planned.",
    ),
    ("knowledge", "search_knowledge, write_knowledge."),
    ("planning", "create_plan, read_plan, update_plan, todo."),
    ("comms", "notify_user, report_progress."),
    ("team", "send_message_to, read_messages."),
    ("quality", "run_tests, analyze_code."),
    ("calc", "calculate."),
    (
        "upstream",
        "Tools of operator-configured MCP servers, as SERVER__TOOL.",
    ),
    (
        "orchestration",
        "delegate, reply, spawn_subagents, with the agent runner.",
    ),
];

/// The capability document for a catalog.
pub fn capabilities(catalog: &Catalog) -> Value {
    let list: Vec<Value> = CAPABILITIES
        .iter()
        .map(|(group, summary)| {
            let tools: Vec<&str> = catalog
                .iter()
                .map(|t| t.def())
                .filter(|d| d.group == *group)
                .map(|d| d.name.as_str())
                .collect();
            let (status, exposure) = if tools.is_empty() {
                ("planned", "planned")
            } else {
                ("available", "exposed")
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
