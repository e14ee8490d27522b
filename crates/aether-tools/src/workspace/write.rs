//! What every workspace write shares: where it may land, the lock that serializes writes to
//! one file, the old content read safely for the journal, and the atomic replace.
//!
//! A write goes: locate and check the path (root mode, manifest, protected names) → open the
//! parent folder beneath the root and check its real path → take the file's lock → read what
//! is there now (a regular file with one link, never through a symlink) → record it in the
//! journal, durably → write a temporary file beside the target, fsync it, rename it over the
//! target, fsync the folder. A crash at any point leaves the old file or the new one, never
//! half of either; and the journal always knows the old one.

use std::hash::{BuildHasher, Hash, Hasher};
use std::io::{Read, Write};
use std::os::unix::fs::MetadataExt;
use std::path::Path;

use std::sync::Arc;

use aether_policy::journal::{JournalEntry, JournalOp, PendingReceipt, content_hash};
use aether_policy::tool::groups;
use aether_policy::{Risk, Tier, ToolDef, ToolMeta};
use cap_fs_ext::{FollowSymlinks, OpenOptionsFollowExt};
use cap_std::fs::{Dir, OpenOptionsExt};
use schemars::JsonSchema;
use tokio::sync::{Mutex, MutexGuard};

use crate::roots::{Located, Root};
use crate::{CallContext, ToolError, now_us, schema_of};

/// Writes to one file wait for each other. Locks are striped by the file's real path: 256
/// stripes keep memory fixed while two unrelated files rarely share one.
pub(super) static LOCKS: [Mutex<()>; 256] = [const { Mutex::const_new(()) }; 256];

pub(super) fn stripe(real: &Path) -> usize {
    let hasher =
        std::hash::BuildHasherDefault::<std::collections::hash_map::DefaultHasher>::default();
    (hasher.hash_one(real) % LOCKS.len() as u64) as usize
}

/// Locks the files at `paths` (real paths) for one write, in a fixed order so that two
/// writes locking the same pair cannot deadlock.
pub(super) async fn lock(paths: &[&Path]) -> Vec<MutexGuard<'static, ()>> {
    let mut stripes: Vec<usize> = paths.iter().map(|p| stripe(p)).collect();
    stripes.sort_unstable();
    stripes.dedup();
    let mut guards = Vec::with_capacity(stripes.len());
    for s in stripes {
        guards.push(LOCKS[s].lock().await);
    }
    guards
}

/// The definition of a workspace tool that changes files.
pub(super) fn writer<I: JsonSchema, O: JsonSchema>(
    name: &str,
    title: &str,
    description: &str,
    destructive: bool,
    idempotent: bool,
) -> ToolDef {
    ToolDef {
        name: name.into(),
        title: title.into(),
        group: groups::WORKSPACE.into(),
        tier: Tier::Standard,
        description: description.into(),
        input_schema: schema_of::<I>(),
        output_schema: schema_of::<O>(),
        arguments: Default::default(),
        meta: ToolMeta {
            risk: if destructive { Risk::Medium } else { Risk::Low },
            read_only: false,
            reaches_network: false,
            needs_confirmation: false,
            idempotent,
            destructive,
        },
    }
}

/// A file about to be written: its root, its clean path, the open parent folder and the name
/// in it, and the real path (the lock key).
pub(super) struct Target<'a> {
    pub root: &'a Root,
    pub rel: String,
    pub dir: Dir,
    pub name: String,
    pub real: std::path::PathBuf,
    /// Folders created on the way (root-relative, outermost first).
    pub created: Vec<String>,
}

impl Target<'_> {
    pub fn shown(&self) -> String {
        self.root.display(&self.rel)
    }
}

