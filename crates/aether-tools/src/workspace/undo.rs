//! Undo: putting files back as the journal says they were. Used by `revert_file` (this
//! session's changes to one file) and by the operator's `aether undo CALL_ID` (everything one
//! call changed).
//!
//! An undo first takes the locks of every file it touches and checks that each is still as the
//! journal left it (the content hash, or absent); if anything changed since, nothing is undone
//! and the message names what changed. Then it records its own journal entries (so an undo can
//! be undone) and marks the undone entries, durably, and only then changes the files.

use aether_policy::ArgumentKinds;
use aether_policy::ToolDef;
use aether_policy::journal::{JournalEntry, JournalOp, JournalQuery, JournalWrite, content_hash};
use async_trait::async_trait;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::write::{self, Before, Target};
use crate::{CallContext, Tool, ToolError, ToolOutput, parse_args};

/// One step of an undo.
#[derive(Clone, Debug)]
enum Action {
    /// Make `path` hold `to` (a content hash; `None`: no file), if it holds `expect` now.
    Restore {
        root: String,
        path: String,
        expect: Option<String>,
        to: Option<String>,
        mode: Option<u32>,
    },
    /// Rename `from` back to `to`.
    Rename {
        root: String,
        from: String,
        to: String,
    },
    /// Remove the folder `path` if it is empty.
    Rmdir { root: String, path: String },
    /// Create the folder `path`.
    Mkdir { root: String, path: String },
}

/// The inverse of one journal entry.
fn inverse(e: &JournalEntry) -> Result<Action, ToolError> {
    let root = e.root.clone();
    Ok(match e.op {
        JournalOp::Write | JournalOp::Delete => Action::Restore {
            root,
            path: e.path.clone(),
            expect: e.after_hash.clone(),
            to: e.before_hash.clone(),
            mode: e.before_mode,
        },
        JournalOp::Move => Action::Rename {
            root,
            from: e.dest.clone().ok_or_else(|| {
                ToolError::failed(format!(
                    "journal entry {} is a move without a destination",
                    e.id
                ))
            })?,
            to: e.path.clone(),
        },
        JournalOp::Mkdir => Action::Rmdir {
            root,
            path: e.path.clone(),
        },
        JournalOp::Rmdir => Action::Mkdir {
            root,
            path: e.path.clone(),
        },
    })
}

/// Undoes everything `call_id` changed that is not undone yet, newest change first; with
/// `file` (root, path), only its changes at that path (a move's source or destination). Returns
/// a line per change.
pub async fn undo_call(
    cx: &CallContext,
    tool: &str,
    call_id: &str,
    file: Option<(&str, &str)>,
) -> Result<Vec<String>, ToolError> {
    let entries: Vec<JournalEntry> = cx
        .ledger
        .entries(JournalQuery {
            call_id: Some(call_id.to_string()),
            live_only: true,
            limit: 10_000,
            ..Default::default()
        })
        .await
        .map_err(ToolError::failed)?
        .into_iter()
        .filter(|e| {
            file.is_none_or(|(root, path)| {
                e.root == root && (e.path == path || e.dest.as_deref() == Some(path))
            })
        })
        .collect();
    if entries.is_empty() {
        return Err(ToolError::failed(format!(
            "the journal has nothing of {} left to undo: it changed no such file, was already \
             undone, or is older than the journal keeps (aether journal list shows what is there)",
            undone(call_id, file)
        )));
    }
    let mut steps = Vec::new();
    for e in &entries {
        steps.push((inverse(e)?, Some(e.id)));
    }
    let reverts = entries.iter().map(|e| e.id).collect();
    execute(cx, tool, steps, reverts).await
}

/// What an undo of `call_id` (or of `file` of it) names: "call ID" or "ROOT:PATH of call ID".
fn undone(call_id: &str, file: Option<(&str, &str)>) -> String {
    match file {
        Some((root, path)) => format!("{root}:{path} of call {call_id}"),
        None => format!("call {call_id}"),
    }
}

