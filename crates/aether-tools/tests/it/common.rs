//! Shared helpers: a temporary tree (a root, an outside folder and a look-alike sibling), and
//! calling a tool the way the pipeline does, with its arguments and output checked against
//! the tool's declared schemas.

use std::collections::HashMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::thread::JoinHandle;

use aether_policy::AgentProfile;
use aether_policy::config::Limits;
use aether_policy::paths::{RootMode, RootSpec};
use aether_tools::{CallContext, Content, NoClient, Roots, Tool, ToolError, ToolOutput};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

/// What every file outside the root contains. No result may ever carry it.
pub const SECRET: &str = "OUTSIDE-SECRET-7f3a9c";
/// A search query that finds `SECRET` without containing all of it, so a result that echoes
/// the query is not mistaken for a leak.
pub const PROBE: &str = "OUTSIDE-SECRET";

pub type Outcome = Result<ToolOutput, ToolError>;

/// A temporary tree:
/// - `ws/`: the root, named `ws`;
/// - `outside/secret.txt`: a file outside every root;
/// - `ws_evil/secret.txt`: a sibling whose name starts with the root's.
///
/// All paths are canonical, so absolute paths compare with the root's canonical path.
pub struct Tree {
    _tmp: tempfile::TempDir,
    pub base: PathBuf,
    pub ws: PathBuf,
    pub outside: PathBuf,
    pub evil: PathBuf,
}

impl Tree {
    pub fn new() -> Tree {
        let tmp = tempfile::tempdir().unwrap();
        let base = fs::canonicalize(tmp.path()).unwrap();
        let (ws, outside, evil) = (base.join("ws"), base.join("outside"), base.join("ws_evil"));
        for dir in [&ws, &outside, &evil] {
            fs::create_dir(dir).unwrap();
        }
        fs::write(outside.join("secret.txt"), SECRET).unwrap();
        fs::write(evil.join("secret.txt"), SECRET).unwrap();
        Tree {
            _tmp: tmp,
            base,
            ws,
            outside,
            evil,
        }
    }

    /// Writes a file under the root, creating its folders.
    pub fn file(&self, rel: &str, contents: impl AsRef<[u8]>) -> PathBuf {
        let path = self.ws.join(rel);
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(&path, contents).unwrap();
        path
    }

    /// Creates a folder (and its parents) under the root.
    pub fn dir(&self, rel: &str) -> PathBuf {
        let path = self.ws.join(rel);
        fs::create_dir_all(&path).unwrap();
        path
    }

    /// Creates the symlink `rel` (under the root) pointing at `target`, written as given.
    pub fn link(&self, target: impl AsRef<Path>, rel: &str) {
        let path = self.ws.join(rel);
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::os::unix::fs::symlink(target, path).unwrap();
    }

    /// The absolute path of `rel` under the root, as an agent would write it (the root itself
    /// for an empty `rel`, without a trailing `/`).
    pub fn abs(&self, rel: &str) -> String {
        let root = self.ws.to_str().unwrap();
        if rel.is_empty() {
            root.to_string()
        } else {
            format!("{root}/{rel}")
        }
    }

    pub fn roots(&self) -> Arc<Roots> {
        Arc::new(Roots::open(&[spec("ws", &self.ws)]).unwrap())
    }

    pub fn cx(&self) -> CallContext {
        context(self.roots(), Limits::default())
    }

    /// A context whose root is read-write with deletes allowed, and whose journal is kept in
    /// memory (the store's journal is tested through the pipeline).
    pub fn cx_writable(&self) -> CallContext {
        let mut s = spec("ws", &self.ws);
        s.mode = RootMode::ReadWrite;
        s.allow_delete = true;
        CallContext {
            ledger: Arc::new(MemoryLedger::default()),
            ..context(Arc::new(Roots::open(&[s]).unwrap()), Limits::default())
        }
    }

    pub fn cx_with(&self, limits: Limits) -> CallContext {
        context(self.roots(), limits)
    }
}

