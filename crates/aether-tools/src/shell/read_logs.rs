//! `read_logs` (Elevated): the last lines of a log file under a root, or of the system journal
//! through `journalctl` where the machine has it, optionally only the lines matching a filter.
//!
//! A file is opened like every read (confined to the roots, credential files refused, sealed
//! roots verified) and read backwards from its end, at most [`SCAN_BYTES`] of it, so a huge
//! log costs no more than its tail. The journal is read by running `journalctl` (absolute
//! path, no shell, the same fixed environment as `run_command`, a time limit) with arguments
//! Aether builds from checked values: a unit name and a time such as `2h`, never free text.

use std::io::{Read, Seek, SeekFrom};
use std::time::Duration;

use aether_policy::ArgumentKinds;
use aether_policy::tool::groups;
use aether_policy::{Tier, ToolDef, ToolMeta};
use async_trait::async_trait;
use regex::Regex;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::{CallContext, Tool, ToolError, ToolOutput, parse_args, schema_of};

/// Bytes read from the end of a file at most.
const SCAN_BYTES: u64 = 16 << 20;
/// Lines returned at most.
const MAX_LINES: usize = 5_000;
const JOURNALCTL: [&str; 2] = ["/usr/bin/journalctl", "/bin/journalctl"];

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct Args {
    /// A log file, relative to the root. Leave it out to read the system journal.
    #[serde(default)]
    path: Option<String>,
    /// Name of the root (see list_roots). Defaults to the first root.
    #[serde(default)]
    root: Option<String>,
    /// How many of the last (matching) lines to return (1-5000, default 200).
    #[serde(default)]
    #[schemars(range(min = 1, max = 5000))]
    lines: Option<usize>,
    /// Only lines containing this text (or matching it, with `regex`).
    #[serde(default)]
    filter: Option<String>,
    /// Treat `filter` as a regular expression (Rust syntax).
    #[serde(default)]
    regex: bool,
    /// Journal only: a systemd unit, e.g. "nginx.service".
    #[serde(default)]
    unit: Option<String>,
    /// Journal only: how far back, e.g. "30m", "2h", "1d".
    #[serde(default)]
    since: Option<String>,
}

#[derive(Serialize, JsonSchema)]
struct Output {
    /// "file" or "journal".
    source: String,
    lines: Vec<String>,
    /// Fewer lines than asked for may have come back because only part of the log was read
    /// (the last 16 MiB of a file, or a window of the journal when filtering).
    scan_limited: bool,
}

pub struct ReadLogs {
    def: ToolDef,
}

impl ReadLogs {
    pub fn new() -> ReadLogs {
        ReadLogs {
            def: ToolDef {
                name: "read_logs".into(),
                title: "Read logs".into(),
                group: groups::SHELL.into(),
                tier: Tier::Elevated,
                description:
                    "Read the last lines of a log file under a root, or of the system journal \
                     (journalctl) when no path is given, optionally only lines matching a filter \
                     (text, or a regex). Journal reads take a unit and a time like \"2h\"."
                        .into(),
                input_schema: schema_of::<Args>(),
                output_schema: schema_of::<Output>(),
                arguments: ArgumentKinds::paths(&["path"]),
                meta: ToolMeta::read_only(),
            },
        }
    }
}

impl Default for ReadLogs {
    fn default() -> Self {
        ReadLogs::new()
    }
}

#[async_trait]
impl Tool for ReadLogs {
    fn def(&self) -> &ToolDef {
        &self.def
    }

    async fn call(&self, cx: CallContext, args: Value) -> Result<ToolOutput, ToolError> {
        let args: Args = parse_args(args)?;
        let want = args.lines.unwrap_or(200).clamp(1, MAX_LINES);
        let filter = Filter::new(args.filter.as_deref(), args.regex)?;
        let output = match &args.path {
            Some(path) => {
                if args.unit.is_some() || args.since.is_some() {
                    return Err(ToolError::InvalidArguments(
                        "unit and since are for the journal; leave path out to read it".into(),
                    ));
                }
                let mut rel = String::new();
                let loc = cx.roots.locate(args.root.as_deref(), path, &mut rel)?;
                let (file, _) = loc.root.open_file(loc.rel, cx.opening())?;
                crate::blocking(move || tail(file, want, &filter)).await?
            }
            None => journal(want, &filter, args.unit.as_deref(), args.since.as_deref()).await?,
        };
        let text = output.lines.join("\n");
        let structured = serde_json::to_value(&output).unwrap_or(Value::Null);
        Ok(ToolOutput::with_structured(text, structured))
    }
}

enum Filter {
    All,
    Text(String),
    Regex(Regex),
}

impl Filter {
    fn new(filter: Option<&str>, regex: bool) -> Result<Filter, ToolError> {
        Ok(match filter {
            None | Some("") => Filter::All,
            Some(f) if regex => Filter::Regex(
                regex::RegexBuilder::new(f)
                    .size_limit(1 << 20)
                    .build()
                    .map_err(|e| ToolError::InvalidArguments(format!("filter: {e}")))?,
            ),
            Some(f) => Filter::Text(f.to_string()),
        })
    }

    fn keeps(&self, line: &str) -> bool {
        match self {
            Filter::All => true,
            Filter::Text(t) => line.contains(t.as_str()),
            Filter::Regex(r) => r.is_match(line),
        }
    }
}

