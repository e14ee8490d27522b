//! The tool interface, as `axum-core` is to axum: what a tool is ([`Tool`]: a definition and
//! an async `call`), what it gets ([`CallContext`]: the calling agent, the roots it may touch
//! and their confinement ([`Roots`]), the limits, a cancellation token, the way back to the
//! client ([`ClientLink`]), the journal ([`Ledger`]), the operator's rules on each network hop
//! and each open), and what it returns ([`ToolOutput`], [`ToolError`]).
//!
//! The built-in tools (`aether-tools`), the network tools (`aether-net`), the runner's
//! orchestration tools and the upstreams' tools build on this alone. It knows files (the
//! roots' confinement) and nothing of MCP, HTTP or SQL.

pub mod ledger;
pub mod roots;

use std::fmt;
use std::sync::Arc;

use aether_policy::config::Limits;
use aether_policy::{AgentProfile, ToolDef};
use async_trait::async_trait;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

pub use ledger::{Ledger, LedgerError, NoLedger};
pub use roots::{Root, RootError, Roots, SealManifest};

/// One block of a tool's result.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub enum Content {
    Text(String),
    Image {
        data_base64: String,
        mime_type: String,
    },
    Audio {
        data_base64: String,
        mime_type: String,
    },
    Resource {
        uri: String,
        mime_type: String,
        text: Option<String>,
        blob_base64: Option<String>,
    },
}

/// What a tool hands back: blocks for the model, and structured data matching the tool's
/// output schema.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ToolOutput {
    pub content: Vec<Content>,
    pub structured: Option<Value>,
    /// The tool ran and reports failure (MCP `isError`).
    pub is_error: bool,
}

impl ToolOutput {
    pub fn text(text: impl Into<String>) -> ToolOutput {
        ToolOutput {
            content: vec![Content::Text(text.into())],
            ..Default::default()
        }
    }

    /// Text for the model plus structured data for programs.
    pub fn with_structured(text: impl Into<String>, structured: Value) -> ToolOutput {
        ToolOutput {
            content: vec![Content::Text(text.into())],
            structured: Some(structured),
            is_error: false,
        }
    }
}

/// How a tool failed. Every variant carries a message meant for the caller.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum ToolError {
    /// Confinement refused the request (a path outside the roots, a credential file, ...).
    #[error("{message}")]
    Denied { rule: &'static str, message: String },
    /// The arguments parse but make no sense together.
    #[error("{0}")]
    InvalidArguments(String),
    /// The thing asked for is not there, is too big, is binary, ...
    #[error("{0}")]
    Failed(String),
    #[error("the call was cancelled")]
    Cancelled,
}

impl ToolError {
    pub fn denied(rule: &'static str, message: impl fmt::Display) -> ToolError {
        ToolError::Denied {
            rule,
            message: message.to_string(),
        }
    }

    pub fn failed(message: impl fmt::Display) -> ToolError {
        ToolError::Failed(message.to_string())
    }
}

/// A ledger that did not do what a tool asked failed the call, with the ledger's message; a
/// tool that can do something about a particular variant matches it first.
impl From<LedgerError> for ToolError {
    fn from(e: LedgerError) -> ToolError {
        ToolError::failed(e)
    }
}

/// Severity of a log message sent to the client (RFC 5424 names, as MCP uses them).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum LogLevel {
    Debug,
    Info,
    Notice,
    Warning,
    Error,
    Critical,
    Alert,
    Emergency,
}

/// A question for the person at the client (MCP's elicitation, without MCP): what to say, and
/// what the answer holds. The server translates it for its transport.
#[derive(Clone, Debug, PartialEq)]
pub struct Question {
    pub message: String,
    pub answer: AnswerShape,
}

/// What an answer to a [`Question`] holds.
#[derive(Clone, Debug, PartialEq)]
pub enum AnswerShape {
    /// Named fields, each a yes/no or a line of text.
    Fields(Vec<Field>),
    /// A flat JSON Schema object as the client should show it (the conformance fixtures ask
    /// for every kind of field MCP has).
    Schema(Value),
}

