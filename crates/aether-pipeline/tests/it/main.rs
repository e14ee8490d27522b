//! The admission pipeline's integration tests, in one binary: each test opens its own
//! temporary store (when it needs one), builds its own test tools and pipeline, and ends with
//! `Harness::check()`, which verifies the audit chain and the receipt/audit invariants.

mod api_schema;
mod approvals;
mod arguments;
mod browser;
mod concurrency;
mod egress;
mod envelope;
mod halt;
mod offers;
mod order;
mod outcomes;
mod rates;
mod refusals;
mod registry;
mod results;
mod rules;
mod setup;
mod shell;
mod spans;
mod support;
mod writes;
