//! `code_review`: a structured, severity-tagged review of one file by a model, through the
//! calling agent's model connection (`[models.NAME]`, the one its runs would use).
//!
//! The file is opened as `read_file` opens one (beneath its root, the credential filter and
//! the path rules judged where it lands), so a file the caller may not read is not reviewed.
//! The model is asked for JSON following [`REVIEW_SCHEMA`] (`response_format`, which
//! llama.cpp's server enforces with a grammar), within a bounded number of tokens; its answer
//! is read leniently (the first JSON object in it), severities mapped onto four, lines kept
//! only where the file has them. An answer that is not such JSON is returned as the summary,
//! marked `parsed: false`, with no findings: the tool never invents a finding.

use std::sync::Arc;

use aether_policy::tool::groups;
use aether_policy::{ArgumentKinds, Risk, Tier, ToolDef, ToolMeta};
use aether_tools_core::{CallContext, Tool, ToolError, ToolOutput, parse_args, schema_of};
use async_trait::async_trait;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::host::Host;
use crate::model::Ask;

/// Files reviewed at most (a model's context is the real bound; this keeps a request sane).
const MAX_FILE_BYTES: u64 = 48 * 1024;
/// Findings kept at most.
const MAX_FINDINGS: usize = 50;

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct Args {
    /// The file to review, relative to the root.
    path: String,
    /// Name of the root (see list_roots). Defaults to the first root.
    #[serde(default)]
    root: Option<String>,
    /// What to look at especially (e.g. "error handling"), at most 500 characters.
    #[serde(default)]
    #[schemars(length(max = 500))]
    focus: Option<String>,
    /// Most tokens the review may take (64 to 4096; never more than the connection's
    /// max_tokens). Default 1024.
    #[serde(default)]
    #[schemars(range(min = 64, max = 4096))]
    max_tokens: Option<u32>,
}

/// How much a finding matters.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    Critical,
    Major,
    Minor,
    Nit,
}

impl Severity {
    /// A severity as models write them, onto the four.
    fn read(text: &str) -> Severity {
        match text.trim().to_ascii_lowercase().as_str() {
            "critical" | "blocker" | "severe" | "security" => Severity::Critical,
            "major" | "high" | "error" | "bug" => Severity::Major,
            "nit" | "low" | "info" | "style" | "trivial" | "suggestion" => Severity::Nit,
            _ => Severity::Minor,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, JsonSchema)]
pub struct Finding {
    pub severity: Severity,
    /// The line it is about, where the model named one the file has.
    pub line: Option<u64>,
    pub title: String,
    pub detail: String,
}

#[derive(Serialize, JsonSchema)]
struct Output {
    root: String,
    path: String,
    /// The model connection that reviewed it.
    connection: String,
    lines: usize,
    summary: String,
    /// Most severe first.
    findings: Vec<Finding>,
    /// Whether the model's answer was the JSON asked for (else it is the summary, and there
    /// are no findings).
    parsed: bool,
    /// Whether the model finished its answer (else the token bound cut it short, and the
    /// review holds what was complete).
    complete: bool,
    prompt_tokens: u64,
    completion_tokens: u64,
}

/// Findings asked for at most, and the lengths of their texts (so that a review fits the
/// tokens it may take; a grammar-holding server keeps to them).
const ASKED_FINDINGS: usize = 8;

/// The shape the model is asked to answer in. Its keys come out in alphabetical order (a
/// JSON object's, as serde_json keeps them), and a grammar-holding server writes them in that
/// order, so the overall judgement is `assessment`: written first, it survives an answer cut
/// short by the token bound.
pub fn review_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "assessment": {"type": "string", "maxLength": 400},
            "findings": {
                "type": "array",
                "maxItems": ASKED_FINDINGS,
                "items": {
                    "type": "object",
                    "properties": {
                        "severity": {"type": "string", "enum": ["critical", "major", "minor", "nit"]},
                        "line": {"type": "integer"},
                        "title": {"type": "string", "maxLength": 80},
                        "detail": {"type": "string", "maxLength": 300}
                    },
                    "required": ["severity", "line", "title", "detail"],
                    "additionalProperties": false
                }
            }
        },
        "required": ["assessment", "findings"],
        "additionalProperties": false
    })
}