pub fn spec(name: &str, path: &Path) -> RootSpec {
    RootSpec {
        name: name.into(),
        path: path.to_str().unwrap().into(),
        mode: RootMode::ReadOnly,
        writable: None,
        allow_delete: false,
    }
}

pub fn context(roots: Arc<Roots>, limits: Limits) -> CallContext {
    CallContext {
        call_id: "test-call".into(),
        session: "test-session".into(),
        agent: Arc::new(AgentProfile::with_groups("t", &["workspace"])),
        roots,
        limits: Arc::new(limits),
        cancel: CancellationToken::new(),
        client: Arc::new(NoClient),
        ledger: Arc::new(MemoryLedger::default()),
        destinations: Arc::new(aether_tools::AnyDestination),
        paths: Arc::new(aether_tools::AnyPath),
        receipt: None,
        subject: None,
        scope: None,
        trace: None,
    }
}

struct Checked {
    tool: Arc<dyn Tool>,
    input: jsonschema::Validator,
    output: jsonschema::Validator,
}

fn tools() -> &'static HashMap<String, Checked> {
    static TOOLS: OnceLock<HashMap<String, Checked>> = OnceLock::new();
    TOOLS.get_or_init(|| {
        aether_tools::workspace::tools()
            .into_iter()
            .chain([
                Arc::new(aether_tools::workspace::CheckFinishing::new()) as Arc<dyn Tool>,
                Arc::new(aether_tools::workspace::TtsRender::new()),
                Arc::new(aether_tools::workspace::TtsStatus::new()),
                Arc::new(aether_tools::workspace::RecordStyle::new()),
            ])
            .map(|tool| {
                let def = tool.def();
                let input = jsonschema::validator_for(&def.input_schema)
                    .unwrap_or_else(|e| panic!("{}: input schema does not compile: {e}", def.name));
                let output = jsonschema::validator_for(&def.output_schema).unwrap_or_else(|e| {
                    panic!("{}: output schema does not compile: {e}", def.name)
                });
                (
                    def.name.clone(),
                    Checked {
                        tool: tool.clone(),
                        input,
                        output,
                    },
                )
            })
            .collect()
    })
}

/// Names of every built-in tool.
/// A journal in memory, for tool tests that need writes to succeed.
#[derive(Default)]
pub struct MemoryLedger {
    entries: std::sync::Mutex<Vec<aether_policy::journal::JournalEntry>>,
    blobs: std::sync::Mutex<HashMap<String, Vec<u8>>>,
    commands: std::sync::Mutex<Vec<aether_policy::journal::CommandRecord>>,
}

#[async_trait::async_trait]
impl aether_tools::Ledger for MemoryLedger {
    async fn record(
        &self,
        write: aether_policy::journal::JournalWrite,
    ) -> Result<Vec<i64>, aether_tools::LedgerError> {
        let mut entries = self.entries.lock().unwrap();
        for id in &write.reverts {
            let e = entries
                .iter_mut()
                .find(|e| e.id == *id)
                .ok_or_else(|| aether_tools::LedgerError::Unavailable("no such entry".into()))?;
            e.reverted_by = write.entries.first().map(|n| n.call_id.clone());
        }
        self.blobs.lock().unwrap().extend(write.blobs);
        let mut ids = Vec::new();
        for mut e in write.entries {
            e.id = entries.len() as i64 + 1;
            ids.push(e.id);
            entries.push(e);
        }
        Ok(ids)
    }

    async fn entries(
        &self,
        q: aether_policy::journal::JournalQuery,
    ) -> Result<Vec<aether_policy::journal::JournalEntry>, aether_tools::LedgerError> {
        let entries = self.entries.lock().unwrap();
        Ok(entries
            .iter()
            .rev()
            .filter(|e| q.session.as_ref().is_none_or(|s| &e.session == s))
            .filter(|e| q.call_id.as_ref().is_none_or(|c| &e.call_id == c))
            .filter(|e| q.root.as_ref().is_none_or(|r| &e.root == r))
            .filter(|e| {
                q.path
                    .as_ref()
                    .is_none_or(|p| &e.path == p || e.dest.as_ref() == Some(p))
            })
            .filter(|e| !q.live_only || e.reverted_by.is_none())
            .take(q.limit)
            .cloned()
            .collect())
    }