/// Puts `root:path` back as it was before this session's first change to it that is not undone.
async fn revert_path(cx: &CallContext, root: &str, path: &str) -> Result<Vec<String>, ToolError> {
    let entries: Vec<JournalEntry> = cx
        .ledger
        .entries(JournalQuery {
            session: Some(cx.session.clone()),
            root: Some(root.to_string()),
            path: Some(path.to_string()),
            live_only: true,
            limit: 10_000,
            ..Default::default()
        })
        .await
        .map_err(ToolError::failed)?
        .into_iter()
        // An earlier revert's own entries are not reverted again (the operator can, with
        // `aether undo`): reverting twice would flip the file back and forth.
        .filter(|e| {
            matches!(e.op, JournalOp::Write | JournalOp::Delete)
                && e.path == path
                && e.undoes.is_none()
        })
        .collect();
    let (Some(newest), Some(oldest)) = (entries.first(), entries.last()) else {
        return Err(ToolError::failed(format!(
            "this session has no change to {root}:{path} left to undo (changes made by other \
             sessions are undone by the operator with aether undo CALL_ID)"
        )));
    };
    let step = Action::Restore {
        root: root.to_string(),
        path: path.to_string(),
        expect: newest.after_hash.clone(),
        to: oldest.before_hash.clone(),
        mode: oldest.before_mode,
    };
    let reverts = entries.iter().map(|e| e.id).collect();
    execute(cx, "revert_file", vec![(step, Some(oldest.id))], reverts).await
}

/// The places a step touches: its target, and a rename's destination.
type Targets<'a> = Vec<(Target<'a>, Option<Target<'a>>)>;

/// Checks every step against the files as they are, records the undo in the journal, then
/// changes the files.
async fn execute(
    cx: &CallContext,
    tool: &str,
    steps: Vec<(Action, Option<i64>)>,
    reverts: Vec<i64>,
) -> Result<Vec<String>, ToolError> {
    let targets = open_targets(cx, &steps)?;
    let reals: Vec<&std::path::Path> = targets
        .iter()
        .flat_map(|(t, u)| {
            std::iter::once(t.real.as_path()).chain(u.as_ref().map(|u| u.real.as_path()))
        })
        .collect();
    let _guard = write::lock(&reals).await;

    let (write, images) = check(cx, tool, &steps, &targets, reverts).await?;
    write::record(cx, write).await?;
    apply(&steps, &targets, images)
}

/// Every place the undo touches, opened and checked like any write.
fn open_targets<'a>(
    cx: &'a CallContext,
    steps: &[(Action, Option<i64>)],
) -> Result<Targets<'a>, ToolError> {
    let mut targets: Targets<'a> = Vec::new();
    for (action, _) in steps {
        // What an undo brings back may need its folder back first (a redo of an undo that
        // removed a file and then its folder): those folders are created as the targets are
        // opened.
        let (root, a, b, create) = match action {
            Action::Restore { root, path, to, .. } => (root, path, None, to.is_some()),
            Action::Mkdir { root, path } => (root, path, None, true),
            Action::Rmdir { root, path } => (root, path, None, false),
            Action::Rename { root, from, to } => (root, from, Some(to), false),
        };
        let t = write::target(cx, Some(root), a, "undo", create)?;
        let u = match b {
            Some(b) => Some(write::target(cx, Some(root), b, "undo", true)?),
            None => None,
        };
        targets.push((t, u));
    }
    Ok(targets)
}

