//! `move_file`: rename a file or folder within a root, undoably. Never replaces what is at the
//! destination.

use aether_policy::ArgumentKinds;
use aether_policy::ToolDef;
use aether_policy::journal::{JournalOp, JournalWrite};
use async_trait::async_trait;
use cap_std::fs::MetadataExt;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::write;
use crate::{CallContext, Tool, ToolError, ToolOutput, parse_args};

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct Args {
    /// What to move: relative to the root, or absolute inside a root.
    source: String,
    /// Where to: in the same root. Must not exist yet.
    destination: String,
    /// Name of the root (see list_roots). Defaults to the first root.
    #[serde(default)]
    root: Option<String>,
    /// Create missing parent folders of the destination. Default true.
    #[serde(default = "super::walk::yes")]
    create_parents: bool,
}

#[derive(Serialize, JsonSchema)]
struct Output {
    root: String,
    source: String,
    destination: String,
    /// `file`, `dir` or `symlink`.
    kind: String,
    call_id: String,
}

pub struct MoveFile {
    def: ToolDef,
}

impl MoveFile {
    pub fn new() -> MoveFile {
        MoveFile {
            def: write::writer::<Args, Output>(
                "move_file",
                "Move or rename",
                "Move or rename a file or folder within one read-write root. Refuses if the \
                 destination exists (nothing is overwritten). Journalled: aether undo moves it back.",
                // Nothing is overwritten, but the source path is gone afterwards: not an
                // additive change, so clients are told it is destructive (MCP's
                // `destructiveHint`).
                true,
                false,
            )
            .declaring(ArgumentKinds::paths(&["source", "destination"])),
        }
    }
}

#[async_trait]
impl Tool for MoveFile {
    fn def(&self) -> &ToolDef {
        &self.def
    }

    async fn call(&self, cx: CallContext, args: Value) -> Result<ToolOutput, ToolError> {
        let args: Args = parse_args(args)?;
        let from = write::target(&cx, args.root.as_deref(), &args.source, "move", false)?;
        // What can be judged from the destination's path alone comes first, and the source
        // must exist, before any of the destination's folders is created.
        let mut dest_rel = String::new();
        let dest = cx.roots.locate(
            Some(args.root.as_deref().unwrap_or(&from.root.name)),
            &args.destination,
            &mut dest_rel,
        )?;
        dest.root.check_writable(dest.rel, "move to")?;
        if std::ptr::eq(dest.root, from.root)
            && (dest.rel == from.rel || dest.rel.starts_with(&format!("{}/", from.rel)))
        {
            return Err(ToolError::InvalidArguments(format!(
                "{} cannot move into itself ({})",
                from.shown(),
                dest.root.display(dest.rel)
            )));
        }
        from.dir
            .symlink_metadata(&from.name)
            .map_err(|e| from.root.io_error(&from.rel, e))?;
        let to = write::target(
            &cx,
            Some(args.root.as_deref().unwrap_or(&from.root.name)),
            &args.destination,
            "move to",
            args.create_parents,
        )?;
        if !std::ptr::eq(from.root, to.root) {
            return Err(ToolError::InvalidArguments(format!(
                "{} and {} are in different roots; move_file moves within one root (read_file and \
                 write_file copy across roots)",
                from.shown(),
                to.shown()
            )));
        }
        if to.real.starts_with(&from.real) {
            return Err(ToolError::InvalidArguments(format!(
                "{} cannot move into itself ({})",
                from.shown(),
                to.shown()
            )));
        }
        let _guard = write::lock(&[&from.real, &to.real]).await;
        let meta = from
            .dir
            .symlink_metadata(&from.name)
            .map_err(|e| from.root.io_error(&from.rel, e))?;
        let ft = meta.file_type();
        let kind = super::kind_of(&ft);
        if kind == "other" {
            return Err(ToolError::denied(
                "confinement",
                format!(
                    "{} is not a regular file, folder or symlink; refused",
                    from.shown()
                ),
            ));
        }
        if ft.is_file() && meta.nlink() > 1 {
            return Err(ToolError::denied(
                "confinement",
                format!(
                    "{} has {} hard links; another of its names may lie outside every root, so Aether \
                     refuses to move it",
                    from.shown(),
                    meta.nlink()
                ),
            ));
        }
        if ft.is_dir()
            && let Some(inside) = hidden_inside(&cx, &from.real, &to.real).await?
        {
            // Some credential files are known by their folder's name (`.kube/config`,
            // `.docker/config.json`): moved under another name, they would be read.
            return Err(ToolError::denied(
                "confinement",
                format!(
                    "{} holds {}, an Aether control file or store, or a credential file that would \
                     no longer be known as one under another name; refused",
                    from.shown(),
                    inside.display()
                ),
            ));
        }
        match to.dir.symlink_metadata(&to.name) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Ok(_) => {
                return Err(ToolError::failed(format!(
                    "{} already exists; move_file never replaces anything. Move it away or delete it first",
                    to.shown()
                )));
            }
            Err(e) => return Err(to.root.io_error(&to.rel, e)),
        }
        let mut entries = write::mkdir_entries(&cx, "move_file", &to);
        let mut e = write::entry(
            &cx,
            "move_file",
            JournalOp::Move,
            &from.root.name,
            &from.rel,
        );
        e.dest = Some(to.rel.clone());
        entries.push(e);
        write::record(
            &cx,
            JournalWrite {
                entries,
                ..Default::default()
            },
        )
        .await?;
        // RENAME_NOREPLACE closes the gap between the check above and the rename against
        // other processes (the lock closes it against other Aether writes): a file created
        // at the destination meanwhile is never replaced.
        match write::rename_new(&from.dir, &from.name, &to.dir, &to.name) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                return Err(ToolError::failed(format!(
                    "{} appeared while the move was being made; move_file never replaces \
                     anything, so nothing was moved",
                    to.shown()
                )));
            }
            Err(e) => return Err(from.root.io_error(&from.rel, e)),
        }
        write::sync_dir(&from.dir).map_err(|e| from.root.io_error(&from.rel, e))?;
        write::sync_dir(&to.dir).map_err(|e| to.root.io_error(&to.rel, e))?;
        Ok(ToolOutput::with_structured(
            format!("moved {} to {}", from.shown(), to.shown()),
            serde_json::to_value(Output {
                root: from.root.name.clone(),
                source: from.rel.clone(),
                destination: to.rel.clone(),
                kind: kind.into(),
                call_id: cx.call_id.clone(),
            })
            .unwrap_or_default(),
        ))
    }
}

