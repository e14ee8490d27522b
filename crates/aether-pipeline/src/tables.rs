//! Data sources: a table an upstream tool returns (rows of records) is kept in the store, at
//! most [`DATASET_ROWS`] rows, for the operator to export; the model sees at most
//! [`MODEL_ROWS`] of them and a reference to the rest.
//!
//! A table is a JSON array of objects, either the whole result or the one array member of an
//! object (`{"rows": [...]}`), found in the structured content or, failing that, in a result
//! whose only block is text holding such JSON.

use aether_store::{DATASET_ROWS, Dataset, Report};
use aether_tools_core::{Content, ToolOutput};
use serde_json::{Map, Value};

/// The most rows of a table the model sees.
pub const MODEL_ROWS: usize = 50;

/// Data sets are kept this many days, and at most this many (the newest); checked hourly.
pub const DATASET_DAYS: i64 = 90;
pub const DATASETS_KEPT: usize = 1_000;

/// A table found in a result: where it is, and its rows.
struct Found<'a> {
    rows: &'a [Value],
    /// The member of the object that holds the rows (None: the rows are the whole value).
    member: Option<&'a str>,
}

fn find(value: &Value) -> Option<Found<'_>> {
    let is_table = |rows: &[Value]| !rows.is_empty() && rows.iter().all(Value::is_object);
    match value {
        Value::Array(rows) if is_table(rows) => Some(Found { rows, member: None }),
        Value::Object(map) => {
            let mut arrays = map.iter().filter(|(_, v)| v.is_array());
            let (key, rows) = arrays.next()?;
            if arrays.next().is_some() {
                return None;
            }
            let rows = rows.as_array()?;
            is_table(rows).then_some(Found {
                rows,
                member: Some(key.as_str()),
            })
        }
        _ => None,
    }
}

/// `value` with its table cut to `keep` rows.
fn trimmed(value: &Value, found: &Found<'_>, keep: usize) -> Value {
    let rows = Value::Array(found.rows.iter().take(keep).cloned().collect());
    match (value, found.member) {
        (Value::Object(map), Some(member)) => {
            let mut map = map.clone();
            map.insert(member.to_string(), rows);
            Value::Object(map)
        }
        _ => rows,
    }
}

/// The table in `output`, if there is one: the data set to keep, and the output the model is
/// to see instead (None: the output is small enough to pass as it is).
pub fn take(
    output: &ToolOutput,
    call_id: &str,
    agent: &str,
    tool: &str,
    arguments: &Value,
) -> Option<(Dataset, Option<ToolOutput>)> {
    if output.is_error {
        return None;
    }
    // Where the table is: the structured content, or the one text block.
    let text_json;
    let (value, in_text) = match &output.structured {
        Some(v) if find(v).is_some() => (v, false),
        _ => match output.content.as_slice() {
            [Content::Text(text)] if text.trim_start().starts_with(['[', '{']) => {
                text_json = serde_json::from_str::<Value>(text).ok()?;
                (&text_json, true)
            }
            _ => return None,
        },
    };
    let found = find(value)?;
    let mut columns: Vec<String> = Vec::new();
    let mut rows: Vec<Map<String, Value>> = Vec::with_capacity(found.rows.len().min(DATASET_ROWS));
    for row in found.rows.iter().take(DATASET_ROWS) {
        let Value::Object(record) = row else {
            return None;
        };
        for key in record.keys() {
            if !columns.iter().any(|c| c == key) {
                columns.push(key.clone());
            }
        }
        rows.push(record.clone());
    }
    let total = found.rows.len();
    let dataset = Dataset {
        call_id: call_id.to_string(),
        at_us: aether_store::now_us(),
        agent: agent.to_string(),
        tool: tool.to_string(),
        arguments: arguments.to_string(),
        columns,
        rows,
        dropped: total.saturating_sub(DATASET_ROWS) as i64,
    };
    if total <= MODEL_ROWS {
        return Some((dataset, None));
    }
    let cut = trimmed(value, &found, MODEL_ROWS);
    let kept = total.min(DATASET_ROWS);
    let note = format!(
        "[{MODEL_ROWS} of {total} rows shown. The table ({kept} rows{}) is kept as data set {call_id}; \
         an operator can export it (aether sources export {call_id}, or GET /api/sources/datasets/{call_id}?format=csv).]",
        if total > kept {
            format!(", the first {kept} of {total}")
        } else {
            String::new()
        }
    );
    let mut shown = ToolOutput {
        content: Vec::new(),
        structured: output.structured.clone(),
        is_error: false,
    };
    if in_text {
        shown.content.push(Content::Text(cut.to_string()));
    } else {
        shown.structured = Some(cut);
        // Text blocks carrying the whole table are replaced by the cut one; others stay.
        for block in &output.content {
            match block {
                Content::Text(t) if t.len() > 4096 => {
                    shown.content.push(Content::Text(
                        shown
                            .structured
                            .as_ref()
                            .map(Value::to_string)
                            .unwrap_or_default(),
                    ));
                }
                other => shown.content.push(other.clone()),
            }
        }
    }
    shown.content.push(Content::Text(note));
    Some((dataset, Some(shown)))
}