/// The last `want` lines of `file` that pass `filter`, reading at most [`SCAN_BYTES`] from
/// its end.
fn tail(mut file: std::fs::File, want: usize, filter: &Filter) -> Result<Output, ToolError> {
    let len = file
        .metadata()
        .map_err(|e| ToolError::failed(format!("cannot read the log: {e}")))?
        .len();
    let start = len.saturating_sub(SCAN_BYTES);
    file.seek(SeekFrom::Start(start))
        .map_err(|e| ToolError::failed(format!("cannot read the log: {e}")))?;
    let mut bytes = Vec::with_capacity((len - start) as usize);
    file.take(SCAN_BYTES)
        .read_to_end(&mut bytes)
        .map_err(|e| ToolError::failed(format!("cannot read the log: {e}")))?;
    let text = String::from_utf8_lossy(&bytes);
    let mut all: Vec<&str> = text.lines().collect();
    // A scan that began mid-file began mid-line: that partial line is not shown.
    if start > 0 && !all.is_empty() {
        all.remove(0);
    }
    let kept: Vec<String> = all
        .iter()
        .rev()
        .filter(|l| filter.keeps(l))
        .take(want)
        .map(|l| l.to_string())
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
        .collect();
    Ok(Output {
        source: "file".into(),
        scan_limited: start > 0 && kept.len() < want,
        lines: kept,
    })
}

/// A journal unit name: letters, digits and `@._:-`, nothing a flag could start with.
fn checked_unit(unit: &str) -> Result<&str, ToolError> {
    let ok = !unit.is_empty()
        && unit.len() <= 256
        && !unit.starts_with('-')
        && unit
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "@._:-".contains(c));
    if ok {
        Ok(unit)
    } else {
        Err(ToolError::InvalidArguments(format!(
            "unit {unit:?} is not a unit name (letters, digits and @._:- only)"
        )))
    }
}

/// `30m`, `2h`, `1d` as journalctl's relative time (`-30min`, `-2h`, `-1d`).
fn checked_since(since: &str) -> Result<String, ToolError> {
    let bad = || {
        ToolError::InvalidArguments(format!(
            "since {since:?}: a number and a unit, e.g. 30m, 2h, 1d"
        ))
    };
    let (number, unit) = since.split_at(since.find(|c: char| !c.is_ascii_digit()).ok_or_else(bad)?);
    let n: u32 = number.parse().map_err(|_| bad())?;
    let unit = match unit {
        "s" => "s",
        "m" => "min",
        "h" => "h",
        "d" => "d",
        _ => return Err(bad()),
    };
    Ok(format!("-{n}{unit}"))
}

async fn journal(
    want: usize,
    filter: &Filter,
    unit: Option<&str>,
    since: Option<&str>,
) -> Result<Output, ToolError> {
    let Some(exe) = JOURNALCTL
        .iter()
        .find(|p| std::path::Path::new(p).is_file())
    else {
        return Err(ToolError::failed(
            "this machine has no journalctl; give a log file's path instead",
        ));
    };
    let mut args: Vec<String> = vec![
        "--no-pager".into(),
        "--quiet".into(),
        "-o".into(),
        "short-iso".into(),
    ];
    if let Some(unit) = unit {
        args.push(format!("--unit={}", checked_unit(unit)?));
    }
    if let Some(since) = since {
        args.push(format!("--since={}", checked_since(since)?));
    }
    // Without a filter, journalctl itself keeps the last lines; with one, Aether filters a
    // bounded window.
    let window = match filter {
        Filter::All => want,
        _ => (want * 20).min(100_000),
    };
    args.push(format!("--lines={window}"));
    let mut command = tokio::process::Command::new(exe);
    command
        .args(&args)
        .env_clear()
        .env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .env("LANG", "C.UTF-8")
        .env("LC_ALL", "C.UTF-8")
        .env("TERM", "dumb")
        .env("TZ", "UTC")
        .stdin(std::process::Stdio::null())
        .kill_on_drop(true);
    let out = tokio::time::timeout(Duration::from_secs(30), command.output())
        .await
        .map_err(|_| ToolError::failed("journalctl did not answer within 30 s"))?
        .map_err(|e| ToolError::failed(format!("journalctl did not start: {e}")))?;
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        return Err(ToolError::failed(format!(
            "journalctl failed: {}",
            err.trim().chars().take(500).collect::<String>()
        )));
    }
    let text = String::from_utf8_lossy(&out.stdout);
    let read = text.lines().count();
    let kept: Vec<String> = text
        .lines()
        .filter(|l| filter.keeps(l))
        .map(String::from)
        .collect();
    let skip = kept.len().saturating_sub(want);
    // A filtered read looked at a window of the journal: fewer matches than asked for may
    // mean more lie before it.
    let scan_limited = !matches!(filter, Filter::All) && read >= window && kept.len() < want;
    Ok(Output {
        source: "journal".into(),
        lines: kept.into_iter().skip(skip).collect(),
        scan_limited,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn journal_arguments_are_built_from_checked_values() {
        assert_eq!(checked_since("30m").unwrap(), "-30min");
        assert_eq!(checked_since("2h").unwrap(), "-2h");
        for bad in ["", "h", "2 h", "-2h", "2h; rm", "--output=x", "2w"] {
            assert!(checked_since(bad).is_err(), "{bad}");
        }
        assert!(checked_unit("nginx.service").is_ok());
        assert!(checked_unit("getty@tty1.service").is_ok());
        for bad in ["", "--output-fields=x", "-k", "a b", "a;b", "a/b"] {
            assert!(checked_unit(bad).is_err(), "{bad}");
        }
    }
}
