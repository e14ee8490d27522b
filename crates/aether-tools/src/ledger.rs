//! Where the tools keep their records: the workspace tools' journal, and the command log of
//! `run_command` and `run_shell`. The pipeline implements [`Ledger`] over the store; the tools
//! only see this trait, so they know nothing of SQL.

use aether_policy::journal::{CommandEnd, CommandStart, JournalEntry, JournalQuery, JournalWrite};
use async_trait::async_trait;

#[async_trait]
pub trait Ledger: Send + Sync {
    /// Makes `write` durable (fsync) before returning its entries' ids. A tool records a
    /// change here *before* making it.
    async fn record(&self, write: JournalWrite) -> Result<Vec<i64>, String>;
    /// Journal entries, newest first.
    async fn entries(&self, query: JournalQuery) -> Result<Vec<JournalEntry>, String>;
    /// A journalled image by content hash.
    async fn image(&self, hash: &str) -> Result<Option<Vec<u8>>, String>;
    /// Writes a command to the command log, durably, before it runs; returns its row.
    async fn command_started(&self, start: CommandStart) -> Result<i64, String>;
    /// Records how the command of row `id` ended.
    async fn command_ended(&self, id: i64, end: CommandEnd) -> Result<(), String>;
}

/// A [`Ledger`] that keeps nothing and refuses to record: for callers that serve only
/// read-only tools. A write tool given it fails before changing anything.
#[derive(Debug, Default)]
pub struct NoLedger;

#[async_trait]
impl Ledger for NoLedger {
    async fn record(&self, _: JournalWrite) -> Result<Vec<i64>, String> {
        Err("this Aether has no journal, so it cannot make undoable changes".into())
    }
    async fn entries(&self, _: JournalQuery) -> Result<Vec<JournalEntry>, String> {
        Ok(Vec::new())
    }
    async fn image(&self, _: &str) -> Result<Option<Vec<u8>>, String> {
        Ok(None)
    }
    async fn command_started(&self, _: CommandStart) -> Result<i64, String> {
        Err("this Aether has no command log, so it runs no commands".into())
    }
    async fn command_ended(&self, _: i64, _: CommandEnd) -> Result<(), String> {
        Ok(())
    }
}
