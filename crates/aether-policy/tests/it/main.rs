//! aether-policy's integration tests: properties of the pure judges over generated input.

mod command_judge;
mod path_cleaner;
