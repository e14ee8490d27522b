//! A tool's state in the operator's registry, as the store keeps it and the pipeline reads it.

use serde::{Deserialize, Serialize};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RegistryState {
    Approved,
    Unapproved,
    Withdrawn,
}

impl RegistryState {
    pub fn as_str(self) -> &'static str {
        match self {
            RegistryState::Approved => "approved",
            RegistryState::Unapproved => "unapproved",
            RegistryState::Withdrawn => "withdrawn",
        }
    }

    pub fn parse(s: &str) -> Option<RegistryState> {
        match s {
            "approved" => Some(RegistryState::Approved),
            "unapproved" => Some(RegistryState::Unapproved),
            "withdrawn" => Some(RegistryState::Withdrawn),
            _ => None,
        }
    }
}
