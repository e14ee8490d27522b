//! The operator's rules file, loaded, watched and reloaded.
//!
//! A reload that fails keeps the last good rules and records why, for the log, the admin API
//! and `aether policy check`. At start there are no last good rules, so a broken file is an
//! error and Aether does not start: it never runs with fewer rules than the operator wrote.

use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use aether_policy::rules::RuleSet;

/// How long the watcher waits after a change before reading the file (editors write a file in
/// several steps).
pub const DEBOUNCE: Duration = Duration::from_millis(200);

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
            // The default file removed by the operator: no rules. A file the configuration
            // names must be there; its absence keeps the last good rules.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && !self.required => String::new(),
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
