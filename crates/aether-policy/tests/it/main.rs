//! aether-policy's integration tests: what the crate's public API does, end to end.

mod dlp;
