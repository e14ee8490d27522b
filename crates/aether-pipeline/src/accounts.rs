//! Console accounts: passwords hashed with argon2id, sign-in with a rate limit, sessions kept
//! as the SHA-256 of a random cookie, one-time setup links for the first admin. Every account
//! change is audited (agent `operator:BY`).

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use aether_policy::roles;
use aether_policy::sha256;
use aether_store::{Account, ConsoleSession, Store, StoreError};
use argon2::Argon2;
use argon2::password_hash::rand_core::OsRng;
use argon2::password_hash::{PasswordHash, PasswordHasher, PasswordVerifier, SaltString};
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde_json::json;

use crate::audit::operator_event;

/// How long a sign-in lasts.
pub const SESSION_LIFETIME: Duration = Duration::from_secs(12 * 3600);
/// How long a setup link works.
pub const SETUP_LINK_LIFETIME: Duration = Duration::from_secs(24 * 3600);
/// Failed sign-ins per account, and over all accounts, within [`FAILURE_WINDOW`] before
/// sign-in is refused for the rest of the window.
pub const FAILURES_PER_ACCOUNT: usize = 5;
pub const FAILURES_OVERALL: usize = 30;
pub const FAILURE_WINDOW: Duration = Duration::from_secs(300);

/// Why an account change or a sign-in was refused (the message says what to do).
#[derive(Debug, thiserror::Error)]
pub enum AccountError {
    #[error("{0}")]
    Invalid(String),
    #[error("the name or password is wrong")]
    WrongCredentials,
    #[error("too many failed sign-ins; try again in {} s", .0.as_secs() + 1)]
    RateLimited(Duration),
    #[error(transparent)]
    Store(#[from] StoreError),
}

fn invalid(message: impl Into<String>) -> AccountError {
    AccountError::Invalid(message.into())
}

/// An account name: 1-64 of letters, digits, `.`, `-`, `_`.
pub fn check_name(name: &str) -> Result<(), AccountError> {
    let ok = !name.is_empty()
        && name.len() <= 64
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_'));
    if ok {
        Ok(())
    } else {
        Err(invalid(
            "an account name is 1-64 of letters, digits, '.', '-' and '_'",
        ))
    }
}

/// A password: 10 to 1,024 characters.
pub fn check_password(password: &str) -> Result<(), AccountError> {
    let n = password.chars().count();
    if n < 10 {
        return Err(invalid("a password has at least 10 characters"));
    }
    if password.len() > 1024 {
        return Err(invalid("a password has at most 1,024 bytes"));
    }
    Ok(())
}

fn check_role(role: &str) -> Result<(), AccountError> {
    if roles::role(role).is_some() {
        return Ok(());
    }
    Err(invalid(format!(
        "no role {role:?}; roles: {}",
        roles::ROLES
            .iter()
            .map(|r| r.name)
            .collect::<Vec<_>>()
            .join(", ")
    )))
}

/// The argon2id hash (PHC string) of a password, off the async threads.
pub async fn hash_password(password: &str) -> Result<String, AccountError> {
    let password = password.to_string();
    tokio::task::spawn_blocking(move || {
        let salt = SaltString::generate(&mut OsRng);
        Argon2::default()
            .hash_password(password.as_bytes(), &salt)
            .map(|h| h.to_string())
            .map_err(|e| invalid(format!("cannot hash the password: {e}")))
    })
    .await
    .map_err(|e| invalid(format!("hashing failed: {e}")))?
}

async fn verify_password(hash: String, password: &str) -> bool {
    let password = password.to_string();
    tokio::task::spawn_blocking(move || {
        PasswordHash::new(&hash)
            .map(|parsed| {
                Argon2::default()
                    .verify_password(password.as_bytes(), &parsed)
                    .is_ok()
            })
            .unwrap_or(false)
    })
    .await
    .unwrap_or(false)
}

/// Creates an account. With `setup_token` (from a setup link) it is the first admin, and only
/// while no account exists.
pub async fn create(
    store: &Store,
    name: &str,
    password: &str,
    role: &str,
    by: &str,
    setup_token: Option<&str>,
) -> Result<Account, AccountError> {
    check_name(name)?;
    check_password(password)?;
    check_role(role)?;
    let now = aether_store::now_us();
    let account = Account {
        name: name.to_string(),
        password_hash: hash_password(password).await?,
        role: role.to_string(),
        created_us: now,
        created_by: by.to_string(),
        changed_us: now,
    };
    let event = operator_event(
        by,
        "accounts.create",
        json!({ "account": name, "role": role }),
    );
    store
        .create_account(
            account.clone(),
            setup_token.map(|t| sha256(t.as_bytes()).to_string()),
            Some(event),
        )
        .await?;
    Ok(account)
}

/// Changes an account's role or password (its sessions end).
pub async fn update(
    store: &Store,
    name: &str,
    role: Option<&str>,
    password: Option<&str>,
    by: &str,
) -> Result<(), AccountError> {
    if let Some(role) = role {
        check_role(role)?;
        if role != "admin"
            && let Some(current) = store.account(name).await?
            && current.role == "admin"
            && store
                .accounts()
                .await?
                .iter()
                .filter(|a| a.role == "admin")
                .count()
                <= 1
        {
            return Err(invalid("this is the last admin: make another admin first"));
        }
    }
    let hash = match password {
        Some(p) => {
            check_password(p)?;
            Some(hash_password(p).await?)
        }
        None => None,
    };
    let event = operator_event(
        by,
        "accounts.update",
        json!({ "account": name, "role": role, "password_changed": password.is_some() }),
    );
    store
        .update_account(name, role.map(String::from), hash, Some(event))
        .await?;
    Ok(())
}

pub async fn remove(store: &Store, name: &str, by: &str) -> Result<(), AccountError> {
    let event = operator_event(by, "accounts.remove", json!({ "account": name }));
    store.remove_account(name, Some(event)).await?;
    Ok(())
}

/// A one-time link's secret for making the first admin; the store keeps its hash.
pub async fn mint_setup_link(store: &Store) -> Result<String, AccountError> {
    let token = random_token()?;
    let expires = aether_store::now_us() + SETUP_LINK_LIFETIME.as_micros() as i64;
    store
        .create_setup_link(&sha256(token.as_bytes()).to_string(), expires)
        .await?;
    Ok(token)
}

fn random_token() -> Result<String, AccountError> {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes).map_err(|e| invalid(format!("no randomness: {e}")))?;
    Ok(URL_SAFE_NO_PAD.encode(bytes))
}

