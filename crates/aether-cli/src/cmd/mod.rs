//! One module per subcommand.

pub mod accounts;
pub mod agent;
pub mod approvals;
pub mod audit;
pub mod commands;
pub mod credentials;
pub mod halt;
pub mod journal;
pub mod knowledge;
pub mod mcp_serve;
pub mod models;
pub mod oauth;
pub mod policy;
pub mod registry;
pub mod roots;
pub mod runs;
pub mod serve;
pub mod sources;
pub mod status;
pub mod tokens;
pub mod tools;
