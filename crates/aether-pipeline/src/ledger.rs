//! The tools' journal and command log, kept in the store, and the store's errors as the
//! tools' [`LedgerError`]s.

use aether_policy::journal::{CommandEnd, CommandStart, JournalEntry, JournalQuery, JournalWrite};
use aether_store::{Store, StoreError};
use aether_tools_core::{Ledger, LedgerError};
use async_trait::async_trait;

/// [`Ledger`] over the store: records go through the store's group commit, durably.
pub struct StoreLedger {
    store: Store,
    /// Each configured agent's team: a message reaches only an agent of the sender's team.
    teams: std::collections::BTreeMap<String, Option<String>>,
}

impl StoreLedger {
    pub fn new(store: Store) -> StoreLedger {
        StoreLedger::with_teams(store, Default::default())
    }

    pub fn with_teams(
        store: Store,
        teams: std::collections::BTreeMap<String, Option<String>>,
    ) -> StoreLedger {
        StoreLedger { store, teams }
    }
}

#[async_trait]
impl Ledger for StoreLedger {
    async fn record(&self, write: JournalWrite) -> Result<Vec<i64>, LedgerError> {
        self.store.journal(write).await.map_err(ledger_error)
    }

    async fn record_blocking(&self, write: JournalWrite) -> Result<Vec<i64>, LedgerError> {
        self.store.journal_alone(write).await.map_err(ledger_error)
    }

    async fn entries(&self, query: JournalQuery) -> Result<Vec<JournalEntry>, LedgerError> {
        self.store
            .journal_entries(query)
            .await
            .map_err(ledger_error)
    }

    async fn image(&self, hash: &str) -> Result<Option<Vec<u8>>, LedgerError> {
        self.store.journal_blob(hash).await.map_err(ledger_error)
    }

    async fn command_started(&self, start: CommandStart) -> Result<i64, LedgerError> {
        self.store
            .command_started(start)
            .await
            .map_err(ledger_error)
    }

    async fn command_ended(&self, id: i64, end: CommandEnd) -> Result<(), LedgerError> {
        self.store
            .command_ended(id, end)
            .await
            .map_err(ledger_error)
    }

    async fn document(
        &self,
        kind: &str,
        scope: &str,
        name: &str,
    ) -> Result<Option<aether_store::Document>, LedgerError> {
        self.store
            .document(kind, scope, name)
            .await
            .map_err(ledger_error)
    }

    async fn put_document(&self, doc: aether_store::Document) -> Result<(), LedgerError> {
        self.store.put_document(doc).await.map_err(ledger_error)
    }

    async fn send_message(&self, message: aether_store::Message) -> Result<i64, LedgerError> {
        match self.teams.get(&message.to_agent) {
            Some(Some(team)) if *team == message.team => {}
            _ => {
                return Err(LedgerError::Refused(format!(
                    "{:?} is not an agent of team {} (a message reaches only the sender's team)",
                    message.to_agent, message.team
                )));
            }
        }
        self.store.send_message(message).await.map_err(ledger_error)
    }

    async fn take_messages(
        &self,
        team: &str,
        to: &str,
        limit: usize,
    ) -> Result<Vec<aether_store::Message>, LedgerError> {
        self.store
            .take_messages(team, to, limit)
            .await
            .map_err(ledger_error)
    }

    async fn knowledge_put(
        &self,
        docs: Vec<aether_store::KnowledgeDoc>,
    ) -> Result<usize, LedgerError> {
        self.store.knowledge_put(docs).await.map_err(ledger_error)
    }

    async fn knowledge_search(
        &self,
        scopes: Vec<String>,
        query: &str,
        limit: usize,
        floor: f64,
    ) -> Result<Vec<aether_store::KnowledgeHit>, LedgerError> {
        self.store
            .knowledge_search(scopes, query, limit, floor)
            .await
            .map_err(ledger_error)
    }
}

/// The store's errors as the tools see them: a document's name taken or its version moved on
/// are things a tool acts on; anything else means the records could not be kept. The message
/// is the store's own.
fn ledger_error(e: StoreError) -> LedgerError {
    match e {
        StoreError::Halted(state) => LedgerError::Halted(state.why.clone().unwrap_or_default()),
        StoreError::DocumentExists { .. } => LedgerError::AlreadyExists(e.to_string()),
        StoreError::DocumentChanged { .. } => LedgerError::Conflict(e.to_string()),
        e => LedgerError::Unavailable(e.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_taken_name_and_a_moved_version_are_told_apart_with_the_stores_own_message() {
        let taken = StoreError::DocumentExists {
            kind: "plan".into(),
            name: "ship".into(),
            version: 3,
        };
        assert_eq!(
            ledger_error(taken),
            LedgerError::AlreadyExists("store: plan \"ship\" already exists (version 3)".into())
        );
        let moved = StoreError::DocumentChanged {
            kind: "todo".into(),
            name: "run:1".into(),
        };
        assert_eq!(
            ledger_error(moved),
            LedgerError::Conflict(
                "store: todo \"run:1\" changed since it was read; read it again and retry".into()
            )
        );
        assert_eq!(
            ledger_error(StoreError::WriterGone),
            LedgerError::Unavailable(StoreError::WriterGone.to_string())
        );
    }
}