const INSTRUCTIONS: &str = "You review code. Read the file (each line starts with its number) and answer with JSON only: \
{\"assessment\": one or two sentences, \"findings\": [{\"severity\": \"critical\"|\"major\"|\"minor\"|\"nit\", \"line\": the line number, \
\"title\": a few words, \"detail\": what is wrong and how to fix it}]}. Report real problems only, most severe first, at most 8; \
an empty list is a fine answer for good code.";

/// The model's answer read as a review: the first JSON object in it, if it has an
/// assessment or findings; `lines` bounds the line numbers kept. An object cut short (the
/// token bound reached) gives what was complete in it: the assessment if it was closed, each
/// finding that was. `None` when nothing of a review is there.
pub fn read_review(answer: &str, lines: usize) -> Option<(String, Vec<Finding>)> {
    let start = answer.find('{')?;
    let body = &answer[start..];
    let value = match serde_json::Deserializer::from_str(body)
        .into_iter::<Value>()
        .next()
    {
        Some(Ok(value)) => value,
        _ => salvage(body)?,
    };
    let summary = value["assessment"]
        .as_str()
        .or(value["summary"].as_str())
        .map(str::trim)
        .map(String::from);
    let items = value["findings"].as_array();
    if summary.is_none() && items.is_none() {
        return None;
    }
    let text = |v: &Value| {
        v.as_str()
            .unwrap_or("")
            .trim()
            .chars()
            .take(2000)
            .collect::<String>()
    };
    let mut findings: Vec<Finding> = items
        .into_iter()
        .flatten()
        .filter(|f| f.is_object())
        .map(|f| Finding {
            severity: Severity::read(f["severity"].as_str().unwrap_or("")),
            line: f["line"]
                .as_u64()
                .or_else(|| f["line"].as_str().and_then(|s| s.trim().parse().ok()))
                .filter(|l| *l >= 1 && *l as usize <= lines),
            title: text(&f["title"]),
            detail: text(&f["detail"]),
        })
        .filter(|f| !f.title.is_empty() || !f.detail.is_empty())
        .take(MAX_FINDINGS)
        .collect();
    findings.sort_by_key(|f| f.severity as u8);
    Some((summary.unwrap_or_default(), findings))
}

/// What is complete in a review object cut short: its `assessment` string if closed, and the
/// findings closed before the cut.
fn salvage(body: &str) -> Option<Value> {
    let mut found = serde_json::Map::new();
    if let Some(at) = body.find("\"assessment\"") {
        let rest = body[at + "\"assessment\"".len()..]
            .trim_start()
            .strip_prefix(':')?;
        if let Some(Ok(Value::String(s))) = serde_json::Deserializer::from_str(rest.trim_start())
            .into_iter::<Value>()
            .next()
        {
            found.insert("assessment".into(), Value::String(s));
        }
    }
    if let Some(at) = body.find("\"findings\"") {
        let mut rest = body[at + "\"findings\"".len()..].trim_start();
        rest = rest.strip_prefix(':').map(str::trim_start).unwrap_or(rest);
        if let Some(mut items) = rest.strip_prefix('[') {
            let mut kept = Vec::new();
            loop {
                items = items.trim_start().trim_start_matches(',').trim_start();
                let mut stream = serde_json::Deserializer::from_str(items).into_iter::<Value>();
                match stream.next() {
                    Some(Ok(item @ Value::Object(_))) => {
                        kept.push(item);
                        items = &items[stream.byte_offset()..];
                    }
                    _ => break,
                }
            }
            found.insert("findings".into(), Value::Array(kept));
        }
    }
    (!found.is_empty()).then_some(Value::Object(found))
}

pub struct CodeReview {
    def: ToolDef,
    host: Arc<Host>,
}