/// Checks each step against the files as they are now, and gathers what the journal needs
/// (and the old contents to bring back).
async fn check(
    cx: &CallContext,
    tool: &str,
    steps: &[(Action, Option<i64>)],
    targets: &Targets<'_>,
    reverts: Vec<i64>,
) -> Result<(JournalWrite, Vec<Option<Vec<u8>>>), ToolError> {
    let mut write = JournalWrite {
        reverts,
        ..Default::default()
    };
    let mut images: Vec<Option<Vec<u8>>> = Vec::new();
    for ((action, undoes), (t, u)) in steps.iter().zip(targets) {
        let conflict = |what: String| {
            ToolError::failed(format!(
                "{} changed since the journal recorded it ({what}), so nothing was undone; look at it \
                 and change it by hand, or undo the later change first",
                t.shown()
            ))
        };
        let mut image = None;
        match action {
            Action::Restore { expect, to, .. } => {
                let before = write::read_before(t, cx.limits.write_file_bytes.max(64 << 20))?;
                if before.hash() != *expect {
                    return Err(conflict(match expect {
                        Some(_) if before.hash().is_none() => "it is gone".into(),
                        Some(_) => "its content differs".into(),
                        None => "a file is there now".into(),
                    }));
                }
                if let Some(hash) = to {
                    let bytes = cx.ledger.image(hash).await.map_err(ToolError::failed)?.ok_or_else(|| {
                        ToolError::failed(format!(
                            "the journal no longer holds the old content of {} (it keeps a bounded history)",
                            t.shown()
                        ))
                    })?;
                    if content_hash(&bytes) != *hash {
                        return Err(ToolError::failed(format!(
                            "the journal's copy of {} does not match its hash; nothing was undone",
                            t.shown()
                        )));
                    }
                    image = Some(bytes);
                }
                let op = if to.is_some() {
                    JournalOp::Write
                } else {
                    JournalOp::Delete
                };
                let mut e = write::entry(cx, tool, op, &t.root.name, &t.rel);
                e.before_hash = before.hash();
                e.before_mode = before.mode();
                e.after_hash = to.clone();
                e.undoes = *undoes;
                if let Before::File { bytes, hash, .. } = before {
                    write.blobs.push((hash, bytes));
                }
                write.entries.push(e);
            }
            Action::Rename { .. } => {
                let u = u.as_ref().expect("a rename has two targets");
                if t.dir.symlink_metadata(&t.name).is_err() {
                    return Err(conflict("it is gone".into()));
                }
                if u.dir.symlink_metadata(&u.name).is_ok() {
                    return Err(ToolError::failed(format!(
                        "{} exists again, so {} cannot be moved back; nothing was undone",
                        u.shown(),
                        t.shown()
                    )));
                }
                let mut e = write::entry(cx, tool, JournalOp::Move, &t.root.name, &t.rel);
                e.dest = Some(u.rel.clone());
                e.undoes = *undoes;
                write.entries.push(e);
            }
            Action::Rmdir { .. } => {
                let mut e = write::entry(cx, tool, JournalOp::Rmdir, &t.root.name, &t.rel);
                e.undoes = *undoes;
                write.entries.push(e);
            }
            Action::Mkdir { .. } => {
                if t.dir.symlink_metadata(&t.name).is_ok_and(|m| !m.is_dir()) {
                    return Err(conflict(
                        "something that is not a folder is there now".into(),
                    ));
                }
                let mut e = write::entry(cx, tool, JournalOp::Mkdir, &t.root.name, &t.rel);
                e.undoes = *undoes;
                write.entries.push(e);
            }
        }
        images.push(image);
    }
    Ok((write, images))
}

