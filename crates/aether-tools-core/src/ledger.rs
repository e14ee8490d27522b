//! Where the tools keep their records: the workspace tools' journal, and the command log of
//! `run_command` and `run_shell`. The pipeline implements [`Ledger`] over the store; the tools
//! only see this trait, so they know nothing of SQL. What goes wrong behind it is a
//! [`LedgerError`], whose variants say what a tool may do about it.

use aether_policy::journal::{
    CommandEnd, CommandStart, Document, JournalEntry, JournalQuery, JournalWrite, KnowledgeDoc,
    KnowledgeHit, Message,
};
use async_trait::async_trait;

/// Why the ledger did not do what a tool asked. A tool branches on the variant, never on the
/// message, which is what the caller is shown.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum LedgerError {
    /// The records cannot be kept: the store failed or could not be reached, or this Aether
    /// has none. Nothing was written.
    #[error("{0}")]
    Unavailable(String),
    /// A new document's name is taken.
    #[error("{0}")]
    AlreadyExists(String),
    /// A document changed since it was read: read it again and make the change again.
    #[error("{0}")]
    Conflict(String),
    /// The request is not allowed as made (a message to an agent outside the sender's team).
    #[error("{0}")]
    Refused(String),
    /// A write carrying its call's receipt met a halt: nothing was written (the reason).
    #[error("Aether is halted by an operator ({0}); nothing was written")]
    Halted(String),
}

impl LedgerError {
    fn unavailable(message: &str) -> LedgerError {
        LedgerError::Unavailable(message.to_string())
    }
}

#[async_trait]
pub trait Ledger: Send + Sync {
    /// Makes `write` durable (fsync) before returning its entries' ids. A tool records a
    /// change here *before* making it.
    async fn record(&self, write: JournalWrite) -> Result<Vec<i64>, LedgerError>;
    /// [`Ledger::record`] for a caller on a thread of its own, which may block: the store
    /// may commit on the calling thread instead of handing the write to its writer and
    /// waiting to be woken.
    async fn record_blocking(&self, write: JournalWrite) -> Result<Vec<i64>, LedgerError> {
        self.record(write).await
    }
    /// Journal entries, newest first.
    async fn entries(&self, query: JournalQuery) -> Result<Vec<JournalEntry>, LedgerError>;
    /// A journalled image by content hash.
    async fn image(&self, hash: &str) -> Result<Option<Vec<u8>>, LedgerError>;
    /// Writes a command to the command log, durably, before it runs; returns its row.
    async fn command_started(&self, start: CommandStart) -> Result<i64, LedgerError>;
    /// Records how the command of row `id` ended.
    async fn command_ended(&self, id: i64, end: CommandEnd) -> Result<(), LedgerError>;
    /// A plan or to-do list.
    async fn document(
        &self,
        kind: &str,
        scope: &str,
        name: &str,
    ) -> Result<Option<Document>, LedgerError>;
    /// Writes a plan or to-do list if nobody changed it since it was read (its version is
    /// one more than the one read; 1 for a new one).
    async fn put_document(&self, doc: Document) -> Result<(), LedgerError>;
    /// Leaves a message for another agent of the team.
    async fn send_message(&self, message: Message) -> Result<i64, LedgerError>;
    /// Takes the unread messages for an agent of a team, oldest first.
    async fn take_messages(
        &self,
        team: &str,
        to: &str,
        limit: usize,
    ) -> Result<Vec<Message>, LedgerError>;
    /// Adds or replaces documents in the knowledge index.
    async fn knowledge_put(&self, docs: Vec<KnowledgeDoc>) -> Result<usize, LedgerError>;
    /// Ranked full-text search over `scopes`.
    async fn knowledge_search(
        &self,
        scopes: Vec<String>,
        query: &str,
        limit: usize,
        floor: f64,
    ) -> Result<Vec<KnowledgeHit>, LedgerError>;
}

/// A [`Ledger`] that keeps nothing and refuses to record: for callers that serve only
/// read-only tools. A write tool given it fails before changing anything.
#[derive(Debug, Default)]
pub struct NoLedger;

#[async_trait]
impl Ledger for NoLedger {
    async fn record(&self, _: JournalWrite) -> Result<Vec<i64>, LedgerError> {
        Err(LedgerError::unavailable(
            "this Aether has no journal, so it cannot make undoable changes",
        ))
    }
    async fn entries(&self, _: JournalQuery) -> Result<Vec<JournalEntry>, LedgerError> {
        Ok(Vec::new())
    }
    async fn image(&self, _: &str) -> Result<Option<Vec<u8>>, LedgerError> {
        Ok(None)
    }
    async fn command_started(&self, _: CommandStart) -> Result<i64, LedgerError> {
        Err(LedgerError::unavailable(
            "this Aether has no command log, so it runs no commands",
        ))
    }
    async fn command_ended(&self, _: i64, _: CommandEnd) -> Result<(), LedgerError> {
        Ok(())
    }
    async fn document(&self, _: &str, _: &str, _: &str) -> Result<Option<Document>, LedgerError> {
        Ok(None)
    }
    async fn put_document(&self, _: Document) -> Result<(), LedgerError> {
        Err(LedgerError::unavailable(
            "this Aether has no store, so it keeps no plans",
        ))
    }
    async fn send_message(&self, _: Message) -> Result<i64, LedgerError> {
        Err(LedgerError::unavailable(
            "this Aether has no store, so it keeps no messages",
        ))
    }
    async fn take_messages(&self, _: &str, _: &str, _: usize) -> Result<Vec<Message>, LedgerError> {
        Ok(Vec::new())
    }
    async fn knowledge_put(&self, _: Vec<KnowledgeDoc>) -> Result<usize, LedgerError> {
        Err(LedgerError::unavailable(
            "this Aether has no store, so it keeps no knowledge index",
        ))
    }
    async fn knowledge_search(
        &self,
        _: Vec<String>,
        _: &str,
        _: usize,
        _: f64,
    ) -> Result<Vec<KnowledgeHit>, LedgerError> {
        Ok(Vec::new())
    }
}
