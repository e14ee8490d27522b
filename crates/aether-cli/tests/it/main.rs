//! The `aether` binary's integration tests: the real binary, driven over its real transports,
//! by raw JSON-RPC and by the official MCP peers (when `AETHER_PEERS` names their install
//! folder; `scripts/test.sh` sets it). Plus the workspace's tidy checks.

mod authorization;
mod browser;
mod cli;
mod console;
mod console_sso;
mod control;
mod crash;
mod federation;
mod governance;
mod http;
mod modern;
mod oauth;
mod peers;
mod replicas;
mod runner;
mod speech;
mod stdio;
mod telemetry;
mod tidy;
mod util;
mod working_tools;