/// Locates `path` for a write and makes the checks that need no IO (root mode, manifest,
/// protected names).
fn writable<'a>(
    cx: &'a CallContext,
    root: Option<&str>,
    path: &str,
    action: &str,
) -> Result<(&'a Root, String), ToolError> {
    let mut rel = String::new();
    let Located { root, rel } = cx.roots.locate(root, path, &mut rel)?;
    let (name, rel) = (root.name.clone(), rel.to_string());
    let root = cx.roots.get(&name).expect("located in this root");
    root.check_writable(&rel, action)?;
    Ok((root, rel))
}

/// Opens the folder of `rel` (see [`Root::open_parent`]) as a [`Target`].
fn open<'a>(
    cx: &CallContext,
    root: &'a Root,
    rel: String,
    create_parents: bool,
) -> Result<Target<'a>, ToolError> {
    let (dir, real_parent, name, created) =
        root.open_parent(&cx.roots, &*cx.paths, &rel, create_parents)?;
    Ok(Target {
        root,
        real: real_parent.join(&name),
        rel,
        dir,
        name,
        created,
    })
}

/// Locates `path` for a write and opens its folder, with every check of the module docs.
pub(super) fn target<'a>(
    cx: &'a CallContext,
    root: Option<&str>,
    path: &str,
    action: &str,
    create_parents: bool,
) -> Result<Target<'a>, ToolError> {
    let (root, rel) = writable(cx, root, path, action)?;
    open(cx, root, rel, create_parents)
}

/// Where a write that may create its file will land: the target if its folder exists, or the
/// root and clean path if the folder is not there yet (then the file is certainly absent).
pub(super) enum Place<'a> {
    Ready(Target<'a>),
    NoFolder { root: &'a Root, rel: String },
}

/// Like [`target`] without creating folders, for a tool that knows only later whether it will
/// write (edit_file: a dry run or a failing edit must leave nothing behind); it makes them with
/// [`target`] once it does. Every check that needs no folder is made here; any failure other
/// than a missing folder (a symlink out, say) is returned as is.
pub(super) fn place<'a>(
    cx: &'a CallContext,
    root: Option<&str>,
    path: &str,
    action: &str,
) -> Result<Place<'a>, ToolError> {
    let (root, rel) = writable(cx, root, path, action)?;
    match open(cx, root, rel.clone(), false) {
        Ok(t) => Ok(Place::Ready(t)),
        Err(e) => {
            let parent = rel.rsplit_once('/').map_or("", |(parent, _)| parent);
            match root.dir().symlink_metadata(parent) {
                Err(m) if !parent.is_empty() && m.kind() == std::io::ErrorKind::NotFound => {
                    Ok(Place::NoFolder { root, rel })
                }
                _ => Err(e),
            }
        }
    }
}

/// What is at a target before the write.
#[derive(Debug)]
pub(super) enum Before {
    Absent,
    File {
        bytes: Vec<u8>,
        mode: u32,
        hash: String,
    },
}

impl Before {
    pub fn hash(&self) -> Option<String> {
        match self {
            Before::Absent => None,
            Before::File { hash, .. } => Some(hash.clone()),
        }
    }

    pub fn mode(&self) -> Option<u32> {
        match self {
            Before::Absent => None,
            Before::File { mode, .. } => Some(*mode),
        }
    }
}

