//! One module per subcommand.

pub mod audit;
pub mod halt;
pub mod journal;
pub mod mcp_serve;
pub mod roots;
pub mod serve;
pub mod tools;