/// Most entries a moved folder is walked for (a larger one is refused: it cannot be judged).
const MAX_WALK: usize = 200_000;

/// The first entry under the folder `from` that is a credential or Aether file (or folder)
/// now and would not be known as one at its place under `to`, if any. Walked without
/// following links (what a link points at is judged where it really is), on the blocking
/// pool.
async fn hidden_inside(
    cx: &CallContext,
    from: &std::path::Path,
    to: &std::path::Path,
) -> Result<Option<std::path::PathBuf>, ToolError> {
    let (roots, from, to) = (cx.roots.clone(), from.to_path_buf(), to.to_path_buf());
    let walk = move || {
        let credentials = roots.credentials();
        let known = |p: &std::path::Path| {
            credentials.is_credential(&p.to_string_lossy()) || roots.is_private(p)
        };
        for (n, entry) in walkdir::WalkDir::new(&from)
            .follow_links(false)
            .min_depth(1)
            .into_iter()
            .enumerate()
        {
            if n >= MAX_WALK {
                return Err(ToolError::failed(format!(
                    "{} holds more than {MAX_WALK} entries; move_file checks every one, so it \
                     does not move a folder this large",
                    from.display()
                )));
            }
            let Ok(entry) = entry else { continue };
            let path = entry.path();
            let moved = path.strip_prefix(&from).map(|rest| to.join(rest));
            if known(path) && !moved.is_ok_and(|m| known(&m)) {
                return Ok(Some(path.to_path_buf()));
            }
            // Aether's control files and stores are not moved at all, whatever they would be
            // called after: a configuration or rules file moved away is one deleted.
            if aether_policy::paths::is_control_file(&path.to_string_lossy())
                || entry
                    .file_name()
                    .to_str()
                    .and_then(aether_policy::paths::protected_name)
                    == Some(".aether")
            {
                return Ok(Some(path.to_path_buf()));
            }
        }
        Ok(None)
    };
    tokio::task::spawn_blocking(walk)
        .await
        .map_err(|e| ToolError::failed(format!("checking the folder failed: {e}")))?
}