/// One field of an answer.
#[derive(Clone, Debug, PartialEq)]
pub struct Field {
    pub name: String,
    pub title: String,
    pub kind: FieldKind,
    pub required: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FieldKind {
    YesNo,
    Text,
}

/// The person's answer to a [`Question`].
#[derive(Clone, Debug, PartialEq)]
pub enum Reply {
    /// Answered, with the fields' values (as the client sent them: check each).
    Accepted(serde_json::Map<String, Value>),
    Declined,
    Cancelled,
}

impl Reply {
    /// `accept`, `decline` or `cancel`, as MCP names them.
    pub fn action(&self) -> &'static str {
        match self {
            Reply::Accepted(_) => "accept",
            Reply::Declined => "decline",
            Reply::Cancelled => "cancel",
        }
    }
}

/// The way back to whoever made the call, while the call runs. The server implements it for
/// its transport; in-process callers may implement it as a no-op.
#[async_trait]
pub trait ClientLink: Send + Sync {
    /// Reports progress, if the caller asked for progress.
    async fn progress(&self, progress: f64, total: Option<f64>, message: Option<String>);
    /// Sends a log message, if the client's level lets it through.
    async fn log(&self, level: LogLevel, data: Value);
    /// Asks the client's model for a completion (MCP sampling). `params` and the answer are
    /// in MCP's `sampling/createMessage` shape.
    async fn create_message(&self, params: Value) -> Result<Value, String>;
    /// Asks the client's user a question (MCP elicitation); `Err` when it cannot be asked.
    async fn elicit(&self, question: Question) -> Result<Reply, String>;
    /// Asks the client for `method` (`elicitation/create`, `sampling/createMessage` or
    /// `roots/list`) with `params`, under `key`. A client of the handshake era is sent the
    /// request and its answer comes back here. A 2026-07-28 client answers by making the
    /// call again with its answers: the answer under `key` comes back if it sent one, else
    /// this is `Err` and the call ends with the client asked (an input-required result), so
    /// a tool asks before it changes anything. `Err` also when the client cannot be asked.
    async fn ask(&self, key: &str, method: &str, params: Value) -> Result<Value, String> {
        let _ = (key, params);
        Err(format!("this caller cannot answer {method} requests"))
    }
    /// Whether the client declared what `method` needs (elicitation, sampling, roots).
    fn can_ask(&self, method: &str) -> bool {
        let _ = method;
        false
    }
    /// Whether this call resumes an earlier round of itself: it came back with the state
    /// this server gave its client (2026-07-28's `requestState`), checked as untampered.
    fn resumed(&self) -> bool {
        false
    }
    /// Whether the client answers in rounds (2026-07-28): a question ends the call, and the
    /// client makes it again with the answer.
    fn in_rounds(&self) -> bool {
        false
    }
    /// Whether this call asked its client something it will answer in a next round: the
    /// call's own ending is not its result (an idempotency key keeps nothing of it).
    fn asking(&self) -> bool {
        false
    }
    /// Asks the client's user `question` under `key` (see [`ClientLink::ask`]).
    async fn elicit_as(&self, key: &str, question: Question) -> Result<Reply, String> {
        let _ = key;
        self.elicit(question).await
    }
    /// Keeps `value` under `key` for the next round of this call: it comes back only with
    /// the state this server seals, which the client cannot change (it is signed, not
    /// encrypted: keep nothing secret in it). Nothing is kept where the client does not
    /// answer in rounds.
    fn remember(&self, key: &str, value: Value) {
        let _ = (key, value);
    }
    /// What an earlier round of this call kept under `key` ([`ClientLink::remember`]).
    fn recall(&self, key: &str) -> Option<Value> {
        let _ = key;
        None
    }
}

/// Judges a destination reached during a call (a redirect) by the rules the call's own URL
/// was judged by. `Err` stops the call there.
pub trait DestinationCheck: Send + Sync {
    fn check(&self, url: &str, host: &str) -> Result<(), ToolError>;
}

/// No rules on destinations (tests, and calls outside the pipeline).
#[derive(Debug, Default)]
pub struct AnyDestination;

impl DestinationCheck for AnyDestination {
    fn check(&self, _url: &str, _host: &str) -> Result<(), ToolError> {
        Ok(())
    }
}

