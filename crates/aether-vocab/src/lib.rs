//! Aether's vocabulary: the words every crate shares and nothing else — a tool's definition
//! and what its arguments are, digests and canonical JSON, refusals and the steps that make
//! them, the journal's records, a registry state, bounded text.
//!
//! Pure: no IO, no async runtime, no configuration. The store, the screens and the policy
//! build on it; it depends on no other Aether crate.

pub mod arguments;
pub mod canon;
pub mod decision;
pub mod journal;
pub mod registry;
pub mod tool;
pub mod truncate;

pub use arguments::ArgumentKinds;
pub use canon::{Digest, canonical_json, json_len, sha256};
pub use decision::{Refusal, Step};
pub use registry::RegistryState;
pub use tool::{Risk, Tier, ToolDef, ToolMeta};

/// A name an operator or agent chooses for a thing Aether keeps (a credential, an account, a
/// knowledge pack, a report): 1-64 of ASCII letters, digits, `.`, `-` and `_`.
pub fn is_plain_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_'))
}
