//! Aether's screens: the pure readers that judge what an agent sends before anything runs or
//! leaves — a shell command (`shell`), a program's argv and scripts (`argv`, `commands`,
//! `scripts`), credentials in outgoing data (`dlp`), a URL and the addresses it may reach
//! (`egress`), a path and what it may name (`paths`), an upstream tool's definition
//! (`definition_screen`).
//!
//! No IO, no async runtime, no configuration: each is a function of its input (and of
//! settings passed in), fuzzable on its own. The policy (config, agents, rules) builds on
//! these; they build only on the vocabulary.

pub mod argv;
pub mod commands;
pub mod definition_screen;
pub mod dlp;
pub mod egress;
pub mod paths;
pub mod scripts;
pub mod shell;