/// Judges the file or folder an open really landed on by the operator's path rules, as the
/// pipeline judged the paths the call named: the root consults it on every open it checks
/// ([`Root::open_file`], [`Root::open_folder`], [`Root::open_parent`]), so a rule is never
/// judged on one file and applied to another (a folder swapped for a link in between). `Err`
/// refuses the open.
pub trait PathCheck: Send + Sync {
    /// `real_rel`: where the open landed, relative to `root`; `is_dir`: a folder.
    fn check(&self, root: &Root, real_rel: &str, is_dir: bool) -> Result<(), ToolError>;
}

/// No rules on paths (tests, and calls outside the pipeline).
#[derive(Debug, Default)]
pub struct AnyPath;

impl PathCheck for AnyPath {
    fn check(&self, _: &Root, _: &str, _: bool) -> Result<(), ToolError> {
        Ok(())
    }
}

/// What an open is checked against besides the root's own confinement: the credential and
/// private files, and the call's path rules.
#[derive(Clone, Copy)]
pub struct Opening<'a> {
    pub credentials: &'a aether_policy::paths::CredentialFilter,
    pub paths: &'a dyn PathCheck,
}

impl<'a> Opening<'a> {
    /// An open outside any call (tests, the operator's tools): no path rules.
    pub fn unruled(credentials: &'a aether_policy::paths::CredentialFilter) -> Opening<'a> {
        Opening {
            credentials,
            paths: &AnyPath,
        }
    }
}

impl CallContext {
    /// How this call's opens are checked.
    pub fn opening(&self) -> Opening<'_> {
        Opening {
            credentials: self.roots.credentials(),
            paths: &*self.paths,
        }
    }
}

/// A [`ClientLink`] that drops progress and logs and cannot ask anything.
#[derive(Debug, Default)]
pub struct NoClient;

#[async_trait]
impl ClientLink for NoClient {
    async fn progress(&self, _: f64, _: Option<f64>, _: Option<String>) {}
    async fn log(&self, _: LogLevel, _: Value) {}
    async fn create_message(&self, _: Value) -> Result<Value, String> {
        Err("this caller cannot answer sampling requests".into())
    }
    async fn elicit(&self, _: Question) -> Result<Reply, String> {
        Err("this caller cannot answer elicitation requests".into())
    }
}

/// Everything a tool may use while it runs.
#[derive(Clone)]
pub struct CallContext {
    pub call_id: String,
    /// The caller's session (what `revert_file` undoes is this session's changes).
    pub session: String,
    pub agent: Arc<AgentProfile>,
    pub roots: Arc<Roots>,
    pub limits: Arc<Limits>,
    pub cancel: CancellationToken,
    pub client: Arc<dyn ClientLink>,
    /// The journal every change is recorded in before it is made.
    pub ledger: Arc<dyn Ledger>,
    /// The operator's rules on a destination a network tool reaches mid-call (a redirect
    /// hop), which the pipeline judged only for the URL it was given.
    pub destinations: Arc<dyn DestinationCheck>,
    /// The operator's path rules on what each open really lands on ([`PathCheck`]).
    pub paths: Arc<dyn PathCheck>,
    /// The call's receipt, when it rides the call's first journal commit (a tool whose only
    /// effects are file changes it journals first); `None` when the receipt was written
    /// before the tool ran.
    pub receipt: Option<Arc<aether_policy::journal::PendingReceipt>>,
    /// The person the call is made for, when its caller brought an OAuth access token (its
    /// subject), and what that token's scopes reach: work the call starts on the caller's
    /// behalf (a delegated run) carries both.
    pub subject: Option<String>,
    pub scope: Option<Arc<aether_policy::ScopeReach>>,
    /// The W3C trace context (`traceparent`) to hand on to the servers the call reaches on
    /// the operator's behalf — an upstream MCP server, a model connection — and to the calls
    /// a delegated run makes: the call's own span when telemetry is on, else the caller's
    /// context as it came. Never sent to the destinations a tool's arguments name.
    pub trace: Option<String>,
}

