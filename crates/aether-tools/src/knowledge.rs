//! The knowledge tools: `search_knowledge` (ranked full-text search over the caller's scopes:
//! its packs, its team's, its project's, its own) and `write_knowledge` (saves a document into
//! the workspace, journaled like any write, then indexes it; the save stands even when the
//! indexing fails, and the receipt says which happened, so an agent can stop retrying).

use aether_policy::journal::KnowledgeDoc;
use aether_policy::tool::groups;
use aether_policy::{Tier, ToolDef, ToolMeta};
use async_trait::async_trait;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::{CallContext, Content, Tool, ToolError, ToolOutput, parse_args, schema_of};

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct SearchArgs {
    /// Words to find (all of them must appear; no operators).
    #[schemars(length(min = 1, max = 500))]
    query: String,
    /// At most this many hits (default 10).
    #[schemars(range(min = 1, max = 50))]
    limit: Option<usize>,
}

#[derive(Serialize, JsonSchema)]
struct SearchOut {
    /// The scopes searched (from who you are).
    scopes: Vec<String>,
    hits: Vec<HitOut>,
}

#[derive(Serialize, JsonSchema)]
struct HitOut {
    scope: String,
    /// Where the document came from.
    source: String,
    title: String,
    /// The best passage, matches in [brackets].
    snippet: String,
    /// Higher is better.
    score: f64,
    /// The line of the first match.
    line: Option<usize>,
}

pub struct SearchKnowledge(ToolDef);

#[async_trait]
impl Tool for SearchKnowledge {
    fn def(&self) -> &ToolDef {
        &self.0
    }

    async fn call(&self, cx: CallContext, args: Value) -> Result<ToolOutput, ToolError> {
        let a: SearchArgs = parse_args(args)?;
        if !a.query.chars().any(char::is_alphanumeric) {
            return Err(ToolError::InvalidArguments(
                "the query has no words to search for".into(),
            ));
        }
        let scopes = cx.agent.knowledge_scopes();
        let hits = cx
            .ledger
            .knowledge_search(
                scopes.clone(),
                &a.query,
                a.limit.unwrap_or(10),
                cx.limits.knowledge_score_floor,
            )
            .await
            .map_err(ToolError::failed)?;
        let text = if hits.is_empty() {
            format!("Nothing in {} matches {:?}.", scopes.join(", "), a.query)
        } else {
            hits.iter()
                .map(|h| {
                    format!(
                        "{} ({}{}, score {:.2}): {}",
                        h.title,
                        h.source,
                        h.line.map(|l| format!(":{l}")).unwrap_or_default(),
                        h.score,
                        h.snippet
                    )
                })
                .collect::<Vec<_>>()
                .join("\n")
        };
        let out = SearchOut {
            scopes,
            hits: hits
                .into_iter()
                .map(|h| HitOut {
                    scope: h.scope,
                    source: h.source,
                    title: h.title,
                    snippet: h.snippet,
                    score: h.score,
                    line: h.line,
                })
                .collect(),
        };
        Ok(ToolOutput {
            content: vec![Content::Text(text)],
            structured: Some(serde_json::to_value(out).map_err(ToolError::failed)?),
            is_error: false,
        })
    }
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct WriteArgs {
    #[schemars(length(min = 1, max = 200))]
    title: String,
    /// The document (Markdown).
    #[schemars(length(min = 1, max = 1000000))]
    content: String,
    /// The file name under `knowledge/` (default: from the title).
    #[schemars(regex(pattern = r"^[A-Za-z0-9._-]{1,80}$"))]
    name: Option<String>,
    /// The root to save in (default: the first).
    root: Option<String>,
}

#[derive(Serialize, JsonSchema)]
struct WriteOut {
    /// Whether the document is saved in the workspace.
    saved: bool,
    root: String,
    path: String,
    bytes: usize,
    /// Whether it is in the search index (a saved document that is not can be indexed later
    /// by `aether knowledge import`; do not write it again).
    indexed: bool,
    /// Why it is not indexed.
    index_error: Option<String>,
    /// The scope it is indexed in.
    scope: String,
    /// The call to name to `aether undo`.
    call_id: String,
}

/// A file name from a title: lower case letters, digits and dashes.
fn slug(title: &str) -> String {
    let mut out = String::new();
    for c in title.chars() {
        if c.is_ascii_alphanumeric() {
            out.push(c.to_ascii_lowercase());
        } else if !out.ends_with('-') && !out.is_empty() {
            out.push('-');
        }
        if out.len() >= 60 {
            break;
        }
    }
    let out = out.trim_end_matches('-').to_string();
    if out.is_empty() { "note".into() } else { out }
}

pub struct WriteKnowledge(ToolDef);

#[async_trait]
impl Tool for WriteKnowledge {
    fn def(&self) -> &ToolDef {
        &self.0
    }

