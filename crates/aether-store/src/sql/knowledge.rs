//! The knowledge index: SQLite's FTS5 with BM25 ranking, or PostgreSQL's full-text search
//! (`ts_rank_cd`, English stemming). The two rank on different scales; each search's scores
//! are comparable among themselves, and the operator's floor is set for the database in use.

use super::SqlStore;
use super::governance::immediate;
use crate::db::{Dialect, Row, SqlExt, Value, args, bind};
use crate::{KnowledgeDoc, KnowledgeHit, Result, StoreError};

/// `text` as an FTS5 query: every word a quoted term (so nothing in it is FTS5 syntax), all of
/// them required. `None` when there is no word.
pub fn fts_query(text: &str) -> Option<String> {
    let terms: Vec<String> = text
        .split(|c: char| !c.is_alphanumeric() && c != '_')
        .filter(|t| !t.is_empty())
        .take(32)
        .map(|t| format!("\"{}\"", t.replace('"', "")))
        .collect();
    (!terms.is_empty()).then(|| terms.join(" "))
}

/// The search statement in `dialect`, for `scopes` scopes (the text first, then the scopes,
/// then the limit). Columns: scope, source, title, snippet, score (higher is better), body.
fn search_sql(dialect: Dialect, scopes: usize) -> String {
    let marks = vec!["?"; scopes].join(", ");
    match dialect {
        Dialect::Sqlite => format!(
            "SELECT k.scope, k.source, k.title, snippet(knowledge_fts, 1, '[', ']', '…', 24), -bm25(knowledge_fts, 5.0, 1.0), k.body
             FROM knowledge_fts JOIN knowledge k ON k.id = knowledge_fts.rowid
             WHERE knowledge_fts MATCH ? AND k.scope IN ({marks})
             ORDER BY bm25(knowledge_fts, 5.0, 1.0) LIMIT ?"
        ),
        // plainto_tsquery reads the words as words (all required), never as query syntax.
        Dialect::Postgres => format!(
            "SELECT k.scope, k.source, k.title,
                    ts_headline('english', k.body, q, 'StartSel=[, StopSel=], MaxWords=24, MinWords=8, MaxFragments=1, FragmentDelimiter=…'),
                    ts_rank_cd(k.tsv, q)::float8 * 10.0, k.body
             FROM knowledge k, plainto_tsquery('english', ?) q
             WHERE k.tsv @@ q AND k.scope IN ({marks})
             ORDER BY 5 DESC, k.id LIMIT ?"
        ),
    }
}

impl SqlStore {
    /// Adds or replaces documents (by scope and source), all in one transaction.
    pub async fn knowledge_put(&self, docs: Vec<KnowledgeDoc>) -> Result<usize> {
        self.write(move |conn| {
            let context = "index knowledge";
            let mut tx = immediate(conn, context)?;
            let now = crate::now_us();
            for d in &docs {
                tx.execute(
                    "INSERT INTO knowledge (scope, source, title, body, updated_us) VALUES (?, ?, ?, ?, ?)
                     ON CONFLICT (scope, source) DO UPDATE SET title = excluded.title, body = excluded.body, updated_us = excluded.updated_us",
                    args![d.scope, d.source, d.title, d.body, now],
                )
                .map_err(StoreError::sql(context))?;
            }
            tx.commit().map_err(StoreError::sql(context))?;
            Ok(docs.len())
        })
        .await
    }

    pub async fn knowledge_search(
        &self,
        scopes: Vec<String>,
        text: String,
        limit: usize,
        floor: f64,
    ) -> Result<Vec<KnowledgeHit>> {
        let Some(fts) = fts_query(&text) else {
            return Err(StoreError::Invalid(
                "the query has no words to search for".into(),
            ));
        };
        if scopes.is_empty() {
            return Ok(Vec::new());
        }
        self.read(move |conn| {
            let context = "search knowledge";
            let dialect = conn.dialect();
            let sql = search_sql(dialect, scopes.len());
            let mut args: Vec<Value> = vec![match dialect {
                Dialect::Sqlite => fts.clone().into(),
                Dialect::Postgres => fts.replace('"', "").into(),
            }];
            args.extend(scopes.iter().map(|s| s.clone().into()));
            args.push((limit.clamp(1, 100) as i64).into());
            let words: Vec<String> = text
                .split(|c: char| !c.is_alphanumeric() && c != '_')
                .filter(|t| !t.is_empty())
                .map(str::to_lowercase)
                .collect();
            let hits = conn
                .query_map(&sql, &bind(&args), |r: &Row| {
                    let body: String = r.get(5)?;
                    let lower = body.to_lowercase();
                    let line = words
                        .iter()
                        .filter_map(|w| lower.find(w.as_str()))
                        .min()
                        .map(|at| lower[..at].matches('\n').count() + 1);
                    Ok(KnowledgeHit {
                        scope: r.get(0)?,
                        source: r.get(1)?,
                        title: r.get(2)?,
                        snippet: r.get(3)?,
                        score: r.get(4)?,
                        line,
                    })
                })
                .map_err(StoreError::sql(context))?;
            Ok(hits.into_iter().filter(|h| h.score >= floor).collect())
        })
        .await
    }
}