#[async_trait]
pub trait Tool: Send + Sync + 'static {
    fn def(&self) -> &ToolDef;
    /// Whether this agent could ever use the tool (say, a command runner for an agent whose
    /// project allows no command). A tool that is not is neither offered nor run for it:
    /// offered equals runnable.
    fn available_to(&self, _agent: &aether_policy::AgentProfile) -> Result<(), String> {
        Ok(())
    }
    /// Why a person must approve this particular call before it runs (say, a shell command
    /// that deletes recursively); `None` for most calls. The pipeline asks before the
    /// receipt, on arguments that passed the schema.
    fn needs_person(&self, _args: &Value) -> Option<String> {
        None
    }
    /// Whether the tool's only effects are file changes it journals before making them, so
    /// that its call's receipt may ride its first journal commit ([`CallContext::receipt`])
    /// instead of taking a commit of its own before the tool runs.
    fn journals_every_effect(&self) -> bool {
        false
    }
    async fn call(&self, cx: CallContext, args: Value) -> Result<ToolOutput, ToolError>;
}

/// Microseconds since the Unix epoch, as the journal and the command log record times.
pub fn now_us() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_micros() as i64)
        .unwrap_or(0)
}

/// Parses arguments that the pipeline has already validated against the schema.
pub fn parse_args<T: serde::de::DeserializeOwned>(args: Value) -> Result<T, ToolError> {
    serde_json::from_value(args)
        .map_err(|e| ToolError::InvalidArguments(format!("invalid arguments: {e}")))
}

/// The JSON Schema of `T`, as a tool's input or output schema, in the subset every client
/// reads (see [`portable`]).
pub fn schema_of<T: schemars::JsonSchema>() -> Value {
    let mut schema = serde_json::to_value(schemars::schema_for!(T)).unwrap_or(Value::Null);
    if let Some(obj) = schema.as_object_mut() {
        // The Rust type name means nothing to a client.
        obj.remove("title");
    }
    portable(&mut schema);
    schema
}

/// The `format` values JSON Schema (2020-12) defines; any other is a Rust type's name
/// (`uint64`, `int32`, …) that clients warn about and validators ignore.
const STANDARD_FORMATS: &[&str] = &[
    "date-time",
    "date",
    "time",
    "duration",
    "email",
    "idn-email",
    "hostname",
    "idn-hostname",
    "ipv4",
    "ipv6",
    "uri",
    "uri-reference",
    "iri",
    "iri-reference",
    "uuid",
    "uri-template",
    "json-pointer",
    "relative-json-pointer",
    "regex",
];

/// Keywords that describe a value rather than constrain it: they stay beside an `anyOf`.
const ANNOTATIONS: &[&str] = &["description", "default", "title", "examples", "deprecated"];

/// Where `schema` is not what [`portable`] makes: every `type` array and every `format`
/// JSON Schema does not define, anywhere in it (empty for a portable schema).
pub fn unportable(schema: &Value) -> Vec<String> {
    let mut found = Vec::new();
    let mut stack = vec![schema];
    while let Some(node) = stack.pop() {
        match node {
            Value::Object(obj) => {
                if let Some(t @ Value::Array(_)) = obj.get("type") {
                    found.push(format!("type {t}"));
                }
                if let Some(f) = obj.get("format").and_then(Value::as_str)
                    && !STANDARD_FORMATS.contains(&f)
                {
                    found.push(format!("format {f}"));
                }
                stack.extend(obj.values());
            }
            Value::Array(items) => stack.extend(items),
            _ => {}
        }
    }
    found
}

/// Rewrites `schema` (in place, everywhere in it) into what every MCP client accepts: no
/// non-standard `format`, and a nullable value as `anyOf` of the type and `null` instead of
/// a `type` array (which the inspector's `--strict` flags as unportable). The values it
/// accepts are the same.
pub fn portable(schema: &mut Value) {
    match schema {
        Value::Object(obj) => {
            if obj
                .get("format")
                .and_then(Value::as_str)
                .is_some_and(|f| !STANDARD_FORMATS.contains(&f))
            {
                obj.remove("format");
            }
            for value in obj.values_mut() {
                portable(value);
            }
            let nullable = obj.get("type").and_then(Value::as_array).and_then(|types| {
                let others: Vec<Value> = types
                    .iter()
                    .filter(|t| t.as_str() != Some("null"))
                    .cloned()
                    .collect();
                (others.len() < types.len()).then_some(others)
            });
            if let Some(others) = nullable {
                obj.remove("type");
                let mut value = serde_json::Map::new();
                value.insert(
                    "type".into(),
                    match others.len() {
                        1 => others[0].clone(),
                        _ => Value::Array(others),
                    },
                );
                let constraints: Vec<String> = obj
                    .keys()
                    .filter(|k| !ANNOTATIONS.contains(&k.as_str()))
                    .cloned()
                    .collect();
                for k in constraints {
                    if let Some(v) = obj.remove(&k) {
                        value.insert(k, v);
                    }
                }
                obj.insert(
                    "anyOf".into(),
                    Value::Array(vec![
                        Value::Object(value),
                        serde_json::json!({ "type": "null" }),
                    ]),
                );
            }
        }
        Value::Array(items) => items.iter_mut().for_each(portable),
        _ => {}
    }
}