/// Reads what is at the target now, for the journal: nothing, or a regular file with one link
/// and at most `max` bytes, read without following a symlink. Anything else is refused.
pub(super) fn read_before(t: &Target<'_>, max: u64) -> Result<Before, ToolError> {
    let shown = t.shown();
    let meta = match t.dir.symlink_metadata(&t.name) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Before::Absent),
        Err(e) => return Err(t.root.io_error(&t.rel, e)),
    };
    let ft = meta.file_type();
    if ft.is_symlink() {
        return Err(ToolError::denied(
            "confinement",
            format!(
                "{shown} is a symlink; Aether does not write through symlinks. Write to the file it \
                 points at (get_file_info shows the target)"
            ),
        ));
    }
    if ft.is_dir() {
        return Err(ToolError::failed(format!(
            "{shown} is a folder, not a file"
        )));
    }
    if !ft.is_file() {
        return Err(ToolError::denied(
            "confinement",
            format!("{shown} is not a regular file (a FIFO, socket or device); refused"),
        ));
    }
    let mut options = crate::roots::read_options();
    options.follow(FollowSymlinks::No);
    let file = t
        .dir
        .open_with(&t.name, &options)
        .map_err(|e| t.root.io_error(&t.rel, e))?
        .into_std();
    let meta = file.metadata().map_err(|e| t.root.io_error(&t.rel, e))?;
    if !meta.is_file() {
        return Err(ToolError::denied(
            "confinement",
            format!("{shown} is not a regular file (a FIFO, socket or device); refused"),
        ));
    }
    if meta.nlink() > 1 {
        return Err(ToolError::denied(
            "confinement",
            format!(
                "{shown} has {} hard links; another of its names may lie outside every root, so \
                 Aether refuses to change it",
                meta.nlink()
            ),
        ));
    }
    if meta.len() > max {
        return Err(ToolError::failed(format!(
            "{shown} is {} bytes, more than the {max} bytes a change may replace (its old content \
             must fit in the journal so the change can be undone)",
            meta.len()
        )));
    }
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    (&file)
        .take(max + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| t.root.io_error(&t.rel, e))?;
    if bytes.len() as u64 > max {
        return Err(ToolError::failed(format!(
            "{shown} grew past {max} bytes while being read; try again"
        )));
    }
    let hash = content_hash(&bytes);
    Ok(Before::File {
        bytes,
        // Permissions only: a rewrite (or an undo) never carries setuid, setgid or sticky.
        mode: meta.mode() & 0o777,
        hash,
    })
}

/// Replaces (or creates) the target with `bytes`: a temporary file beside it, fsynced, renamed
/// over it, and the folder fsynced. `mode` keeps an existing file's permissions.
pub(super) fn replace(t: &Target<'_>, bytes: &[u8], mode: Option<u32>) -> Result<(), ToolError> {
    let tmp =
        write_temp(&t.dir, bytes, mode, Sync::Durable).map_err(|e| t.root.io_error(&t.rel, e))?;
    install(&t.dir, &tmp, &t.name, Sync::Durable).map_err(|e| t.root.io_error(&t.rel, e))
}

/// Whether a file step is made durable on its own (fsync), or by the journal that holds the
/// new content (redone at start if a crash lost it: [`super::redo`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Sync {
    Durable,
    Journalled,
}

/// Writes `bytes` to a new temporary file in `dir` with `mode` (0644 for a new file), fsynced
/// unless the journal holds them; returns its name. Nothing is left behind on failure.
fn write_temp(dir: &Dir, bytes: &[u8], mode: Option<u32>, sync: Sync) -> std::io::Result<String> {
    let tmp = temp_name();
    let mut options = cap_std::fs::OpenOptions::new();
    options
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW);
    let file = dir.open_with(&tmp, &options)?.into_std();
    let written = (|| {
        let mut f = &file;
        f.write_all(bytes)?;
        let perms = std::os::unix::fs::PermissionsExt::from_mode(mode.unwrap_or(0o644));
        file.set_permissions(perms)?;
        match sync {
            Sync::Durable => file.sync_all(),
            Sync::Journalled => Ok(()),
        }
    })();
    match written {
        Ok(()) => Ok(tmp),
        Err(e) => {
            let _ = dir.remove_file(&tmp);
            Err(e)
        }
    }
}

/// Renames the temporary file `tmp` over `name` in `dir` and (unless the journal holds the
/// content) fsyncs the folder. The temporary file is removed if the rename fails.
fn install(dir: &Dir, tmp: &str, name: &str, sync: Sync) -> std::io::Result<()> {
    if let Err(e) = crate::roots::land_git_piece(dir, "", name, || dir.rename(tmp, dir, name)) {
        let _ = dir.remove_file(tmp);
        return Err(e);
    }
    match sync {
        Sync::Durable => sync_dir(dir),
        Sync::Journalled => Ok(()),
    }
}

