//! The operator's rules file, loaded, watched and reloaded.
//!
//! A reload that fails keeps the last good rules and records why, for the log, the admin API
//! and `aether policy check`. At start there are no last good rules, so a broken file is an
//! error and Aether does not start: it never runs with fewer rules than the operator wrote.
//!
//! Nothing but a whole file the operator wrote loosens the rules: an empty file, one without
//! its `rules:` list (cut short, or caught half-written) and a removed file all keep the last
//! good rules ("no rules" is `rules: []`), and the watcher reads the file only once its size
//! and modification time held still for a whole [`DEBOUNCE`].

use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use aether_policy::rules::RuleSet;

/// How long the file must hold still (same size and modification time) before the watcher
/// reads it: editors and scripts write a file in several steps.
pub const DEBOUNCE: Duration = Duration::from_millis(200);

/// What the watcher compares across a debounce: the file's identity, size and modification
/// time (`None` while there is no file).
pub fn stamp(path: &Path) -> Option<(u64, u64, u64, i64, i64)> {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::metadata(path).ok()?;
    Some((m.dev(), m.ino(), m.len(), m.mtime(), m.mtime_nsec()))
}

#[derive(Debug)]
pub struct Rules {
    path: Option<PathBuf>,
    /// The operator named the file: it must be there (a deleted one is an error, not "no
    /// rules").
    required: bool,
    current: RwLock<Arc<RuleSet>>,
    /// Text of the file the current rules came from, to skip reloads that change nothing.
    text: RwLock<Option<String>>,
    last_error: RwLock<Option<String>>,
}

impl Rules {
    /// No rules at all.
    pub fn none() -> Rules {
        Rules {
            path: None,
            required: false,
            current: RwLock::new(Arc::new(RuleSet::default())),
            text: RwLock::new(None),
            last_error: RwLock::new(None),
        }
    }

    /// The rules in `path`. A missing file is no rules unless `required` (the operator named
    /// it); a file that does not parse is an error.
    pub fn load(path: &Path, required: bool) -> Result<Rules, String> {
        let rules = Rules {
            path: Some(path.to_path_buf()),
            required,
            ..Rules::none()
        };
        match std::fs::read_to_string(path) {
            Ok(text) => {
                let set = RuleSet::parse(&text).map_err(|e| format!("{}: {e}", path.display()))?;
                *rules.current.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(set);
                *rules.text.write().unwrap_or_else(|e| e.into_inner()) = Some(text);
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && !required => {}
            Err(e) => {
                return Err(format!(
                    "cannot read the rules file {}: {e}",
                    path.display()
                ));
            }
        }
        Ok(rules)
    }

    pub fn path(&self) -> Option<&Path> {
        self.path.as_deref()
    }

    pub fn current(&self) -> Arc<RuleSet> {
        self.current
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Why the last reload failed, if it did (cleared by the next good one).
    pub fn last_error(&self) -> Option<String> {
        self.last_error
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Reads the file again. `Ok(true)`: new rules are in force; `Ok(false)`: nothing changed;
    /// `Err`: the file is broken and the last good rules stay.
    pub fn reload(&self) -> Result<bool, String> {
        let Some(path) = &self.path else {
            return Ok(false);
        };
        let text = match std::fs::read_to_string(path) {
            Ok(text) => text,
            // Never a file here: still no rules.
            Err(e)
                if e.kind() == std::io::ErrorKind::NotFound
                    && !self.required
                    && self
                        .text
                        .read()
                        .unwrap_or_else(|e| e.into_inner())
                        .is_none() =>
            {
                *self.last_error.write().unwrap_or_else(|e| e.into_inner()) = None;
                return Ok(false);
            }
            // A removed (or renamed) file keeps the rules it held: removing rules is writing
            // `rules: []`, not losing the file.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return self.failed(format!(
                    "{} is gone; the previous rules stay in force (write `rules: []` there to drop them)",
                    path.display()
                ));
            }
            Err(e) => return self.failed(format!("cannot read {}: {e}", path.display())),
        };
        if self
            .text
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .as_deref()
            == Some(&text)
        {
            *self.last_error.write().unwrap_or_else(|e| e.into_inner()) = None;
            return Ok(false);
        }
        match RuleSet::parse(&text) {
            Ok(set) => {
                *self.current.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(set);
                *self.text.write().unwrap_or_else(|e| e.into_inner()) = Some(text);
                *self.last_error.write().unwrap_or_else(|e| e.into_inner()) = None;
                Ok(true)
            }
            Err(e) => self.failed(format!(
                "{}: {e} (the previous rules stay in force)",
                path.display()
            )),
        }
    }

    fn failed(&self, message: String) -> Result<bool, String> {
        *self.last_error.write().unwrap_or_else(|e| e.into_inner()) = Some(message.clone());
        Err(message)
    }
}