/// A text file a tool read whole: its root's name, its path in the root, how it is shown, and
/// its text.
#[derive(Debug)]
pub struct TextFile {
    pub root: String,
    pub rel: String,
    pub shown: String,
    pub text: String,
}

/// Reads the UTF-8 text file `path` of `root` whole, opened as `read_file` opens one (beneath
/// its root, the credential filter and the call's path rules judged where it lands); a file
/// over `max` bytes is refused (`what` names it: "a script", "a stylesheet").
pub fn read_text_file(
    cx: &CallContext,
    root: Option<&str>,
    path: &str,
    max: u64,
    what: &str,
) -> Result<TextFile, ToolError> {
    use std::io::Read;
    let mut rel = String::new();
    let loc = cx.roots.locate(root, path, &mut rel)?;
    let (file, meta) = loc.root.open_file(loc.rel, cx.opening())?;
    let shown = loc.root.display(loc.rel);
    if meta.len() > max {
        return Err(ToolError::InvalidArguments(format!(
            "{shown} is {} bytes, over the {max}-byte limit for {what}",
            meta.len()
        )));
    }
    let mut bytes = Vec::new();
    file.take(max)
        .read_to_end(&mut bytes)
        .map_err(|e| ToolError::failed(format!("{shown}: {e}")))?;
    let text = String::from_utf8(bytes)
        .map_err(|_| ToolError::InvalidArguments(format!("{shown} is not UTF-8 text")))?;
    Ok(TextFile {
        root: loc.root.name.clone(),
        rel: loc.rel.to_string(),
        shown,
        text,
    })
}

/// What [`SaveFile::save`] wrote.
#[derive(Clone, Debug)]
pub struct Saved {
    pub root: String,
    pub rel: String,
    /// `root:path`, as tools show a file.
    pub shown: String,
    pub created: bool,
    /// The file already held exactly these bytes: nothing was written or journalled.
    pub unchanged: bool,
}

/// Writes a whole file into the workspace the way `write_file` does (the root's mode, the
/// manifest and protected names checked, the old content journalled before the atomic
/// replace, so `revert_file` undoes it): the seam through which a tool outside the workspace
/// group (a network tool saving what it captured) writes a file. `aether-tools` implements
/// it; whoever assembles the tools hands it over.
#[async_trait]
pub trait SaveFile: Send + Sync {
    /// Writes `bytes` as the whole content of `path` (in `root`, else the only writable
    /// root) for `tool`, making its folders if need be.
    async fn save(
        &self,
        cx: &CallContext,
        tool: &str,
        root: Option<&str>,
        path: &str,
        bytes: &[u8],
    ) -> Result<Saved, ToolError>;
}

/// Where bubblewrap is looked for, by every sandbox Aether builds (absolute paths only: no
/// PATH lookup a caller could steer).
pub const BWRAP_PATHS: &[&str] = &["/usr/bin/bwrap", "/usr/local/bin/bwrap", "/bin/bwrap"];

/// Bubblewrap's isolation, the same for every sandbox Aether builds: the sandbox dies with
/// Aether, runs in a session of its own, gets every namespace new (the network's too, unless
/// the caller adds `--share-net`), may make no further user namespaces, and holds no
/// capabilities.
pub const BWRAP_ISOLATION: &[&str] = &[
    "--die-with-parent",
    "--new-session",
    "--unshare-all",
    "--unshare-user",
    "--disable-userns",
    "--cap-drop",
    "ALL",
];