/// A text cell a spreadsheet would read as a formula (`=`, `+`, `-`, `@`, or a tab or carriage
/// return first) gets a leading `'`: an upstream's data must not run in the operator's
/// spreadsheet. Everything else is as it is.
pub fn inert(cell: &str) -> String {
    if cell.starts_with(['=', '+', '-', '@', '\t', '\r']) {
        format!("'{cell}")
    } else {
        cell.to_string()
    }
}

/// A data set as CSV: a header of its columns, then one line per row (strings as they are,
/// formula-like ones made inert, column names too: they come from the upstream as well;
/// other values as JSON; a missing value empty).
pub fn to_csv(dataset: &Dataset) -> Result<String, String> {
    let mut out = csv::Writer::from_writer(Vec::new());
    out.write_record(dataset.columns.iter().map(|c| inert(c)))
        .map_err(|e| e.to_string())?;
    for row in &dataset.rows {
        let cells = dataset.columns.iter().map(|c| match row.get(c) {
            None | Some(Value::Null) => String::new(),
            Some(Value::String(s)) => inert(s),
            Some(other) => other.to_string(),
        });
        out.write_record(cells).map_err(|e| e.to_string())?;
    }
    let bytes = out.into_inner().map_err(|e| e.to_string())?;
    String::from_utf8(bytes).map_err(|e| e.to_string())
}

/// A data set as JSON: its call, columns and rows.
pub fn to_json(dataset: &Dataset) -> Value {
    serde_json::json!({
        "call_id": dataset.call_id,
        "tool": dataset.tool,
        "agent": dataset.agent,
        "at_us": dataset.at_us,
        "columns": dataset.columns,
        "rows": dataset.rows,
        "rows_dropped": dataset.dropped,
    })
}

