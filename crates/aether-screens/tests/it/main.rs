//! aether-policy's integration tests: what the crate's public API does, end to end, and
//! properties of the pure judges over generated input.

mod command_judge;
mod dlp;
mod path_cleaner;