/// Failed sign-ins, remembered for [`FAILURE_WINDOW`].
#[derive(Default)]
pub struct SignInLimiter {
    failures: Mutex<HashMap<String, Vec<Instant>>>,
}

impl SignInLimiter {
    /// `Err(wait)` while `name` (or everyone) has failed too often.
    fn check(&self, name: &str) -> Result<(), Duration> {
        let mut failures = self.failures.lock().unwrap_or_else(|e| e.into_inner());
        let now = Instant::now();
        failures.retain(|_, times| {
            times.retain(|t| now.duration_since(*t) < FAILURE_WINDOW);
            !times.is_empty()
        });
        let wait = |times: &Vec<Instant>| {
            times
                .iter()
                .min()
                .map(|oldest| FAILURE_WINDOW.saturating_sub(now.duration_since(*oldest)))
                .unwrap_or_default()
        };
        if let Some(times) = failures.get(name)
            && times.len() >= FAILURES_PER_ACCOUNT
        {
            return Err(wait(times));
        }
        let all: Vec<Instant> = failures.values().flatten().copied().collect();
        if all.len() >= FAILURES_OVERALL {
            return Err(wait(&all));
        }
        Ok(())
    }

    fn failed(&self, name: &str) {
        let mut failures = self.failures.lock().unwrap_or_else(|e| e.into_inner());
        // Names are bounded so a flood of made-up names cannot grow memory without end.
        let key = name.chars().take(64).collect::<String>();
        failures.entry(key).or_default().push(Instant::now());
    }

    fn succeeded(&self, name: &str) {
        self.failures
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(name);
    }
}

/// A hash of no password, checked when the account does not exist, so a wrong name takes as
/// long as a wrong password.
const DUMMY_HASH: &str = "$argon2id$v=19$m=19456,t=2,p=1$c29tZXNhbHRzb21lc2FsdA$3ms6m9jYrw4gU2KlnUX3EbzOxqhlKgsNB2PPp4ALjn4";

/// Signs in: the cookie value to set, and its session.
pub async fn sign_in(
    store: &Store,
    limiter: &SignInLimiter,
    name: &str,
    password: &str,
) -> Result<(String, ConsoleSession), AccountError> {
    limiter.check(name).map_err(AccountError::RateLimited)?;
    let account = store.account(name).await?;
    let hash = account
        .as_ref()
        .map(|a| a.password_hash.clone())
        .unwrap_or_else(|| DUMMY_HASH.to_string());
    let ok = verify_password(hash, password).await && account.is_some();
    if !ok {
        limiter.failed(name);
        return Err(AccountError::WrongCredentials);
    }
    limiter.succeeded(name);
    let cookie = random_token()?;
    let now = aether_store::now_us();
    let session = ConsoleSession {
        account: name.to_string(),
        created_us: now,
        expires_us: now + SESSION_LIFETIME.as_micros() as i64,
    };
    store
        .create_console_session(&cookie_hash(&cookie), session.clone())
        .await?;
    Ok((cookie, session))
}

pub fn cookie_hash(cookie: &str) -> String {
    sha256(cookie.as_bytes()).to_string()
}

/// The account a session cookie is signed in as (its current role), if the session is live.
pub async fn session_account(
    store: &Store,
    cookie: &str,
) -> Result<Option<(Account, ConsoleSession)>, StoreError> {
    let Some(session) = store.console_session(&cookie_hash(cookie)).await? else {
        return Ok(None);
    };
    if session.expires_us <= aether_store::now_us() {
        return Ok(None);
    }
    Ok(store
        .account(&session.account)
        .await?
        .map(|account| (account, session)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_dummy_hash_parses() {
        assert!(PasswordHash::new(DUMMY_HASH).is_ok());
    }

    #[test]
    fn the_limiter_stops_a_guesser_and_forgets_on_success() {
        let l = SignInLimiter::default();
        for _ in 0..FAILURES_PER_ACCOUNT {
            assert!(l.check("admin").is_ok());
            l.failed("admin");
        }
        assert!(l.check("admin").is_err());
        assert!(l.check("other").is_ok(), "one account's guesser");
        l.succeeded("admin");
        assert!(l.check("admin").is_ok());
        for i in 0..FAILURES_OVERALL {
            l.failed(&format!("made-up-{i}"));
        }
        assert!(l.check("anyone").is_err(), "many names at once");
    }
}