/// Runs a report's call through the pipeline as its agent; returns the call id and a summary
/// of how it ended. Its table (if it returned one) is the data set of that call id.
pub async fn run_report(
    pipeline: &crate::Pipeline,
    report: &Report,
    by: &str,
) -> Result<(String, String), String> {
    let ctx = pipeline
        .session(
            &report.agent,
            crate::Transport::InProcess,
            // The session names the report and who ran it (the audit's session column).
            format!(
                "report:{}:run by {by}:{}",
                report.name,
                aether_store::now_us()
            ),
        )
        .map_err(|e| e.to_string())?;
    let arguments = match serde_json::from_str::<Value>(&report.arguments)
        .map_err(|e| format!("report {}'s arguments are not JSON: {e}", report.name))?
    {
        Value::Object(map) => Some(map),
        _ => None,
    };
    let result = pipeline
        .call(
            &ctx,
            &report.tool,
            arguments,
            std::sync::Arc::new(aether_tools_core::NoClient),
            tokio_util::sync::CancellationToken::new(),
        )
        .await;
    let summary = match &result.outcome {
        crate::CallOutcome::Ran(out) if !out.is_error => "it ran".to_string(),
        crate::CallOutcome::Ran(out) => format!(
            "it failed: {}",
            out.content
                .iter()
                .filter_map(|c| match c {
                    Content::Text(t) => Some(t.as_str()),
                    _ => None,
                })
                .collect::<Vec<_>>()
                .join(" ")
        ),
        crate::CallOutcome::Refused(r) => format!("it was refused: {}", r.reason),
        other => format!("{other:?}"),
    };
    if !matches!(&result.outcome, crate::CallOutcome::Ran(out) if !out.is_error) {
        return Err(format!("report {} did not run: {summary}", report.name));
    }
    Ok((result.call_id, summary))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn rows(n: usize) -> Value {
        Value::Array(
            (0..n)
                .map(|i| json!({"id": i, "name": format!("row {i}")}))
                .collect(),
        )
    }

    #[test]
    fn a_small_table_is_kept_and_passes_as_it_is() {
        let out = ToolOutput::text(rows(3).to_string());
        let (ds, shown) = take(&out, "c1", "a", "t", &json!({})).unwrap();
        assert_eq!(ds.rows.len(), 3);
        assert_eq!(ds.columns, ["id", "name"]);
        assert!(shown.is_none());
    }

    #[test]
    fn a_big_table_shows_fifty_rows_and_keeps_five_thousand() {
        let out = ToolOutput {
            content: vec![Content::Text("x".repeat(5000))],
            structured: Some(json!({"rows": rows(6000), "source": "db"})),
            is_error: false,
        };
        let (ds, shown) = take(&out, "c1", "a", "t", &json!({"q": 1})).unwrap();
        assert_eq!(ds.rows.len(), DATASET_ROWS);
        assert_eq!(ds.dropped, 1000);
        let shown = shown.unwrap();
        let s = shown.structured.unwrap();
        assert_eq!(s["rows"].as_array().unwrap().len(), MODEL_ROWS);
        assert_eq!(s["source"], "db");
        let Content::Text(note) = shown.content.last().unwrap() else {
            panic!()
        };
        assert!(
            note.contains("50 of 6000 rows shown") && note.contains("c1"),
            "{note}"
        );
    }

    #[test]
    fn csv_cells_never_run_as_formulas() {
        let out = ToolOutput::text(
            json!([{"a": "=HYPERLINK(\"http://x\")", "b": "+1", "c": "@SUM(A1)", "d": -3}])
                .to_string(),
        );
        let (ds, _) = take(&out, "c", "a", "t", &json!({})).unwrap();
        let text = to_csv(&ds).unwrap();
        assert_eq!(
            text.lines().nth(1),
            Some("\"'=HYPERLINK(\"\"http://x\"\")\",'+1,'@SUM(A1),-3")
        );
        // Column names come from the upstream too.
        let out = ToolOutput::text(json!([{"=cmd|' /C calc'!A0": "x", "ok": "y"}]).to_string());
        let (ds, _) = take(&out, "c", "a", "t", &json!({})).unwrap();
        let header = to_csv(&ds).unwrap().lines().next().unwrap().to_string();
        assert!(header.contains("'=cmd"), "{header}");
        assert!(
            !header
                .split(',')
                .any(|h| h.starts_with('=') || h.starts_with("\"=")),
            "{header}"
        );
    }

    #[test]
    fn csv_quotes_what_needs_quoting() {
        let out = ToolOutput::text(
            json!([{"a": "x,y", "b": 1}, {"a": "say \"hi\"\nthere", "c": null}]).to_string(),
        );
        let (ds, _) = take(&out, "c", "a", "t", &json!({})).unwrap();
        let text = to_csv(&ds).unwrap();
        assert_eq!(text, "a,b,c\n\"x,y\",1,\n\"say \"\"hi\"\"\nthere\",,\n");
    }

    #[test]
    fn what_is_not_a_table_is_left_alone() {
        for v in [
            json!([1, 2]),
            json!({"a": [{"x": 1}], "b": [{"y": 2}]}),
            json!([]),
        ] {
            assert!(take(&ToolOutput::text(v.to_string()), "c", "a", "t", &json!({})).is_none());
        }
        assert!(take(&ToolOutput::text("plain words"), "c", "a", "t", &json!({})).is_none());
        let mut err = ToolOutput::text(rows(100).to_string());
        err.is_error = true;
        assert!(take(&err, "c", "a", "t", &json!({})).is_none());
    }
}
