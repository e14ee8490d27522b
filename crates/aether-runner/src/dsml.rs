//! DeepSeek's text-form tool calls (DSML markup in the message content), converted to
//! standard calls. Anything that does not read exactly as the markup is quarantined by the
//! caller: nothing in such a reply runs.
//!
//! ```text
//! <｜DSML｜function_calls>
//! <｜DSML｜invoke name="read_file">
//! <｜DSML｜parameter name="path" string="true">README.md</｜DSML｜parameter>
//! <｜DSML｜parameter name="head" string="false">20</｜DSML｜parameter>
//! </｜DSML｜invoke>
//! </｜DSML｜function_calls>
//! ```

use std::sync::LazyLock;

use regex::Regex;
use serde_json::{Map, Value};

const MARK: &str = "<｜DSML｜";
const OPEN: &str = "<｜DSML｜function_calls>";
const CLOSE: &str = "</｜DSML｜function_calls>";

static INVOKE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r#"(?s)<｜DSML｜invoke name="([^"<>]*)">(.*?)</｜DSML｜invoke>"#).expect("valid")
});
static PARAMETER: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r#"(?s)<｜DSML｜parameter name="([^"<>]*)" string="(true|false)">(.*?)</｜DSML｜parameter>"#,
    )
    .expect("valid")
});

/// Whether `text` holds DSML markup at all.
pub fn present(text: &str) -> bool {
    text.contains(MARK) || text.contains("</｜DSML｜")
}

/// The text outside the markup, and each call's name and arguments; or why the markup
/// cannot be read.
pub fn parse(text: &str) -> Result<(String, Vec<(String, Value)>), String> {
    let mut rest = String::new();
    let mut calls = Vec::new();
    let mut tail = text;
    while let Some(start) = tail.find(OPEN) {
        rest.push_str(&tail[..start]);
        let inner = &tail[start + OPEN.len()..];
        let end = inner
            .find(CLOSE)
            .ok_or("a function_calls block is not closed")?;
        calls.extend(invokes(&inner[..end])?);
        tail = &inner[end + CLOSE.len()..];
    }
    rest.push_str(tail);
    if present(&rest) {
        return Err("DSML markup outside a function_calls block".into());
    }
    if calls.is_empty() {
        return Err("a function_calls block holds no invoke".into());
    }
    Ok((rest, calls))
}

fn invokes(block: &str) -> Result<Vec<(String, Value)>, String> {
    let mut calls = Vec::new();
    let mut last = 0;
    for m in INVOKE.captures_iter(block) {
        let whole = m.get(0).expect("match");
        stray(&block[last..whole.start()], "between invokes")?;
        last = whole.end();
        let name = &m[1];
        let valid = (1..=128).contains(&name.len())
            && name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'));
        if !valid {
            return Err(format!("{name:?} is not a tool name"));
        }
        calls.push((name.to_string(), parameters(&m[2], name)?));
    }
    stray(&block[last..], "after the last invoke")?;
    Ok(calls)
}

fn parameters(body: &str, tool: &str) -> Result<Value, String> {
    let mut args = Map::new();
    let mut last = 0;
    for m in PARAMETER.captures_iter(body) {
        let whole = m.get(0).expect("match");
        stray(&body[last..whole.start()], &format!("in invoke {tool}"))?;
        last = whole.end();
        let (name, is_string, value) = (&m[1], &m[2] == "true", &m[3]);
        if name.is_empty() {
            return Err(format!("a parameter of {tool} has no name"));
        }
        let value = if is_string {
            Value::String(value.to_string())
        } else {
            serde_json::from_str(value.trim())
                .map_err(|e| format!("parameter {name} of {tool} is not JSON: {e}"))?
        };
        if args.insert(name.to_string(), value).is_some() {
            return Err(format!("parameter {name} of {tool} is given twice"));
        }
    }
    stray(&body[last..], &format!("in invoke {tool}"))?;
    Ok(Value::Object(args))
}

/// Only whitespace may sit between the markup's elements.
fn stray(text: &str, place: &str) -> Result<(), String> {
    match text.trim() {
        "" => Ok(()),
        other => Err(format!(
            "unexpected text {place}: {:?}",
            other.chars().take(60).collect::<String>()
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn call(name: &str, params: &str) -> String {
        format!("<｜DSML｜invoke name=\"{name}\">\n{params}\n</｜DSML｜invoke>")
    }

    fn block(invokes: &[String]) -> String {
        format!("{OPEN}\n{}\n{CLOSE}", invokes.join("\n"))
    }

    #[test]
    fn calls_are_read_with_typed_parameters() {
        let text = format!(
            "Reading two files.\n{}",
            block(&[
                call(
                    "read_file",
                    "<｜DSML｜parameter name=\"path\" string=\"true\">src/a \"quoted\".rs</｜DSML｜parameter>\n<｜DSML｜parameter name=\"head\" string=\"false\">20</｜DSML｜parameter>",
                ),
                call(
                    "list_dir",
                    "<｜DSML｜parameter name=\"opts\" string=\"false\">{\"depth\": 2, \"all\": true}</｜DSML｜parameter>"
                ),
                call("list_roots", ""),
            ])
        );
        let (rest, calls) = parse(&text).unwrap();
        assert_eq!(rest, "Reading two files.\n");
        assert_eq!(
            calls[0],
            (
                "read_file".into(),
                json!({"path": "src/a \"quoted\".rs", "head": 20})
            )
        );
        assert_eq!(
            calls[1],
            (
                "list_dir".into(),
                json!({"opts": {"depth": 2, "all": true}})
            )
        );
        assert_eq!(calls[2], ("list_roots".into(), json!({})));
    }

    #[test]
    fn malformed_markup_is_refused() {
        let p = |name: &str, s: &str, v: &str| {
            format!("<｜DSML｜parameter name=\"{name}\" string=\"{s}\">{v}</｜DSML｜parameter>")
        };
        let cases = [
            (format!("{OPEN}\n{}", call("read_file", "")), "not closed"),
            (block(&[]), "holds no invoke"),
            (block(&[call("read file", "")]), "is not a tool name"),
            (
                block(&[call("read_file", &p("head", "false", "twenty"))]),
                "is not JSON",
            ),
            (
                block(&[call(
                    "read_file",
                    &format!("{}{}", p("path", "true", "a"), p("path", "true", "b")),
                )]),
                "given twice",
            ),
            (
                block(&[call(
                    "read_file",
                    &format!("junk {}", p("path", "true", "a")),
                )]),
                "unexpected text",
            ),
            (
                format!(
                    "{}\nthen junk",
                    block(&[call("read_file", "")]).replace(CLOSE, &format!("junk{CLOSE}"))
                ),
                "unexpected text",
            ),
            (
                format!(
                    "{}\n<｜DSML｜invoke name=\"x\">",
                    block(&[call("read_file", "")])
                ),
                "outside a function_calls block",
            ),
            (
                block(&[call(
                    "read_file",
                    "<｜DSML｜parameter name=\"path\" string=\"maybe\">a</｜DSML｜parameter>",
                )]),
                "unexpected text",
            ),
        ];
        for (text, expect) in cases {
            let e = parse(&text).unwrap_err();
            assert!(e.contains(expect), "{text}\n=> {e}");
        }
    }
}
