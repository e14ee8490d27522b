//! The conformance suite's resources and prompts, served only in the test-only fixtures mode.
//! (The suite's fixture *tools* are catalog tools in `aether_tools::fixtures`, admitted and
//! audited like any other.)

use aether_tools::fixtures::PNG_1X1;
use rmcp::model::{ErrorData, GetPromptResult, ReadResourceResult};
use serde_json::{Map, Value, json};

pub fn resources() -> Vec<Value> {
    vec![
        json!({"uri": "test://static-text", "name": "static-text", "description": "A static text resource for testing.", "mimeType": "text/plain"}),
        json!({"uri": "test://static-binary", "name": "static-binary", "description": "A static binary (PNG) resource for testing.", "mimeType": "image/png"}),
        json!({"uri": "test://watched-resource", "name": "watched-resource", "description": "A resource that can be subscribed to, for testing.", "mimeType": "text/plain"}),
    ]
}

pub fn resource_templates() -> Vec<Value> {
    vec![
        json!({"uriTemplate": "test://template/{id}/data", "name": "template", "description": "A templated resource for testing.", "mimeType": "application/json"}),
    ]
}

/// `Some` if `uri` is a fixture resource.
pub fn read_resource(uri: &str) -> Option<Result<ReadResourceResult, ErrorData>> {
    let contents = match uri {
        "test://static-text" => {
            json!({"uri": uri, "mimeType": "text/plain", "text": "This is the content of the static text resource."})
        }
        "test://static-binary" => json!({"uri": uri, "mimeType": "image/png", "blob": PNG_1X1}),
        "test://watched-resource" => {
            json!({"uri": uri, "mimeType": "text/plain", "text": "Watched resource content"})
        }
        _ => {
            let id = uri
                .strip_prefix("test://template/")?
                .strip_suffix("/data")?;
            let text =
                json!({"id": id, "templateTest": true, "data": format!("Data for ID: {id}")})
                    .to_string();
            json!({"uri": uri, "mimeType": "application/json", "text": text})
        }
    };
    Some(
        serde_json::from_value(json!({"contents": [contents], "resultType": "complete"}))
            .map_err(|e| ErrorData::internal_error(e.to_string(), None)),
    )
}

/// The suite's prompt that asks its client before it answers (2026-07-28's rounds).
pub const ASKING_PROMPT: &str = "test_input_required_result_prompt";

pub fn prompts() -> Vec<Value> {
    vec![
        json!({"name": ASKING_PROMPT, "description": "A prompt that asks the client for its context first, for testing."}),
        json!({"name": "test_simple_prompt", "description": "A simple prompt without arguments, for testing."}),
        json!({"name": "test_prompt_with_arguments", "description": "A prompt with two required arguments, for testing.", "arguments": [
            {"name": "arg1", "description": "First test argument", "required": true},
            {"name": "arg2", "description": "Second test argument", "required": true}
        ]}),
        json!({"name": "test_prompt_with_embedded_resource", "description": "A prompt that embeds a resource, for testing.", "arguments": [
            {"name": "resourceUri", "description": "URI of the resource to embed", "required": true}
        ]}),
        json!({"name": "test_prompt_with_image", "description": "A prompt that includes an image, for testing."}),
    ]
}

pub fn get_prompt(name: &str, args: Map<String, Value>) -> Result<GetPromptResult, ErrorData> {
    let arg = |k: &str| {
        args.get(k)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string()
    };
    let messages = match name {
        "test_simple_prompt" => {
            json!([{"role": "user", "content": {"type": "text", "text": "This is a simple prompt for testing."}}])
        }
        "test_prompt_with_arguments" => json!([{"role": "user", "content": {"type": "text",
            "text": format!("Prompt with arguments: arg1='{}', arg2='{}'", arg("arg1"), arg("arg2"))}}]),
        "test_prompt_with_embedded_resource" => json!([
            {"role": "user", "content": {"type": "resource", "resource": {"uri": arg("resourceUri"), "mimeType": "text/plain", "text": "Embedded resource content for testing."}}},
            {"role": "user", "content": {"type": "text", "text": "Please process the embedded resource above."}}
        ]),
        "test_prompt_with_image" => json!([
            {"role": "user", "content": {"type": "image", "data": PNG_1X1, "mimeType": "image/png"}},
            {"role": "user", "content": {"type": "text", "text": "Please analyze the image above."}}
        ]),
        _ => {
            return Err(ErrorData::invalid_params(
                format!("no prompt named {name:?}"),
                None,
            ));
        }
    };
    serde_json::from_value(json!({"messages": messages, "resultType": "complete"}))
        .map_err(|e| ErrorData::internal_error(e.to_string(), None))
}

/// What a trigger fixture (`test_trigger_tool_change`, `test_trigger_prompt_change`) says
/// changed: clients listening for it are told.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Changed {
    Tools,
    Prompts,
}

impl Changed {
    /// The change a successful call of `tool` announces, if it is a trigger fixture.
    pub fn by(tool: &str) -> Option<Changed> {
        match tool {
            "test_trigger_tool_change" => Some(Changed::Tools),
            "test_trigger_prompt_change" => Some(Changed::Prompts),
            _ => None,
        }
    }
}

/// The process's trigger announcements (the fixtures are test-only; one process serves one
/// suite run).
pub fn changes() -> &'static tokio::sync::broadcast::Sender<Changed> {
    static CHANGES: std::sync::OnceLock<tokio::sync::broadcast::Sender<Changed>> =
        std::sync::OnceLock::new();
    CHANGES.get_or_init(|| tokio::sync::broadcast::channel(16).0)
}