    async fn call(&self, cx: CallContext, args: Value) -> Result<ToolOutput, ToolError> {
        let a: WriteArgs = parse_args(args)?;
        let name = match &a.name {
            Some(n) if n.ends_with(".md") => n.clone(),
            Some(n) => format!("{n}.md"),
            None => format!("{}.md", slug(&a.title)),
        };
        let path = format!("knowledge/{name}");
        let body = format!("# {}\n\n{}\n", a.title.trim(), a.content.trim_end());
        // The save: the workspace's own write (checked, journaled, atomic, undoable).
        let mut write_args = json!({"path": path, "content": body});
        if let Some(root) = &a.root {
            write_args["root"] = json!(root);
        }
        let written = crate::workspace::WriteFile::new()
            .call(cx.clone(), write_args)
            .await?;
        let saved = written.structured.clone().unwrap_or_default();
        let root = saved["root"].as_str().unwrap_or_default().to_string();
        let scope = cx.agent.knowledge_home();
        // Then the index; its failure does not undo the save.
        let indexed = cx
            .ledger
            .knowledge_put(vec![KnowledgeDoc {
                scope: scope.clone(),
                source: format!("{root}:{path}"),
                title: a.title.trim().to_string(),
                body: body.clone(),
            }])
            .await;
        let out = WriteOut {
            saved: true,
            root: root.clone(),
            path: path.clone(),
            bytes: body.len(),
            indexed: indexed.is_ok(),
            index_error: indexed.as_ref().err().map(ToString::to_string),
            scope,
            call_id: cx.call_id.clone(),
        };
        let text = match &indexed {
            Ok(_) => format!("Saved {root}:{path} and indexed it; search_knowledge finds it."),
            Err(e) => format!(
                "Saved {root}:{path}, but it could not be indexed ({e}); it is kept, do not write it again."
            ),
        };
        Ok(ToolOutput {
            content: vec![Content::Text(text)],
            structured: Some(serde_json::to_value(out).map_err(ToolError::failed)?),
            is_error: false,
        })
    }
}

/// The knowledge tools.
pub fn tools() -> Vec<std::sync::Arc<dyn Tool>> {
    vec![
        std::sync::Arc::new(SearchKnowledge(ToolDef {
            name: "search_knowledge".into(),
            title: "Search knowledge".into(),
            group: groups::KNOWLEDGE.into(),
            tier: Tier::Standard,
            description: "Ranked full-text search over the knowledge you may read (your team's packs, your project's and your own documents): each hit with its source, line and a snippet.".into(),
            input_schema: schema_of::<SearchArgs>(),
            output_schema: schema_of::<SearchOut>(),
            arguments: Default::default(),
            meta: ToolMeta::read_only(),
        })),
        std::sync::Arc::new(WriteKnowledge(ToolDef {
            name: "write_knowledge".into(),
            title: "Write knowledge".into(),
            group: groups::KNOWLEDGE.into(),
            tier: Tier::Standard,
            description: "Save a document into the workspace (knowledge/NAME.md, undoable) and index it for search_knowledge. The receipt says what was saved and whether it was indexed: a saved document is kept even if indexing fails, so do not write it again.".into(),
            input_schema: schema_of::<WriteArgs>(),
            output_schema: schema_of::<WriteOut>(),
            arguments: Default::default(),
            meta: ToolMeta {
                idempotent: true,
                ..ToolMeta::local_writer()
            },
        })),
    ]
}

#[cfg(test)]
mod tests {
    #[test]
    fn titles_make_plain_file_names() {
        assert_eq!(super::slug("Release Notes: 1.0!"), "release-notes-1-0");
        assert_eq!(super::slug("../../etc/passwd"), "etc-passwd");
        assert_eq!(super::slug("ünïcode only ✓"), "n-code-only");
        assert_eq!(super::slug("???"), "note");
    }
}
