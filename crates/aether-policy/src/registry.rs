//! The registry as the pipeline sees it: for each tool name, its state and the digest of the
//! definition that was approved. Only an `approved` tool whose live definition still has the
//! approved digest is offered or run.

use std::collections::HashMap;

use crate::agent::Hidden;
use crate::canon::Digest;

pub use aether_vocab::registry::RegistryState;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RegistryEntry {
    pub state: RegistryState,
    /// The digest of the definition the last approval bound; `None` if never approved.
    pub approved: Option<Digest>,
}

/// A snapshot of the registry, cheap to consult on every call.
#[derive(Clone, Debug, Default)]
pub struct RegistryView {
    entries: HashMap<String, RegistryEntry>,
}

impl RegistryView {
    pub fn new(entries: impl IntoIterator<Item = (String, RegistryEntry)>) -> RegistryView {
        RegistryView {
            entries: entries.into_iter().collect(),
        }
    }

    pub fn entry(&self, name: &str) -> Option<&RegistryEntry> {
        self.entries.get(name)
    }

    /// Whether the registry lets the tool `name`, whose live definition has `digest`, be
    /// offered and run.
    pub fn admits(&self, name: &str, digest: Digest) -> Result<(), Hidden> {
        let Some(entry) = self.entries.get(name) else {
            return Err(Hidden::Unapproved);
        };
        match entry.state {
            RegistryState::Withdrawn => Err(Hidden::Withdrawn),
            RegistryState::Unapproved => Err(Hidden::Unapproved),
            RegistryState::Approved if entry.approved == Some(digest) => Ok(()),
            RegistryState::Approved => Err(Hidden::DefinitionChanged),
        }
    }
}
