//! The tools crate's integration tests: every workspace tool called through the public API,
//! as the pipeline calls it, each test on its own temporary tree.

mod common;
mod confinement;
mod credentials;
mod finishing;
mod listing;
mod read;
mod sandbox;
mod schemas;
mod search;
mod shell;
mod style;
mod tts;
