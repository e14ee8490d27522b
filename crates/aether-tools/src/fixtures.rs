//! The MCP conformance suite's fixture tools, for the test-only fixtures mode.
//!
//! They are ordinary tools in the `conformance` group: registered in the same catalog, approved
//! from source, offered only to an agent whose groups include `conformance`, admitted,
//! receipted and audited like every other call. Nothing else in Aether knows them.

use std::sync::Arc;
use std::time::Duration;

use aether_policy::tool::groups;
use aether_policy::{Risk, Tier, ToolDef, ToolMeta};
use async_trait::async_trait;
use serde_json::{Value, json};

use crate::{CallContext, Content, LogLevel, Tool, ToolError, ToolOutput};

/// A 1×1 PNG.
pub const PNG_1X1: &str = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg==";
/// A minimal WAV file.
pub const WAV_MIN: &str = "UklGRiYAAABXQVZFZm10IBAAAAABAAEAQB8AAAB9AAACABAAZGF0YQIAAAA=";

#[derive(Clone, Copy)]
enum Kind {
    SimpleText,
    Image,
    Audio,
    EmbeddedResource,
    Mixed,
    Logging,
    Progress,
    Error,
    Sampling,
    Elicitation,
    ElicitationDefaults,
    ElicitationEnums,
    JsonSchema2020,
    Wait,
    /// The suite's hooks for `subscriptions/listen`: the server tells listening clients that
    /// its tool (or prompt) list changed (the transport does the telling; the call itself
    /// only answers).
    TriggerChange,
    /// The suite's tools that ask the client mid-call (SEP-2322's input-required rounds, and
    /// the same questions as requests on the stream in the handshake era).
    Ask(Asks),
    /// Logs one message: a 2026-07-28 client hears it only at the level its request names.
    LogOnce,
    /// Answers with its arguments.
    Echo,
}

/// What an asking fixture asks.
#[derive(Clone, Copy)]
enum Asks {
    /// `user_name` (elicitation): "Hello, NAME!".
    Name,
    /// `capital_question` (sampling).
    Capital,
    /// `client_roots` (roots/list).
    Roots,
    /// `confirm` (elicitation); "state-ok" when the answer came back with the state.
    Confirm,
    /// `user_name`, `greeting` and `client_roots` at once.
    Three,
    /// `step1`, then `step2`: two rounds.
    TwoSteps,
    /// Only what the client declared it can answer: `user_name` and/or `greeting`.
    Declared,
    /// Sampling, whether or not the client declared it (the suite checks the refusal).
    SamplingAnyway,
}

struct Fixture {
    def: ToolDef,
    kind: Kind,
}

fn fixture(name: &str, description: &str, input: Value, kind: Kind) -> Arc<dyn Tool> {
    Arc::new(Fixture {
        def: ToolDef {
            name: name.into(),
            title: name.into(),
            group: groups::CONFORMANCE.into(),
            tier: Tier::Standard,
            description: description.into(),
            input_schema: input,
            output_schema: json!({"type": "object"}),
            arguments: Default::default(),
            meta: ToolMeta {
                risk: Risk::Low,
                ..ToolMeta::read_only()
            },
        },
        kind,
    })
}

fn empty() -> Value {
    json!({"type": "object", "properties": {}})
}