/// Bubblewrap's arguments for the system's programs and libraries, read-only: `/usr`, and
/// `/bin`, `/sbin` and the `/lib` folders as this machine has them (links where they are
/// links into `/usr`). Shared by every sandbox Aether builds (`run_shell`'s, the browser's).
pub fn system_folders() -> std::io::Result<Vec<String>> {
    let mut a: Vec<String> = ["--ro-bind", "/usr", "/usr"].map(String::from).into();
    for dir in ["/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"] {
        match std::fs::symlink_metadata(dir) {
            Ok(m) if m.file_type().is_symlink() => {
                let target = std::fs::read_link(dir)?;
                a.extend([
                    "--symlink".into(),
                    target.to_string_lossy().into(),
                    dir.into(),
                ]);
            }
            Ok(m) if m.is_dir() => a.extend(["--ro-bind".into(), dir.into(), dir.into()]),
            _ => {}
        }
    }
    Ok(a)
}

/// A speech server `tts_render` speaks through instead of the local espeak-ng: the
/// operator's (`[tts]`), implemented by `aether_net::speech` and handed over by the CLI, so
/// the workspace tools never depend on an HTTP client.
#[async_trait]
pub trait Speech: Send + Sync {
    /// The backend as results name it (e.g. "openai-compatible http://host:8880/v1").
    fn name(&self) -> String;
    /// The voices speakers no voice is mapped to get, in order.
    fn default_voices(&self) -> Vec<String>;
    /// One line of text spoken in `voice`: a WAV file's bytes.
    async fn speak(
        &self,
        text: &str,
        voice: &str,
        cancel: &CancellationToken,
    ) -> Result<Vec<u8>, ToolError>;
    /// Whether the server answers, and the voices it has.
    async fn status(&self) -> SpeechStatus;
}

/// What [`Speech::status`] found.
#[derive(Clone, Debug)]
pub struct SpeechStatus {
    pub up: bool,
    /// A sentence saying so (and why not).
    pub detail: String,
    /// The voices it lists, else those configured.
    pub voices: Vec<String>,
}

/// Runs blocking file work off the async threads; a panic inside becomes a panic here, so the
/// pipeline's panic handling sees it.
pub async fn blocking<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    match tokio::task::spawn_blocking(f).await {
        Ok(value) => value,
        Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
        Err(_) => panic!("blocking tool task was cancelled by the runtime"),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    #[derive(schemars::JsonSchema)]
    #[allow(dead_code)]
    struct Sample {
        /// How many.
        count: u64,
        limit: Option<u32>,
        name: Option<String>,
        when: Option<Vec<i16>>,
    }

    #[test]
    fn schemas_are_portable_and_accept_the_same_values() {
        let raw = serde_json::to_value(schemars::schema_for!(Sample)).unwrap();
        let before = super::unportable(&raw);
        assert!(
            !before.is_empty(),
            "schemars writes uint64 and type arrays: {raw}"
        );
        let schema = super::schema_of::<Sample>();
        let after = super::unportable(&schema);
        assert!(after.is_empty(), "{after:?} in {schema}");
        // The constraints moved into the non-null branch; the description stayed.
        assert_eq!(
            schema["properties"]["limit"],
            json!({"anyOf": [{"type": "integer", "minimum": 0}, {"type": "null"}]})
        );
        assert_eq!(schema["properties"]["count"]["description"], "How many.");
        let raw_validator = jsonschema::validator_for(&raw).unwrap();
        let validator = jsonschema::validator_for(&schema).unwrap();
        for value in [
            json!({"count": 1}),
            json!({"count": 1, "limit": null, "name": null, "when": null}),
            json!({"count": 1, "limit": 5, "name": "x", "when": [1, -2]}),
            json!({"count": -1}),
            json!({"count": 1, "limit": -5}),
            json!({"count": 1, "name": 3}),
            json!({"count": 1, "when": [70000]}),
            json!({"limit": 1}),
        ] {
            assert_eq!(
                validator.is_valid(&value),
                raw_validator.is_valid(&value),
                "{value}"
            );
        }
    }
}
