//! One module per subcommand.

pub mod audit;
pub mod halt;
pub mod mcp_serve;
pub mod serve;
pub mod tools;