    async fn image(&self, hash: &str) -> Result<Option<Vec<u8>>, aether_tools::LedgerError> {
        Ok(self.blobs.lock().unwrap().get(hash).cloned())
    }

    async fn document(
        &self,
        _: &str,
        _: &str,
        _: &str,
    ) -> Result<Option<aether_policy::journal::Document>, aether_tools::LedgerError> {
        Ok(None)
    }

    async fn put_document(
        &self,
        _: aether_policy::journal::Document,
    ) -> Result<(), aether_tools::LedgerError> {
        Err(aether_tools::LedgerError::Unavailable(
            "the workspace tools' tests keep no plans".into(),
        ))
    }

    async fn send_message(
        &self,
        _: aether_policy::journal::Message,
    ) -> Result<i64, aether_tools::LedgerError> {
        Err(aether_tools::LedgerError::Unavailable(
            "the workspace tools' tests keep no messages".into(),
        ))
    }

    async fn take_messages(
        &self,
        _: &str,
        _: &str,
        _: usize,
    ) -> Result<Vec<aether_policy::journal::Message>, aether_tools::LedgerError> {
        Ok(Vec::new())
    }

    async fn knowledge_put(
        &self,
        _: Vec<aether_policy::journal::KnowledgeDoc>,
    ) -> Result<usize, aether_tools::LedgerError> {
        Err(aether_tools::LedgerError::Unavailable(
            "the workspace tools' tests keep no knowledge".into(),
        ))
    }

    async fn knowledge_search(
        &self,
        _: Vec<String>,
        _: &str,
        _: usize,
        _: f64,
    ) -> Result<Vec<aether_policy::journal::KnowledgeHit>, aether_tools::LedgerError> {
        Ok(Vec::new())
    }

    async fn command_started(
        &self,
        start: aether_policy::journal::CommandStart,
    ) -> Result<i64, aether_tools::LedgerError> {
        let mut commands = self.commands.lock().unwrap();
        let id = commands.len() as i64 + 1;
        commands.push(aether_policy::journal::CommandRecord {
            id,
            start,
            end: None,
        });
        Ok(commands.len() as i64)
    }

    async fn command_ended(
        &self,
        id: i64,
        end: aether_policy::journal::CommandEnd,
    ) -> Result<(), aether_tools::LedgerError> {
        let mut commands = self.commands.lock().unwrap();
        let row = commands
            .iter_mut()
            .find(|c| c.id == id)
            .ok_or_else(|| aether_tools::LedgerError::Unavailable("no such command".into()))?;
        row.end = Some(end);
        Ok(())
    }
}

impl MemoryLedger {
    /// The command log, oldest first.
    pub fn commands(&self) -> Vec<aether_policy::journal::CommandRecord> {
        self.commands.lock().unwrap().clone()
    }
}

pub fn tool_names() -> Vec<String> {
    let mut names: Vec<String> = tools().keys().cloned().collect();
    names.sort();
    names
}

/// Calls a tool as the pipeline would: the arguments must satisfy the input schema (the
/// pipeline refuses anything else before the tool runs), and a successful result must carry
/// structured output that satisfies the output schema.
pub async fn call(cx: &CallContext, name: &str, args: Value) -> Outcome {
    let checked = tools()
        .get(name)
        .unwrap_or_else(|| panic!("no built-in tool {name}"));
    let errors: Vec<String> = checked
        .input
        .iter_errors(&args)
        .map(|e| e.to_string())
        .collect();
    assert!(
        errors.is_empty(),
        "{name}: test arguments {args} break the input schema: {errors:?}"
    );
    let result = checked.tool.call(cx.clone(), args).await;
    if let Ok(out) = &result {
        assert!(
            !out.is_error,
            "{name}: a successful call is flagged as an error: {out:?}"
        );
        let structured = out
            .structured
            .as_ref()
            .unwrap_or_else(|| panic!("{name}: no structured output"));
        let errors: Vec<String> = checked
            .output
            .iter_errors(structured)
            .map(|e| e.to_string())
            .collect();
        assert!(
            errors.is_empty(),
            "{name}: output {structured} breaks the output schema: {errors:?}"
        );
    }
    result
}

