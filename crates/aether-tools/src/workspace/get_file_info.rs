//! `get_file_info`: what a path is, without reading it: kind, size, times, permissions.

use cap_std::fs::MetadataExt;

use aether_policy::ArgumentKinds;
use aether_policy::ToolDef;
use async_trait::async_trait;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

use crate::{CallContext, Tool, ToolError, ToolOutput, parse_args};

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct Args {
    /// The path: relative to the root, or absolute inside a root.
    path: String,
    /// Name of the root (see list_roots). Defaults to the first root.
    #[serde(default)]
    root: Option<String>,
}

#[derive(Serialize, JsonSchema)]
struct Output {
    root: String,
    path: String,
    /// `file`, `dir`, `symlink` or `other`.
    kind: String,
    size: u64,
    /// Last modification, RFC 3339.
    modified: Option<String>,
    /// Permission bits in octal, e.g. "644".
    permissions: String,
    read_only: bool,
    hard_links: u64,
    /// Where a symlink points (as written in the link).
    #[serde(skip_serializing_if = "Option::is_none")]
    symlink_target: Option<String>,
}

pub struct GetFileInfo {
    def: ToolDef,
}

impl GetFileInfo {
    pub fn new() -> GetFileInfo {
        GetFileInfo {
            def: super::reader::<Args, Output>(
                "get_file_info",
                "Describe a path",
                "Describe a file or folder under a root without reading it: kind, size in bytes, last \
                 modification time, permissions, and a symlink's target.",
            )
            .declaring(ArgumentKinds::paths(&["path"])),
        }
    }
}

#[async_trait]
impl Tool for GetFileInfo {
    fn def(&self) -> &ToolDef {
        &self.def
    }

    async fn call(&self, cx: CallContext, args: Value) -> Result<ToolOutput, ToolError> {
        let args: Args = parse_args(args)?;
        let mut rel = String::new();
        let loc = cx
            .roots
            .locate(args.root.as_deref(), &args.path, &mut rel)?;
        let root = loc.root;
        // The path's folders may be symlinks (inside the root, or the open would fail): what
        // the path really names must not be a credential file either. The metadata is then
        // read through the folder handle just checked, not looked up again by name.
        let (folder, name) = match loc.rel.rsplit_once('/') {
            Some((parent, name)) => {
                let (folder, real_parent) = root.open_folder(parent, cx.opening())?;
                let real_path = real_parent.join(name);
                if cx
                    .roots
                    .credentials()
                    .is_credential(&real_path.to_string_lossy())
                {
                    let real = root.relative_of(&real_path).unwrap_or_default();
                    return Err(ToolError::denied(
                        "confinement",
                        format!(
                            "{} resolves to {}, a credential file; refused",
                            root.display(loc.rel),
                            root.display(&real)
                        ),
                    ));
                }
                (folder, name)
            }
            None => (
                root.dir().try_clone().map_err(|e| root.io_error("", e))?,
                loc.rel,
            ),
        };
        let meta = if name.is_empty() {
            folder.dir_metadata()
        } else {
            folder.symlink_metadata(name)
        }
        .map_err(|e| root.io_error(loc.rel, e))?;
        let ft = meta.file_type();
        // A sealed root tells only of what its seal pinned, as it was pinned.
        if let Some(seal) = root.seal_in_force()? {
            let pinned = seal.pins.get(loc.rel).map(|(_, size)| *size);
            let shown = if ft.is_dir() {
                seal.shows(loc.rel, true)
            } else {
                ft.is_file() && pinned.is_some()
            };
            if !shown {
                return Err(ToolError::denied(
                    "sealed",
                    format!(
                        "{} was not pinned when root {:?} was sealed; it is not served",
                        root.display(loc.rel),
                        root.name
                    ),
                ));
            }
            // A pinned file is checked as a read checks it (its content against the hash).
            if ft.is_file() && pinned == Some(meta.len()) {
                root.open_file(loc.rel, cx.opening())?;
            }
            if ft.is_file() && pinned != Some(meta.len()) {
                return Err(ToolError::denied(
                    "sealed",
                    format!(
                        "{} changed on disk since root {:?} was sealed; it is not served until \
                         the operator re-seals it",
                        root.display(loc.rel),
                        root.name
                    ),
                ));
            }
        }
        if ft.is_file() && meta.nlink() > 1 {
            return Err(ToolError::denied(
                "confinement",
                format!(
                    "{} has {} hard links; another of its names may lie outside every root, so Aether refuses it",
                    root.display(loc.rel),
                    meta.nlink()
                ),
            ));
        }
        let kind = super::kind_of(&ft);
        let symlink_target = if ft.is_symlink() {
            folder
                .read_link_contents(name)
                .ok()
                .map(|p| p.to_string_lossy().into_owned())
        } else {
            None
        };
        let modified = meta
            .modified()
            .ok()
            .map(|t| OffsetDateTime::from(t.into_std()))
            .and_then(|t| t.format(&Rfc3339).ok());
        let (mode, nlink) = (meta.mode(), meta.nlink());
        let output = Output {
            root: root.name.clone(),
            path: loc.rel.to_string(),
            kind: kind.into(),
            size: meta.len(),
            modified,
            permissions: format!("{:o}", mode & 0o7777),
            read_only: meta.permissions().readonly(),
            hard_links: nlink,
            symlink_target,
        };
        let mut text = format!(
            "{}: {}, {} bytes, permissions {}",
            root.display(loc.rel),
            output.kind,
            output.size,
            output.permissions
        );
        if let Some(m) = &output.modified {
            text.push_str(&format!(", modified {m}"));
        }
        if let Some(t) = &output.symlink_target {
            text.push_str(&format!(", points to {t}"));
        }
        Ok(ToolOutput::with_structured(
            text,
            serde_json::to_value(output).map_err(ToolError::failed)?,
        ))
    }
}
