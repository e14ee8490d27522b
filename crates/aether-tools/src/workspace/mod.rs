//! The workspace group: tools that read and write files under the named roots.
//!
//! Every path goes through [`Roots::locate`](crate::roots::Roots::locate) and is opened beneath
//! its root's directory handle; see `roots.rs` for the confinement rules. Small files are read
//! inline on the calling task (a page-cache read of a few KiB costs less than a hop to the
//! blocking pool); anything that may take long (large files, tree walks, searches) runs on the
//! blocking pool and watches the call's cancellation token.

mod coalesce;
mod create_directory;
mod delete_file;
pub mod edit;
mod edit_file;
mod finishing;
mod style;
mod tts;
// The quality group's reader of a project's files, built on the walks here.
pub use finishing::CheckFinishing;
pub use style::RecordStyle;
// The audio group's voice-over, written into the workspace like any write.
pub use tts::{TtsRender, TtsStatus, parse_script};
mod get_file_info;
mod glob;
mod list_dir;
mod list_files;
mod list_roots;
mod move_file;
mod read_file;
mod read_multiple_files;
mod redo;
mod search_files;
mod undo;
mod walk;
mod write;
mod write_file;

pub use redo::{Redo, redo};
pub use undo::{UndoCall, undo_call};
pub use write_file::WriteFile;

/// The workspace's whole-file write, for tools outside this group that save what they make
/// (see [`aether_tools_core::SaveFile`]).
pub fn saver() -> std::sync::Arc<dyn crate::SaveFile> {
    std::sync::Arc::new(write::Saver)
}

use std::sync::Arc;

use aether_policy::tool::groups;
use aether_policy::{Tier, ToolDef, ToolMeta};
use schemars::JsonSchema;

use crate::{Tool, schema_of};

/// The workspace tools, in catalog order.
pub fn tools() -> Vec<Arc<dyn Tool>> {
    vec![
        Arc::new(list_roots::ListRoots::new()),
        Arc::new(list_dir::ListDir::new()),
        Arc::new(read_file::ReadFile::new()),
        Arc::new(read_multiple_files::ReadMultipleFiles::new()),
        Arc::new(get_file_info::GetFileInfo::new()),
        Arc::new(glob::GlobTool::new()),
        Arc::new(search_files::SearchFiles::new()),
        Arc::new(list_files::ListFiles::new()),
        Arc::new(write_file::WriteFile::new()),
        Arc::new(edit_file::EditFile::new()),
        Arc::new(move_file::MoveFile::new()),
        Arc::new(create_directory::CreateDirectory::new()),
        Arc::new(delete_file::DeleteFile::new()),
        Arc::new(undo::RevertFile::new()),
    ]
}

/// The definition of a read-only workspace tool with input `I` and output `O`.
fn reader<I: JsonSchema, O: JsonSchema>(name: &str, title: &str, description: &str) -> ToolDef {
    ToolDef {
        name: name.into(),
        title: title.into(),
        group: groups::WORKSPACE.into(),
        tier: Tier::Standard,
        description: description.into(),
        input_schema: schema_of::<I>(),
        output_schema: schema_of::<O>(),
        arguments: Default::default(),
        meta: ToolMeta::read_only(),
    }
}

/// `file`, `dir`, `symlink` or `other`, as listings report a kind.
fn kind_of(ft: &cap_std::fs::FileType) -> &'static str {
    if ft.is_dir() {
        "dir"
    } else if ft.is_symlink() {
        "symlink"
    } else if ft.is_file() {
        "file"
    } else {
        "other"
    }
}

/// Bytes that mark a file as binary when found in its first block.
fn looks_binary(head: &[u8]) -> bool {
    head.contains(&0)
}