/// The structured output of a successful call.
pub fn ok(result: Outcome) -> (String, Value) {
    assert_no_secret(&result);
    match result {
        Ok(out) => {
            let text = text(&out).to_string();
            (text, out.structured.unwrap())
        }
        Err(e) => panic!("expected success, got {e:?}"),
    }
}

/// The text block of a result.
pub fn text(out: &ToolOutput) -> &str {
    match out.content.as_slice() {
        [Content::Text(t)] => t,
        other => panic!("expected one text block, got {other:?}"),
    }
}

/// Fails if anything from outside the root made it into a result or an error.
pub fn assert_no_secret(result: &Outcome) {
    let shown = format!("{result:?}");
    assert!(!shown.contains(SECRET), "outside content leaked: {shown}");
}

/// Asserts a confinement refusal and returns its message.
pub fn denied(result: Outcome) -> String {
    assert_no_secret(&result);
    match result {
        Err(ToolError::Denied {
            rule: "confinement",
            message,
        }) => message,
        other => panic!("expected a confinement refusal, got {other:?}"),
    }
}

/// Asserts `ToolError::Failed` and returns its message.
pub fn failed(result: Outcome) -> String {
    assert_no_secret(&result);
    match result {
        Err(ToolError::Failed(message)) => message,
        other => panic!("expected Failed, got {other:?}"),
    }
}

/// Asserts `ToolError::InvalidArguments` and returns its message.
pub fn invalid(result: Outcome) -> String {
    assert_no_secret(&result);
    match result {
        Err(ToolError::InvalidArguments(message)) => message,
        other => panic!("expected InvalidArguments, got {other:?}"),
    }
}

/// The `path` of every match in a glob or search_files result.
pub fn paths(structured: &Value) -> Vec<String> {
    structured["matches"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            m.as_str()
                .or_else(|| m["path"].as_str())
                .unwrap()
                .to_string()
        })
        .collect()
}

/// A thread that keeps swapping the folder `dir` with a symlink to `target`, until stopped
/// (or dropped, so a failing test does not leave it running while its tree is removed).
pub struct Swapper {
    stop: Arc<AtomicBool>,
    handle: Option<JoinHandle<()>>,
}

impl Swapper {
    pub fn start(dir: &Path, target: &Path) -> Swapper {
        let stop = Arc::new(AtomicBool::new(false));
        let parked = dir.with_file_name(format!(
            "{}_parked",
            dir.file_name().unwrap().to_str().unwrap()
        ));
        let (dir, target, flag) = (dir.to_path_buf(), target.to_path_buf(), stop.clone());
        let handle = std::thread::spawn(move || {
            while !flag.load(Ordering::Relaxed) {
                fs::rename(&dir, &parked).unwrap();
                std::os::unix::fs::symlink(&target, &dir).unwrap();
                std::thread::yield_now();
                fs::remove_file(&dir).unwrap();
                fs::rename(&parked, &dir).unwrap();
                std::thread::yield_now();
            }
        });
        Swapper {
            stop,
            handle: Some(handle),
        }
    }

    pub fn stop(mut self) {
        self.halt();
    }

    fn halt(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(handle) = self.handle.take() {
            let finished = handle.join();
            if !std::thread::panicking() {
                finished.expect("the swapper thread failed");
            }
        }
    }
}

impl Drop for Swapper {
    fn drop(&mut self) {
        self.halt();
    }
}
