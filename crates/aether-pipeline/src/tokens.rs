//! Bearer tokens: minted here, stored as their SHA-256, looked up by that hash.
//!
//! A token is `aether_` + 43 characters of base64url (256 random bits from the OS). Nothing in
//! it can be guessed, so a fast hash is a sound way to store it: the store never holds a token
//! a thief could replay. Agent tokens identify an MCP caller; operator tokens open the admin
//! API. Neither works for the other.

use std::collections::HashMap;

use aether_policy::sha256;
use aether_store::{Store, TokenKind, TokenRow};
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;

/// Who a token speaks for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Principal {
    pub kind: TokenKind,
    pub subject: String,
    /// The token's public id (for the audit; never the secret).
    pub token_id: String,
}

/// Active tokens by the hash of their secret.
#[derive(Debug, Default)]
pub struct TokenIndex {
    by_hash: HashMap<String, Principal>,
    agents: usize,
}

impl TokenIndex {
    pub async fn load(store: &Store) -> Result<TokenIndex, aether_store::StoreError> {
        let mut index = TokenIndex::default();
        for (row, hash) in store.tokens().await? {
            // Revoked tokens count: revoking the last one must not open the door again.
            if row.kind == TokenKind::Agent {
                index.agents += 1;
            }
            if row.revoked_at_us.is_some() {
                continue;
            }
            index.by_hash.insert(
                hash,
                Principal {
                    kind: row.kind,
                    subject: row.subject,
                    token_id: row.id,
                },
            );
        }
        Ok(index)
    }

    pub fn lookup(&self, token: &str) -> Option<&Principal> {
        self.by_hash.get(&hash(token))
    }

    /// How many agent tokens were ever made (revoked ones included).
    pub fn agent_tokens(&self) -> usize {
        self.agents
    }
}

/// The stored form of a token.
pub fn hash(token: &str) -> String {
    sha256(token.as_bytes()).to_hex()
}

/// Mints a token for `subject` and records its hash; returns the row and the token, which is
/// shown once and never stored.
pub async fn mint(
    store: &Store,
    kind: TokenKind,
    subject: &str,
    label: &str,
    by: &str,
) -> Result<(TokenRow, String), aether_store::StoreError> {
    let mut secret = [0u8; 32];
    getrandom::fill(&mut secret).map_err(|e| {
        aether_store::StoreError::Invalid(format!("no randomness from the OS: {e}"))
    })?;
    let token = format!("aether_{}", URL_SAFE_NO_PAD.encode(secret));
    let mut id_bytes = [0u8; 6];
    getrandom::fill(&mut id_bytes).map_err(|e| {
        aether_store::StoreError::Invalid(format!("no randomness from the OS: {e}"))
    })?;
    let row = TokenRow {
        id: hex::encode(id_bytes),
        kind,
        subject: subject.to_string(),
        label: label.to_string(),
        created_at_us: aether_store::now_us(),
        created_by: by.to_string(),
        revoked_at_us: None,
        revoked_by: None,
    };
    let event = crate::audit::operator_event(
        by,
        "tokens.create",
        serde_json::json!({ "id": row.id, "kind": kind.as_str(), "subject": subject, "label": label }),
    );
    let row = store.create_token(row, hash(&token), Some(event)).await?;
    Ok((row, token))
}

/// Revokes a token by its id, as the operator `by`. Audited in the same commit.
pub async fn revoke(
    store: &Store,
    id: &str,
    by: &str,
) -> Result<TokenRow, aether_store::StoreError> {
    let event = crate::audit::operator_event(by, "tokens.revoke", serde_json::json!({ "id": id }));
    store.revoke_token(id, by, Some(event)).await
}