impl CodeReview {
    pub fn new(host: Arc<Host>) -> CodeReview {
        CodeReview {
            def: ToolDef {
                name: "code_review".into(),
                title: "Review code with a model".into(),
                group: groups::QUALITY.into(),
                tier: Tier::Standard,
                description: "A structured, severity-tagged review (critical, major, minor, nit; each with its line) of one \
                     file by a model, through this agent's model connection ([models] in aether.toml). The file is read \
                     as read_file reads it; the review is bounded in tokens."
                    .into(),
                input_schema: schema_of::<Args>(),
                output_schema: schema_of::<Output>(),
                arguments: ArgumentKinds::paths(&["path"]),
                // It changes nothing here, but the file leaves for the model connection and
                // tokens are spent: not a side-effect-free call, so its receipt is durable
                // before the file is sent.
                meta: ToolMeta {
                    risk: Risk::Low,
                    read_only: false,
                    reaches_network: false,
                    needs_confirmation: false,
                    idempotent: false,
                    destructive: false,
                },
            },
            host,
        }
    }
}

#[async_trait]
impl Tool for CodeReview {
    fn def(&self) -> &ToolDef {
        &self.def
    }

    async fn call(&self, cx: CallContext, args: Value) -> Result<ToolOutput, ToolError> {
        let a: Args = parse_args(args)?;
        if a.focus.as_ref().is_some_and(|f| f.chars().count() > 500) {
            return Err(ToolError::InvalidArguments(
                "focus is at most 500 characters".into(),
            ));
        }
        let max_tokens = a.max_tokens.unwrap_or(1024);
        if !(64..=4096).contains(&max_tokens) {
            return Err(ToolError::InvalidArguments(
                "max_tokens is 64 to 4096".into(),
            ));
        }
        let file = aether_tools_core::read_text_file(
            &cx,
            a.root.as_deref(),
            &a.path,
            MAX_FILE_BYTES,
            "a review (review it in parts)",
        )?;
        let (root, path, text) = (file.root, file.rel, file.text);
        let models = &self.host.models;
        if !models.any() {
            return Err(ToolError::failed(
                "code_review needs a model: no model connection is configured ([models.NAME] in aether.toml)",
            ));
        }
        let connection = models
            .choose(&cx.agent.name, None)
            .map_err(ToolError::failed)?;
        let pipeline = self
            .host
            .pipeline()
            .ok_or_else(|| ToolError::failed("the pipeline is not running"))?;
        let client = models
            .client(pipeline.store(), &connection, &cx.agent.name)
            .await
            .map_err(ToolError::failed)?;
        let lines = text.lines().count();
        let numbered: String = text
            .lines()
            .enumerate()
            .map(|(i, l)| format!("{}| {l}\n", i + 1))
            .collect();
        let focus = a
            .focus
            .as_deref()
            .map(|f| format!("\nLook especially at: {f}\n"))
            .unwrap_or_default();
        let messages = [
            json!({"role": "system", "content": INSTRUCTIONS}),
            json!({"role": "user", "content": format!("File {path}:{focus}\n{numbered}")}),
        ];
        let ask = Ask {
            max_tokens: Some(max_tokens),
            schema: Some(("code_review".into(), review_schema())),
        };
        let reply = tokio::select! {
            reply = client.chat_with(&messages, None, cx.trace.as_deref(), ask) => reply,
            _ = cx.cancel.cancelled() => return Err(ToolError::Cancelled),
        }
        .map_err(|e| ToolError::failed(format!("the model connection {connection}: {e}")))?;
        let complete = reply.finish_reason.as_deref() != Some("length");
        let answer = reply.content.unwrap_or_default();
        let (summary, findings, parsed) = match read_review(&answer, lines) {
            Some((summary, findings)) => (summary, findings, true),
            None => (
                answer.trim().chars().take(4000).collect(),
                Vec::new(),
                false,
            ),
        };
        let mut shown = format!("{root}:{path} reviewed by {connection}: {summary}\n");
        for f in &findings {
            let at = f.line.map(|l| format!(" line {l}")).unwrap_or_default();
            shown.push_str(&format!(
                "- [{:?}]{at} {}: {}\n",
                f.severity, f.title, f.detail
            ));
        }
        if !parsed {
            shown.push_str(
                "(the model did not answer in the review's JSON; its text is the summary)\n",
            );
        }
        if !complete {
            shown.push_str(&format!(
                "(cut short at {max_tokens} tokens: this is what was complete; ask for more with max_tokens)\n"
            ));
        }
        let output = Output {
            root,
            path,
            connection,
            lines,
            summary,
            findings,
            parsed,
            complete,
            prompt_tokens: reply.usage.prompt,
            completion_tokens: reply.usage.completion,
        };
        Ok(ToolOutput::with_structured(
            shown.trim_end().to_string(),
            serde_json::to_value(output).map_err(ToolError::failed)?,
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    proptest::proptest! {
        // proptest's default runs 256 cases, or `PROPTEST_CASES`.
        #![proptest_config(proptest::prelude::ProptestConfig {
            failure_persistence: None,
            ..proptest::prelude::ProptestConfig::default()
        })]

        /// Whatever a model answers, cut anywhere: the reader never panics, never invents a
        /// review where the answer has no JSON object, keeps lines the file has, and at most
        /// its bound of findings, most severe first.
        #[test]
        fn any_answer_is_read_within_bounds(
            answer in "(\\{|\\}|\\[|\\]|,|:|\"assessment\"|\"findings\"|\"severity\"|\"line\"|\"title\"|\"detail\"|\"major\"|\"nit\"|[0-9]{1,3}|\"[a-z ]{0,6}\"|\\PC{0,3}){0,60}",
            lines in 0usize..20,
        ) {
            let read = read_review(&answer, lines);
            if !answer.contains('{') {
                proptest::prop_assert!(read.is_none());
            }
            if let Some((_, findings)) = read {
                proptest::prop_assert!(findings.len() <= MAX_FINDINGS);
                for f in &findings {
                    proptest::prop_assert!(f.line.is_none_or(|l| l >= 1 && l as usize <= lines));
                }
                proptest::prop_assert!(findings.windows(2).all(|w| w[0].severity as u8 <= w[1].severity as u8));
            }
        }
    }