/// Who runs a change's blocking work.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Runner {
    /// A task on a runtime that serves other calls: blocking work goes to the blocking pool.
    Shared,
    /// A thread of its own (the edit batcher's): the journal may commit and the rename run on
    /// it, saving the hand-offs to other threads and back.
    Own,
}

/// Records `write` in the journal and replaces the target with `bytes`: a redo log. The
/// journal write holds the old content and the new (and the receipts of the calls riding it,
/// see [`PendingReceipt`]), committed in one flush while the new content is written to a
/// temporary file beside the target; only once the journal is durable is the file renamed
/// over the target. Neither the file nor the folder is fsynced: a crash that loses the rename
/// is put right at the next start, which writes again every journalled content the file does
/// not hold ([`super::redo`]). If the journal cannot be written, the temporary file is removed
/// and nothing changes.
pub(super) async fn record_and_replace(
    ledger: &dyn crate::Ledger,
    t: &Target<'_>,
    mut write: aether_policy::journal::JournalWrite,
    bytes: Vec<u8>,
    mode: Option<u32>,
    runner: Runner,
    riders: &[&Arc<PendingReceipt>],
) -> Result<(), ToolError> {
    let after = aether_policy::journal::content_hash(&bytes);
    if !write.blobs.iter().any(|(h, _)| *h == after) {
        write.blobs.push((after, bytes.clone()));
    }
    let boarded: Vec<&Arc<PendingReceipt>> = riders
        .iter()
        .filter(|r| match r.board() {
            Some(receipt) => {
                write.receipts.push(receipt);
                true
            }
            None => false,
        })
        .copied()
        .collect();
    let dir = t.dir.try_clone().map_err(|e| t.root.io_error(&t.rel, e))?;
    let temp = tokio::task::spawn_blocking(move || {
        write_temp(&dir, &bytes, mode, Sync::Journalled).map(|tmp| (dir, tmp))
    });
    let recorded = match runner {
        Runner::Shared => ledger.record(write).await,
        Runner::Own => ledger.record_blocking(write).await,
    };
    for r in boarded {
        r.landed(landing(&recorded));
    }
    let (dir, tmp) = match temp.await {
        Ok(Ok(done)) => done,
        Ok(Err(e)) => return Err(t.root.io_error(&t.rel, e)),
        Err(e) => {
            return Err(ToolError::failed(format!(
                "writing {} failed: {e}",
                t.shown()
            )));
        }
    };
    if let Err(e) = recorded {
        let _ = dir.remove_file(&tmp);
        return Err(not_recorded(e));
    }
    if runner == Runner::Own {
        return install(&dir, &tmp, &t.name, Sync::Journalled)
            .map_err(|e| t.root.io_error(&t.rel, e));
    }
    let name = t.name.clone();
    match tokio::task::spawn_blocking(move || install(&dir, &tmp, &name, Sync::Journalled)).await {
        Ok(Ok(())) => Ok(()),
        Ok(Err(e)) => Err(t.root.io_error(&t.rel, e)),
        Err(e) => Err(ToolError::failed(format!(
            "writing {} failed: {e}",
            t.shown()
        ))),
    }
}

/// Renames `from` in `from_dir` to `to` in `to_dir`, never replacing what is there
/// (`RENAME_NOREPLACE`: an error of kind `AlreadyExists`; a plain rename where the filesystem
/// lacks the flag, the caller having checked that the destination is free), and not when the
/// name's arrival would make a git repository ([`crate::roots::land_git_piece`]).
pub(super) fn rename_new(
    from_dir: &Dir,
    from: &str,
    to_dir: &Dir,
    to: &str,
) -> std::io::Result<()> {
    crate::roots::land_git_piece(to_dir, "", to, || {
        match rustix::fs::renameat_with(
            from_dir,
            from,
            to_dir,
            to,
            rustix::fs::RenameFlags::NOREPLACE,
        ) {
            Ok(()) => Ok(()),
            Err(rustix::io::Errno::INVAL | rustix::io::Errno::NOSYS) => {
                from_dir.rename(from, to_dir, to)
            }
            Err(e) => Err(e.into()),
        }
    })
}