/// The conformance fixtures, in the order the suite lists them.
pub fn tools() -> Vec<Arc<dyn Tool>> {
    vec![
        fixture(
            "test_simple_text",
            "Returns a simple text response for testing.",
            empty(),
            Kind::SimpleText,
        ),
        fixture(
            "test_image_content",
            "Returns a 1x1 PNG image for testing.",
            empty(),
            Kind::Image,
        ),
        fixture(
            "test_audio_content",
            "Returns a minimal WAV audio clip for testing.",
            empty(),
            Kind::Audio,
        ),
        fixture(
            "test_embedded_resource",
            "Returns an embedded text resource for testing.",
            empty(),
            Kind::EmbeddedResource,
        ),
        fixture(
            "test_multiple_content_types",
            "Returns text, an image and a resource together for testing.",
            empty(),
            Kind::Mixed,
        ),
        fixture(
            "test_tool_with_logging",
            "Sends three log messages while it runs, for testing.",
            empty(),
            Kind::Logging,
        ),
        fixture(
            "test_tool_with_progress",
            "Reports progress three times while it runs, for testing.",
            empty(),
            Kind::Progress,
        ),
        fixture(
            "test_error_handling",
            "Always returns a tool error, for testing error handling.",
            empty(),
            Kind::Error,
        ),
        fixture(
            "test_sampling",
            "Asks the client's model to answer a prompt (sampling), for testing.",
            json!({"type": "object", "properties": {"prompt": {"type": "string", "description": "The prompt to send to the LLM"}}, "required": ["prompt"]}),
            Kind::Sampling,
        ),
        fixture(
            "test_elicitation",
            "Asks the client's user for a username and email (elicitation), for testing.",
            json!({"type": "object", "properties": {"message": {"type": "string", "description": "The message to show the user"}}, "required": ["message"]}),
            Kind::Elicitation,
        ),
        fixture(
            "test_elicitation_sep1034_defaults",
            "Asks the user to review a form whose fields have defaults (SEP-1034), for testing.",
            empty(),
            Kind::ElicitationDefaults,
        ),
        fixture(
            "test_elicitation_sep1330_enums",
            "Asks the user to pick from five kinds of enum field (SEP-1330), for testing.",
            empty(),
            Kind::ElicitationEnums,
        ),
        fixture(
            "json_schema_2020_12_tool",
            "Tool with JSON Schema 2020-12 features for conformance testing (SEP-1613).",
            // As the suite's 2026-07-28 scenario has it (SEP-2106's wider vocabulary: an
            // `$anchor`, `allOf`/`anyOf`, `if`/`then`/`else`), which keeps the 2025 one's.
            json!({
                "$schema": "https://json-schema.org/draft/2020-12/schema",
                "type": "object",
                "$defs": {"address": {"$anchor": "addressDef", "type": "object", "properties": {"street": {"type": "string"}, "city": {"type": "string"}}}},
                "properties": {
                    "name": {"type": "string"},
                    "address": {"$ref": "#/$defs/address"},
                    "contactMethod": {"type": "string", "enum": ["phone", "email"]},
                    "phone": {"type": "string"},
                    "email": {"type": "string"}
                },
                "allOf": [{"anyOf": [{"required": ["phone"]}, {"required": ["email"]}]}],
                "if": {"properties": {"contactMethod": {"const": "phone"}}, "required": ["contactMethod"]},
                "then": {"required": ["phone"]},
                "else": {"required": ["email"]},
                "additionalProperties": false
            }),
            Kind::JsonSchema2020,
        ),
        fixture(
            "test_trigger_tool_change",
            "Tells clients listening for tool list changes that the list changed, for testing.",
            empty(),
            Kind::TriggerChange,
        ),
        fixture(
            "test_trigger_prompt_change",
            "Tells clients listening for prompt list changes that the list changed, for testing.",
            empty(),
            Kind::TriggerChange,
        ),
        fixture(
            "test_input_required_result_elicitation",
            "Asks the user's name (elicitation), then greets them, for testing.",
            empty(),
            Kind::Ask(Asks::Name),
        ),
        fixture(
            "test_input_required_result_sampling",
            "Asks the client's model a question (sampling), for testing.",
            empty(),
            Kind::Ask(Asks::Capital),
        ),
        fixture(
            "test_input_required_result_list_roots",
            "Asks the client for its roots, for testing.",
            empty(),
            Kind::Ask(Asks::Roots),
        ),
        fixture(
            "test_input_required_result_request_state",
            "Asks for a confirmation and checks the round's state came back, for testing.",
            empty(),
            Kind::Ask(Asks::Confirm),
        ),
        fixture(
            "test_input_required_result_tampered_state",
            "Asks for a confirmation; a changed state is refused, for testing.",
            empty(),
            Kind::Ask(Asks::Confirm),
        ),
        fixture(
            "test_input_required_result_multiple_inputs",
            "Asks three things at once (elicitation, sampling, roots), for testing.",
            empty(),
            Kind::Ask(Asks::Three),
        ),
        fixture(
            "test_input_required_result_multi_round",
            "Asks in two rounds (name, then colour), for testing.",
            empty(),
            Kind::Ask(Asks::TwoSteps),
        ),
        fixture(
            "test_input_required_result_capabilities",
            "Asks only what the client declared it can answer, for testing.",
            empty(),
            Kind::Ask(Asks::Declared),
        ),
        fixture(
            "test_missing_capability",
            "Needs sampling whether or not the client declared it, for testing.",
            empty(),
            Kind::Ask(Asks::SamplingAnyway),
        ),
        fixture(
            "test_streaming_elicitation",
            "Asks the user's name mid-call, for testing what the response stream carries.",
            empty(),
            Kind::Ask(Asks::Name),
        ),
        fixture(
            "test_custom_headers",
            "Echoes a region that travels in the Mcp-Param-Region header too (SEP-2243), for testing.",
            json!({
                "type": "object",
                "properties": {
                    "region": {"type": "string", "x-mcp-header": "Region"},
                    "query": {"type": "string"}
                },
                "required": ["region"]
            }),
            Kind::Echo,
        ),
        fixture(
            "test_logging_tool",
            "Logs one message at info, for testing.",
            empty(),
            Kind::LogOnce,
        ),
        // Not the suite's: Aether's own tests use it to cancel a call in flight over the wire.
        fixture(
            "test_wait_until_cancelled",
            "Waits up to 60 seconds or until the call is cancelled, for testing cancellation.",
            empty(),
            Kind::Wait,
        ),
    ]
}