    #[test]
    fn an_answer_is_read_as_a_review_leniently_and_never_invented() {
        let answer = "Sure! {\"assessment\": \" Mostly fine. \", \"findings\": [\
            {\"severity\": \"nit\", \"line\": 2, \"title\": \"name\", \"detail\": \"rename x\"},\
            {\"severity\": \"HIGH\", \"line\": \"3\", \"title\": \"bug\", \"detail\": \"off by one\"},\
            {\"severity\": \"critical\", \"line\": 99, \"title\": \"sql\", \"detail\": \"injection\"},\
            {\"severity\": \"minor\"}, 7]} and more text {";
        let (summary, findings) = read_review(answer, 10).unwrap();
        assert_eq!(summary, "Mostly fine.");
        let got: Vec<(Severity, Option<u64>, &str)> = findings
            .iter()
            .map(|f| (f.severity, f.line, f.title.as_str()))
            .collect();
        assert_eq!(
            got,
            [
                (Severity::Critical, None, "sql"),
                (Severity::Major, Some(3), "bug"),
                (Severity::Nit, Some(2), "name"),
            ]
        );
        // Cut short by the token bound: what was complete is kept.
        let cut = "{\"assessment\": \"Risky.\", \"findings\": [{\"severity\": \"major\", \"line\": 2, \"title\": \"divides by zero\", \"detail\": \"check len\"}, {\"severity\": \"nit\", \"li";
        let (summary, findings) = read_review(cut, 4).unwrap();
        assert_eq!(summary, "Risky.");
        assert_eq!(findings.len(), 1);
        assert_eq!(
            (findings[0].severity, findings[0].line),
            (Severity::Major, Some(2))
        );
        let (summary, findings) = read_review("{\"findings\": [{\"severity\": \"minor\", \"line\": 1, \"title\": \"t\", \"detail\": \"d\"}", 4).unwrap();
        assert_eq!((summary.as_str(), findings.len()), ("", 1));
        assert_eq!(read_review("no json here", 10), None);
        assert_eq!(read_review("{\"other\": 1}", 10), None);
    }
}