/// Makes a folder's entries (a rename, a removal) durable.
pub(super) fn sync_dir(dir: &Dir) -> std::io::Result<()> {
    // The root's handle may be a path-only descriptor, which cannot be synced: open the
    // folder itself for reading.
    let mut options = cap_std::fs::OpenOptions::new();
    options.read(true);
    let folder = dir.open_with(".", &options)?.into_std();
    match folder.sync_all() {
        // Some filesystems cannot sync a folder; the rename is as durable as they allow.
        Err(e) if e.raw_os_error() == Some(libc::EINVAL) => Ok(()),
        other => other,
    }
}

fn temp_name() -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    COUNTER.fetch_add(1, Ordering::Relaxed).hash(&mut h);
    std::process::id().hash(&mut h);
    format!(
        "{}{:016x}",
        aether_policy::paths::WRITE_TEMP_PREFIX,
        h.finish()
    )
}

/// A journal entry for a change by this call.
pub(super) fn entry(
    cx: &CallContext,
    tool: &str,
    op: JournalOp,
    root: &str,
    path: &str,
) -> JournalEntry {
    JournalEntry {
        id: 0,
        at_us: now_us(),
        call_id: cx.call_id.clone(),
        session: cx.session.clone(),
        agent: cx.agent.name.clone(),
        tool: tool.into(),
        op,
        root: root.into(),
        path: path.into(),
        dest: None,
        before_hash: None,
        before_mode: None,
        after_hash: None,
        undoes: None,
        reverted_by: None,
    }
}

/// Journal entries for folders a write created on the way.
pub(super) fn mkdir_entries(cx: &CallContext, tool: &str, t: &Target<'_>) -> Vec<JournalEntry> {
    t.created
        .iter()
        .map(|dir| entry(cx, tool, JournalOp::Mkdir, &t.root.name, dir))
        .collect()
}

/// Replaces the target's content with `bytes` (whose hash is `after`), journalling first what
/// was there (`before`) and the folders created on the way.
pub(super) async fn journal_and_replace(
    cx: &CallContext,
    tool: &str,
    t: &Target<'_>,
    before: &Before,
    bytes: &[u8],
    after: String,
) -> Result<(), ToolError> {
    let mut entries = mkdir_entries(cx, tool, t);
    let mut e = entry(cx, tool, JournalOp::Write, &t.root.name, &t.rel);
    e.before_hash = before.hash();
    e.before_mode = before.mode();
    e.after_hash = Some(after);
    entries.push(e);
    let blobs = match before {
        Before::File { bytes, hash, .. } => vec![(hash.clone(), bytes.clone())],
        Before::Absent => Vec::new(),
    };
    let write = aether_policy::journal::JournalWrite {
        entries,
        blobs,
        reverts: Vec::new(),
        receipts: Vec::new(),
    };
    let riders: Vec<&Arc<PendingReceipt>> = cx.receipt.iter().collect();
    record_and_replace(
        cx.ledger.as_ref(),
        t,
        write,
        bytes.to_vec(),
        before.mode(),
        Runner::Shared,
        &riders,
    )
    .await
}

/// What [`write_whole`] did.
pub(super) struct Whole {
    pub root: String,
    pub rel: String,
    pub shown: String,
    pub created: bool,
    /// The file already held exactly these bytes: nothing was written or journalled.
    pub unchanged: bool,
}

