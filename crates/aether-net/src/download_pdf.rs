//! `download_pdf` (Restricted): a PDF from an allowed host, as text. Every call waits for a
//! person (the tier), then fetches through the egress gate like the other research tools,
//! checks that the bytes are a PDF, and extracts the text of its pages with `lopdf`.
//!
//! Limits: 20 MiB downloaded, 500 pages read, 30 s of extraction. Parsing runs off the async
//! threads with panics caught; a document built to decompress to something huge can still
//! cost memory while it is read, which is one reason a person approves each download.

use std::sync::Arc;
use std::time::Duration;

use aether_policy::ArgumentKinds;
use aether_policy::{AgentProfile, Risk, Tier, ToolDef};
use aether_tools_core::{CallContext, Tool, ToolError, ToolOutput, parse_args, schema_of};
use async_trait::async_trait;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::client::{Request, Resolve, fetch};

/// Bytes downloaded at most.
const MAX_PDF: usize = 20 << 20;
/// Pages read at most.
const MAX_PAGES: usize = 500;
/// Time for the extraction.
const EXTRACT_SECONDS: u64 = 30;

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct Args {
    /// The PDF's URL (http or https). Its host must be in the agent's allowed domains.
    url: String,
    /// Characters of text to return at most (1000-100000, default 20000).
    #[serde(default)]
    #[schemars(range(min = 1000, max = 100000))]
    max_chars: Option<usize>,
    /// Seconds for the download, redirects included (1-120, default 60).
    #[serde(default)]
    #[schemars(range(min = 1, max = 120))]
    timeout_seconds: Option<u64>,
}

#[derive(Serialize, JsonSchema)]
struct Output {
    /// Where the PDF came from, after redirects.
    url: String,
    bytes: u64,
    /// Pages in the document.
    pages: u64,
    /// Pages whose text was read (at most 500).
    pages_read: u64,
    /// Pages whose text could not be read, and why.
    unreadable_pages: Vec<String>,
    /// The text, pages separated by form feeds.
    text: String,
    /// The text was longer than max_chars, or the document than 500 pages, and was cut.
    truncated: bool,
}

pub struct DownloadPdf {
    def: ToolDef,
    resolver: Arc<dyn Resolve>,
}

impl DownloadPdf {
    pub fn new(resolver: Arc<dyn Resolve>) -> DownloadPdf {
        let mut def = crate::research_def(
            "download_pdf",
            "Download a PDF as text",
            "Download a PDF from a host the operator allowed and get the text of its pages. \
                 Every download waits for a person's approval first. At most 20 MiB and 500 pages; \
                 the text is cut at max_chars with a marker. Redirects are followed (at most 5), \
                 each checked again.",
            schema_of::<Args>(),
            schema_of::<Output>(),
            Risk::High,
            true,
        )
        .declaring(ArgumentKinds::urls(&["url"]));
        def.tier = Tier::Restricted;
        def.meta.needs_confirmation = true;
        DownloadPdf { def, resolver }
    }
}

#[async_trait]
impl Tool for DownloadPdf {
    fn def(&self) -> &ToolDef {
        &self.def
    }

    fn available_to(&self, agent: &AgentProfile) -> Result<(), String> {
        crate::reaches_somewhere(agent)
    }

    async fn call(&self, cx: CallContext, args: Value) -> Result<ToolOutput, ToolError> {
        let args: Args = parse_args(args)?;
        let policy = crate::policy_for(&cx.agent)?;
        let max_chars = args.max_chars.unwrap_or(20_000).clamp(1_000, 100_000);
        let response = fetch(
            &self.resolver,
            &policy,
            cx.destinations.as_ref(),
            Request {
                method: reqwest::Method::GET,
                url: args.url,
                headers: vec![("Accept".into(), "application/pdf".into())],
                body: None,
                timeout: Duration::from_secs(args.timeout_seconds.unwrap_or(60).clamp(1, 120)),
                max_body: MAX_PDF,
            },
        )
        .await?;
        if !(200..300).contains(&response.status) {
            return Err(ToolError::failed(format!(
                "{} answered HTTP {}, not a PDF",
                response.url, response.status
            )));
        }
        if response.truncated {
            return Err(ToolError::failed(format!(
                "{} is larger than {} MiB; Aether does not download it",
                response.url,
                MAX_PDF >> 20
            )));
        }
        // The bytes decide, not the server's label: a PDF starts with `%PDF-` (some tools put
        // a little junk before it).
        let head = &response.body[..response.body.len().min(1024)];
        if !head.windows(5).any(|w| w == b"%PDF-") {
            return Err(ToolError::failed(format!(
                "{} is not a PDF (content type {}; it does not start with %PDF-)",
                response.url,
                response.content_type().as_deref().unwrap_or("not given")
            )));
        }
        let bytes = response.body.len() as u64;
        let body = response.body;
        let task = tokio::task::spawn_blocking(move || {
            std::panic::catch_unwind(move || extract(&body))
                .unwrap_or_else(|_| Err("the PDF reader failed on this document".into()))
        });
        let extracted = match tokio::time::timeout(Duration::from_secs(EXTRACT_SECONDS), task).await
        {
            Ok(Ok(Ok(e))) => e,
            Ok(Ok(Err(why))) => {
                return Err(ToolError::failed(format!(
                    "{} could not be read as a PDF: {why}",
                    response.url
                )));
            }
            Ok(Err(_)) => return Err(ToolError::failed("the PDF reader stopped")),
            Err(_) => {
                return Err(ToolError::failed(format!(
                    "reading the PDF took longer than {EXTRACT_SECONDS} s"
                )));
            }
        };
        let cut = extracted.text.chars().count() > max_chars;
        let text = aether_policy::truncate::bound_text(&extracted.text, max_chars).into_owned();
        let output = Output {
            url: response.url,
            bytes,
            pages: extracted.pages,
            pages_read: extracted.pages_read,
            unreadable_pages: extracted.unreadable,
            text,
            truncated: cut || extracted.pages_read < extracted.pages,
        };
        let shown = format!(
            "{} ({} pages, {} bytes)\n\n{}",
            output.url, output.pages, output.bytes, output.text
        );
        let structured = serde_json::to_value(&output).unwrap_or(Value::Null);
        Ok(ToolOutput::with_structured(shown, structured))
    }
}

struct Extracted {
    text: String,
    pages: u64,
    pages_read: u64,
    unreadable: Vec<String>,
}

fn extract(bytes: &[u8]) -> Result<Extracted, String> {
    let doc = lopdf::Document::load_mem(bytes).map_err(|e| e.to_string())?;
    if doc.is_encrypted() {
        return Err("it is encrypted".into());
    }
    let pages = doc.get_pages();
    let mut text = String::new();
    let mut unreadable = Vec::new();
    let mut read = 0u64;
    for &number in pages.keys().take(MAX_PAGES) {
        read += 1;
        match doc.extract_text(&[number]) {
            Ok(page) => {
                if !text.is_empty() {
                    text.push('\u{c}');
                    text.push('\n');
                }
                text.push_str(page.trim_end());
            }
            Err(e) => unreadable.push(format!("page {number}: {e}")),
        }
    }
    Ok(Extracted {
        text,
        pages: pages.len() as u64,
        pages_read: read,
        unreadable,
    })
}