#[async_trait]
impl Tool for Fixture {
    fn def(&self) -> &ToolDef {
        &self.def
    }

    async fn call(&self, cx: CallContext, args: Value) -> Result<ToolOutput, ToolError> {
        let text = |t: &str| Ok(ToolOutput::text(t));
        match self.kind {
            Kind::SimpleText => text("This is a simple text response for testing."),
            Kind::TriggerChange => text("Listening clients are told of the change."),
            Kind::Ask(asks) => ask(&cx, asks).await,
            Kind::Echo => text(&format!("Called with {args}")),
            Kind::LogOnce => {
                cx.client
                    .log(LogLevel::Info, json!("test_logging_tool ran"))
                    .await;
                text("Logged one message")
            }
            Kind::Image => Ok(ToolOutput {
                content: vec![Content::Image {
                    data_base64: PNG_1X1.into(),
                    mime_type: "image/png".into(),
                }],
                ..Default::default()
            }),
            Kind::Audio => Ok(ToolOutput {
                content: vec![Content::Audio {
                    data_base64: WAV_MIN.into(),
                    mime_type: "audio/wav".into(),
                }],
                ..Default::default()
            }),
            Kind::EmbeddedResource => Ok(ToolOutput {
                content: vec![Content::Resource {
                    uri: "test://embedded-resource".into(),
                    mime_type: "text/plain".into(),
                    text: Some("This is an embedded resource content.".into()),
                    blob_base64: None,
                }],
                ..Default::default()
            }),
            Kind::Mixed => Ok(ToolOutput {
                content: vec![
                    Content::Text("Multiple content types test:".into()),
                    Content::Image {
                        data_base64: PNG_1X1.into(),
                        mime_type: "image/png".into(),
                    },
                    Content::Resource {
                        uri: "test://mixed-content-resource".into(),
                        mime_type: "application/json".into(),
                        text: Some(r#"{"test":"data","value":123}"#.into()),
                        blob_base64: None,
                    },
                ],
                ..Default::default()
            }),
            Kind::Logging => {
                for (i, message) in [
                    "Tool execution started",
                    "Tool processing data",
                    "Tool execution completed",
                ]
                .iter()
                .enumerate()
                {
                    if i > 0 {
                        tokio::time::sleep(Duration::from_millis(50)).await;
                    }
                    cx.client.log(LogLevel::Info, json!(message)).await;
                }
                text("Tool with logging executed successfully")
            }
            Kind::Progress => {
                for (i, step) in [0.0, 50.0, 100.0].into_iter().enumerate() {
                    if i > 0 {
                        tokio::time::sleep(Duration::from_millis(50)).await;
                    }
                    cx.client
                        .progress(
                            step,
                            Some(100.0),
                            Some(format!("Completed step {step} of 100")),
                        )
                        .await;
                }
                text("Progress reported")
            }
            Kind::Error => Ok(ToolOutput {
                content: vec![Content::Text(
                    "This tool intentionally returns an error for testing".into(),
                )],
                is_error: true,
                ..Default::default()
            }),
            Kind::Sampling => {
                let prompt = args["prompt"].as_str().unwrap_or_default();
                let params = json!({
                    "messages": [{"role": "user", "content": {"type": "text", "text": prompt}}],
                    "maxTokens": 100
                });
                match cx.client.create_message(params).await {
                    Ok(answer) => {
                        let said = answer["content"]["text"].as_str().unwrap_or("(no text)");
                        text(&format!("LLM response: {said}"))
                    }
                    Err(e) => Err(ToolError::failed(format!("sampling failed: {e}"))),
                }
            }
            Kind::Elicitation | Kind::ElicitationDefaults | Kind::ElicitationEnums => {
                let (params, label) = elicitation_request(&self.kind, &args);
                elicit(&cx, params, label).await
            }
            Kind::JsonSchema2020 => text(&format!("JSON Schema 2020-12 tool called with: {args}")),
            Kind::Wait => {
                tokio::select! {
                    _ = cx.cancel.cancelled() => Err(ToolError::Cancelled),
                    _ = tokio::time::sleep(Duration::from_secs(60)) => text("waited 60 seconds"),
                }
            }
        }
    }
}

/// What an elicitation fixture asks (as the conformance suite expects it) and how its answer
/// is reported.
fn elicitation_request(kind: &Kind, args: &Value) -> (Value, &'static str) {
    match kind {
        Kind::Elicitation => (
            json!({
                "message": args["message"].as_str().unwrap_or_default(),
                "requestedSchema": {
                    "type": "object",
                    "properties": {
                        "username": {"type": "string", "description": "User's response"},
                        "email": {"type": "string", "description": "User's email address"}
                    },
                    "required": ["username", "email"]
                }
            }),
            "User response",
        ),
        Kind::ElicitationDefaults => (
            json!({
                "message": "Please review and update the form fields with defaults",
                "requestedSchema": {
                    "type": "object",
                    "properties": {
                        "name": {"type": "string", "description": "User name", "default": "John Doe"},
                        "age": {"type": "integer", "description": "User age", "default": 30},
                        "score": {"type": "number", "description": "User score", "default": 95.5},
                        "status": {"type": "string", "description": "User status", "enum": ["active", "inactive", "pending"], "default": "active"},
                        "verified": {"type": "boolean", "description": "Verification status", "default": true}
                    },
                    "required": []
                }
            }),
            "Elicitation completed",
        ),
        _ => (
            json!({
                "message": "Please select options from the enum fields",
                "requestedSchema": {
                    "type": "object",
                    "properties": {
                        "untitledSingle": {"type": "string", "description": "Select one option", "enum": ["option1", "option2", "option3"]},
                        "titledSingle": {"type": "string", "description": "Select one option with titles",
                            "oneOf": [{"const": "value1", "title": "First Option"}, {"const": "value2", "title": "Second Option"}, {"const": "value3", "title": "Third Option"}]},
                        "legacyEnum": {"type": "string", "description": "Select one option (legacy)", "enum": ["opt1", "opt2", "opt3"],
                            "enumNames": ["Option One", "Option Two", "Option Three"]},
                        "untitledMulti": {"type": "array", "description": "Select multiple options", "minItems": 1, "maxItems": 3,
                            "items": {"type": "string", "enum": ["option1", "option2", "option3"]}},
                        "titledMulti": {"type": "array", "description": "Select multiple options with titles", "minItems": 1, "maxItems": 3,
                            "items": {"anyOf": [{"const": "value1", "title": "First Choice"}, {"const": "value2", "title": "Second Choice"}, {"const": "value3", "title": "Third Choice"}]}}
                    },
                    "required": []
                }
            }),
            "Elicitation completed",
        ),
    }
}

/// Asks the client's user `params` (`message` and `requestedSchema`, as the conformance
/// suite expects them) and reports the answer.
async fn elicit(cx: &CallContext, params: Value, label: &str) -> Result<ToolOutput, ToolError> {
    let question = crate::Question {
        message: params["message"].as_str().unwrap_or_default().to_string(),
        answer: crate::AnswerShape::Schema(params["requestedSchema"].clone()),
    };
    match cx.client.elicit(question).await {
        Ok(reply) => {
            let content = match &reply {
                crate::Reply::Accepted(content) => Value::Object(content.clone()),
                _ => Value::Null,
            };
            Ok(ToolOutput::text(format!(
                "{label}: action={}, content={content}",
                reply.action()
            )))
        }
        Err(e) => Err(ToolError::failed(format!("elicitation failed: {e}"))),
    }
}

fn name_question(message: &str, field: &str) -> Value {
    json!({
        "message": message,
        "requestedSchema": {
            "type": "object",
            "properties": {field: {"type": "string"}},
            "required": [field]
        }
    })
}

fn sampling_question(text: &str, max_tokens: u32) -> Value {
    json!({
        "messages": [{"role": "user", "content": {"type": "text", "text": text}}],
        "maxTokens": max_tokens
    })
}

/// The asking fixtures: every question of a round is asked before any answer is used, so a
/// client answering a round finds all of it asked at once.
async fn ask(cx: &CallContext, asks: Asks) -> Result<ToolOutput, ToolError> {
    let client = &cx.client;
    let failed = |e: String| ToolError::failed(format!("the client was asked: {e}"));
    let text = |t: String| Ok(ToolOutput::text(t));
    let accepted = |answer: &Value, field: &str| {
        answer["content"][field]
            .as_str()
            .map(str::to_string)
            .unwrap_or_else(|| answer["content"][field].to_string())
    };
    match asks {
        Asks::Name => {
            let answer = client
                .ask(
                    "user_name",
                    "elicitation/create",
                    name_question("What is your name?", "name"),
                )
                .await
                .map_err(failed)?;
            text(format!("Hello, {}!", accepted(&answer, "name")))
        }
        Asks::Capital | Asks::SamplingAnyway => {
            let answer = client
                .ask(
                    "capital_question",
                    "sampling/createMessage",
                    sampling_question("What is the capital of France?", 100),
                )
                .await
                .map_err(failed)?;
            text(format!(
                "The client's model said: {}",
                answer["content"]["text"].as_str().unwrap_or("(no text)")
            ))
        }
        Asks::Roots => {
            let answer = client
                .ask("client_roots", "roots/list", json!({}))
                .await
                .map_err(failed)?;
            let uris: Vec<&str> = answer["roots"]
                .as_array()
                .map(|roots| roots.iter().filter_map(|r| r["uri"].as_str()).collect())
                .unwrap_or_default();
            text(format!("The client's roots: {}", uris.join(", ")))
        }
        Asks::Confirm => {
            let question = json!({
                "message": "Please confirm",
                "requestedSchema": {
                    "type": "object",
                    "properties": {"ok": {"type": "boolean"}},
                    "required": ["ok"]
                }
            });
            let answer = client
                .ask("confirm", "elicitation/create", question)
                .await
                .map_err(failed)?;
            let state = if client.resumed() {
                "state-ok"
            } else {
                "no state came back"
            };
            text(format!("{state}: confirmed={}", answer["content"]["ok"]))
        }
        Asks::Three => {
            let name = client
                .ask(
                    "user_name",
                    "elicitation/create",
                    name_question("What is your name?", "name"),
                )
                .await;
            let greeting = client
                .ask(
                    "greeting",
                    "sampling/createMessage",
                    sampling_question("Generate a greeting", 50),
                )
                .await;
            let roots = client.ask("client_roots", "roots/list", json!({})).await;
            let (name, greeting, roots) = (
                name.map_err(failed)?,
                greeting.map_err(failed)?,
                roots.map_err(failed)?,
            );
            text(format!(
                "{} {}! ({} roots)",
                greeting["content"]["text"].as_str().unwrap_or("Hello"),
                accepted(&name, "name"),
                roots["roots"].as_array().map_or(0, Vec::len)
            ))
        }
        Asks::TwoSteps => {
            let name = client
                .ask(
                    "step1",
                    "elicitation/create",
                    name_question("Step 1: What is your name?", "name"),
                )
                .await
                .map_err(failed)?;
            let colour = client
                .ask(
                    "step2",
                    "elicitation/create",
                    name_question("Step 2: What is your favorite color?", "color"),
                )
                .await
                .map_err(failed)?;
            text(format!(
                "{} likes {}",
                accepted(&name, "name"),
                accepted(&colour, "color")
            ))
        }
        Asks::Declared => {
            let mut said = Vec::new();
            let mut first_error = None;
            if client.can_ask("elicitation/create") {
                match client
                    .ask(
                        "user_name",
                        "elicitation/create",
                        name_question("What is your name?", "name"),
                    )
                    .await
                {
                    Ok(answer) => said.push(accepted(&answer, "name")),
                    Err(e) => first_error = first_error.or(Some(e)),
                }
            }
            if client.can_ask("sampling/createMessage") {
                match client
                    .ask(
                        "greeting",
                        "sampling/createMessage",
                        sampling_question("Generate a greeting", 50),
                    )
                    .await
                {
                    Ok(answer) => said.push(
                        answer["content"]["text"]
                            .as_str()
                            .unwrap_or_default()
                            .to_string(),
                    ),
                    Err(e) => first_error = first_error.or(Some(e)),
                }
            }
            match first_error {
                Some(e) => Err(failed(e)),
                None => text(format!("Answers: {}", said.join("; "))),
            }
        }
    }
}