/// Writes `bytes` as the whole content of `path` for `tool`, as `write_file` does: the size
/// checked first (a refused write makes no folders), the receipt committed before a folder is
/// made (`create_parents`), the file locked, its old content journalled and then replaced
/// atomically; nothing at all when the content is the same.
pub(super) async fn write_whole(
    cx: &CallContext,
    tool: &str,
    (root, path): (Option<&str>, &str),
    bytes: &[u8],
    create_parents: bool,
) -> Result<Whole, ToolError> {
    check_size(cx, path, bytes.len())?;
    if create_parents && makes_folders(cx, root, path, "write") {
        commit_receipt(cx).await?;
    }
    let t = target(cx, root, path, "write", create_parents)?;
    let _guard = lock(&[&t.real]).await;
    let before = read_before(&t, cx.limits.write_file_bytes)?;
    let after = content_hash(bytes);
    let unchanged = before.hash().as_deref() == Some(after.as_str());
    if !unchanged {
        journal_and_replace(cx, tool, &t, &before, bytes, after).await?;
    }
    Ok(Whole {
        root: t.root.name.clone(),
        rel: t.rel.clone(),
        shown: t.shown(),
        created: matches!(before, Before::Absent),
        unchanged,
    })
}

/// [`write_whole`] behind the [`crate::SaveFile`] seam.
pub(super) struct Saver;

#[async_trait::async_trait]
impl crate::SaveFile for Saver {
    async fn save(
        &self,
        cx: &CallContext,
        tool: &str,
        root: Option<&str>,
        path: &str,
        bytes: &[u8],
    ) -> Result<crate::Saved, ToolError> {
        let w = write_whole(cx, tool, (root, path), bytes, true).await?;
        Ok(crate::Saved {
            root: w.root,
            rel: w.rel,
            shown: w.shown,
            created: w.created,
            unchanged: w.unchanged,
        })
    }
}

/// Records `write` in the journal; a change is never made unless this succeeded.
pub(super) async fn record(
    cx: &CallContext,
    write: aether_policy::journal::JournalWrite,
) -> Result<Vec<i64>, ToolError> {
    cx.ledger.record(write).await.map_err(not_recorded)
}

/// Commits the call's riding receipt on its own, now, if it has not been committed: before a
/// change that is not a journalled file write (a folder made on the way), which must not be
/// seen before the call's receipt is durable.
pub(super) async fn commit_receipt(cx: &CallContext) -> Result<(), ToolError> {
    let Some(riding) = &cx.receipt else {
        return Ok(());
    };
    let Some(receipt) = riding.board() else {
        return Ok(());
    };
    let write = aether_policy::journal::JournalWrite {
        receipts: vec![receipt],
        ..Default::default()
    };
    let recorded = cx.ledger.record(write).await;
    riding.landed(landing(&recorded));
    recorded.map(|_| ()).map_err(not_recorded)
}

/// How a journal write ended, as a receipt that rode it takes it ([`PendingReceipt::landed`]).
fn landing<T>(recorded: &Result<T, crate::LedgerError>) -> Result<(), Option<String>> {
    match recorded {
        Ok(_) => Ok(()),
        Err(crate::LedgerError::Halted(why)) => Err(Some(why.clone())),
        Err(_) => Err(None),
    }
}

/// Whether writing `path` would make folders on the way (its folder is not there yet).
pub(super) fn makes_folders(
    cx: &CallContext,
    root: Option<&str>,
    path: &str,
    action: &str,
) -> bool {
    matches!(place(cx, root, path, action), Ok(Place::NoFolder { .. }))
}

/// The error of a change refused because the journal could not record it.
fn not_recorded(e: crate::LedgerError) -> ToolError {
    ToolError::failed(format!(
        "the change could not be recorded in the journal, so nothing was changed: {e}"
    ))
}

/// Checks content against the write limit.
pub(super) fn check_size(cx: &CallContext, shown: &str, len: usize) -> Result<(), ToolError> {
    check_len(cx.limits.write_file_bytes, shown, len)
}

/// Checks content of `len` bytes against the write limit `max`.
pub(super) fn check_len(max: u64, shown: &str, len: usize) -> Result<(), ToolError> {
    if len as u64 > max {
        return Err(ToolError::InvalidArguments(format!(
            "the content for {shown} is {len} bytes, more than the {max} bytes one write may put in a file; \
             split it into several files"
        )));
    }
    Ok(())
}