/// Changes the files, in order; says what each step did.
fn apply(
    steps: &[(Action, Option<i64>)],
    targets: &Targets<'_>,
    images: Vec<Option<Vec<u8>>>,
) -> Result<Vec<String>, ToolError> {
    let mut done = Vec::new();
    for (((action, _), (t, u)), image) in steps.iter().zip(targets).zip(images) {
        match action {
            Action::Restore { to, mode, .. } => match (to, image) {
                (Some(_), Some(bytes)) => {
                    write::replace(t, &bytes, *mode)?;
                    done.push(format!("restored {} ({} bytes)", t.shown(), bytes.len()));
                }
                _ => {
                    t.dir
                        .remove_file(&t.name)
                        .map_err(|e| t.root.io_error(&t.rel, e))?;
                    write::sync_dir(&t.dir).map_err(|e| t.root.io_error(&t.rel, e))?;
                    done.push(format!("removed {} (it did not exist before)", t.shown()));
                }
            },
            Action::Rename { .. } => {
                let u = u.as_ref().expect("a rename has two targets");
                write::rename_new(&t.dir, &t.name, &u.dir, &u.name)
                    .map_err(|e| t.root.io_error(&t.rel, e))?;
                write::sync_dir(&t.dir).map_err(|e| t.root.io_error(&t.rel, e))?;
                write::sync_dir(&u.dir).map_err(|e| u.root.io_error(&u.rel, e))?;
                done.push(format!("moved {} back to {}", t.shown(), u.shown()));
            }
            Action::Rmdir { .. } => match t.dir.remove_dir(&t.name) {
                Ok(()) => done.push(format!("removed folder {}", t.shown())),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(_) => done.push(format!("left folder {} (it is not empty)", t.shown())),
            },
            Action::Mkdir { .. } => match crate::roots::land_git_piece(&t.dir, "", &t.name, || {
                t.dir.create_dir(&t.name)
            }) {
                Ok(()) => done.push(format!("created folder {}", t.shown())),
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
                Err(e) => return Err(t.root.io_error(&t.rel, e)),
            },
        }
    }
    Ok(done)
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct Args {
    /// The file: relative to the root, or absolute inside a root.
    path: String,
    /// Name of the root (see list_roots). Defaults to the first root.
    #[serde(default)]
    root: Option<String>,
}

#[derive(Serialize, JsonSchema)]
struct Output {
    root: String,
    path: String,
    /// What was done.
    done: Vec<String>,
    call_id: String,
}

pub struct RevertFile {
    def: ToolDef,
}

impl RevertFile {
    pub fn new() -> RevertFile {
        RevertFile {
            def: write::writer::<Args, Output>(
                "revert_file",
                "Undo this session's edits to a file",
                "Put a file back as it was before this session's first change to it (write_file, \
                 edit_file, delete_file): restores the old content, or removes a file this session \
                 created. Refuses, changing nothing, if the file changed since this session last \
                 touched it. The revert is itself journalled.",
                true,
                false,
            )
            .declaring(ArgumentKinds::paths(&["path"])),
        }
    }
}

#[async_trait]
impl Tool for RevertFile {
    fn def(&self) -> &ToolDef {
        &self.def
    }

    async fn call(&self, cx: CallContext, args: Value) -> Result<ToolOutput, ToolError> {
        let args: Args = parse_args(args)?;
        let mut rel = String::new();
        let loc = cx
            .roots
            .locate(args.root.as_deref(), &args.path, &mut rel)?;
        let (root, rel) = (loc.root.name.clone(), loc.rel.to_string());
        let done = revert_path(&cx, &root, &rel).await?;
        Ok(ToolOutput::with_structured(
            done.join("\n"),
            serde_json::to_value(Output {
                root,
                path: rel,
                done,
                call_id: cx.call_id.clone(),
            })
            .unwrap_or_default(),
        ))
    }
}

/// The operator's undo of one call, run by `aether undo`. Not in any agent's catalog.
pub struct UndoCall {
    def: ToolDef,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct UndoArgs {
    /// The call whose changes to undo.
    call_id: String,
    /// Only the changes at this path (relative to `root`; a move's source or destination).
    #[serde(default)]
    path: Option<String>,
    /// The root of `path`.
    #[serde(default)]
    root: Option<String>,
}

#[derive(Serialize, JsonSchema)]
struct UndoOutput {
    undone_call: String,
    done: Vec<String>,
    call_id: String,
}

impl UndoCall {
    pub fn new() -> UndoCall {
        let mut def = write::writer::<UndoArgs, UndoOutput>(
            "undo_call",
            "Undo a call's file changes",
            "Undo every file change one call made, or its changes to one file (the operator's `aether undo`).",
            true,
            false,
        );
        def.group = "operator".into();
        UndoCall { def }
    }
}

impl Default for UndoCall {
    fn default() -> Self {
        UndoCall::new()
    }
}

#[async_trait]
impl Tool for UndoCall {
    fn def(&self) -> &ToolDef {
        &self.def
    }

    async fn call(&self, cx: CallContext, args: Value) -> Result<ToolOutput, ToolError> {
        let args: UndoArgs = parse_args(args)?;
        let file = match (&args.root, &args.path) {
            (Some(root), Some(path)) => Some((root.as_str(), path.as_str())),
            (None, None) => None,
            _ => {
                return Err(ToolError::InvalidArguments(
                    "root and path go together: both name one file of the call, neither undoes all of it"
                        .into(),
                ));
            }
        };
        let done = undo_call(&cx, "undo", &args.call_id, file).await?;
        Ok(ToolOutput::with_structured(
            format!(
                "undid {}:\n{}",
                undone(&args.call_id, file),
                done.join("\n")
            ),
            serde_json::to_value(UndoOutput {
                undone_call: args.call_id,
                done,
                call_id: cx.call_id.clone(),
            })
            .unwrap_or_default(),
        ))
    }
}
