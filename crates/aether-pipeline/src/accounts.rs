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
/// Sign-in attempts per client and account, and per client over all accounts, within
/// [`FAILURE_WINDOW`] before that client's sign-in is refused for the rest of the window (a
/// success forgets the client's attempts at that account).
pub const FAILURES_PER_ACCOUNT: usize = 5;
pub const FAILURES_OVERALL: usize = 30;
pub const FAILURE_WINDOW: Duration = Duration::from_secs(300);

/// Password hashes computed at once: each takes 19 MiB and tens of milliseconds, so a flood
/// of sign-ins queues here instead of filling memory and the blocking pool.
const HASHING_AT_ONCE: usize = 2;

fn hashing() -> &'static tokio::sync::Semaphore {
    static PERMITS: std::sync::OnceLock<tokio::sync::Semaphore> = std::sync::OnceLock::new();
    PERMITS.get_or_init(|| tokio::sync::Semaphore::new(HASHING_AT_ONCE))
}

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
    if aether_policy::is_plain_name(name) {
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
    let _permit = hashing()
        .acquire()
        .await
        .map_err(|e| invalid(format!("hashing is closed: {e}")))?;
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
    let Ok(_permit) = hashing().acquire().await else {
        return false;
    };
    tokio::task::spawn_blocking(move || {
        // An account with no password (one an identity provider signs in) costs a wrong
        // password's time, so its name is not told apart by how fast it fails.
        let (parsed, real) = match PasswordHash::new(&hash) {
            Ok(parsed) => (parsed, true),
            Err(_) => match PasswordHash::new(DUMMY_HASH) {
                Ok(dummy) => (dummy, false),
                Err(_) => return false,
            },
        };
        Argon2::default()
            .verify_password(password.as_bytes(), &parsed)
            .is_ok()
            && real
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
    // A setup link is checked before the slow hash: a stranger without it costs nothing.
    let setup_hash = setup_token.map(|t| sha256(t.as_bytes()).to_string());
    if let Some(hash) = &setup_hash
        && !store.setup_link_valid(hash).await?
    {
        return Err(invalid(
            "this setup link is unknown, used or expired, or the console is already set up",
        ));
    }
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
        .create_account(account.clone(), setup_hash, Some(event))
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
        // (The store keeps the last admin, in the change's own transaction.)
        check_role(role)?;
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

/// Sign-in attempts, remembered for [`FAILURE_WINDOW`], by client (its address) and by client
/// and account name. An attempt counts from the moment it starts (so parallel guesses cannot
/// all slip through before the first one fails); a success forgets that client's attempts at
/// that account.
#[derive(Default)]
pub struct SignInLimiter {
    attempts: Mutex<HashMap<String, Vec<Instant>>>,
}

impl SignInLimiter {
    /// Records an attempt by `client` at `name`, or `Err(wait)` if it has tried too often.
    pub fn begin(&self, client: &str, name: &str) -> Result<(), Duration> {
        let mut attempts = self.attempts.lock().unwrap_or_else(|e| e.into_inner());
        let now = Instant::now();
        attempts.retain(|_, times| {
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
        let (by_client, by_account) = keys(client, name);
        for (key, limit) in [
            (&by_account, FAILURES_PER_ACCOUNT),
            (&by_client, FAILURES_OVERALL),
        ] {
            if let Some(times) = attempts.get(key)
                && times.len() >= limit
            {
                return Err(wait(times));
            }
        }
        attempts.entry(by_account).or_default().push(now);
        attempts.entry(by_client).or_default().push(now);
        Ok(())
    }

    /// Forgets `client`'s attempts at `name` (it signed in), and that this attempt counted
    /// toward the client's own: operators signing in through one proxy address do not use up
    /// its budget by succeeding.
    pub fn succeeded(&self, client: &str, name: &str) {
        let (by_client, by_account) = keys(client, name);
        let mut attempts = self.attempts.lock().unwrap_or_else(|e| e.into_inner());
        attempts.remove(&by_account);
        if let Some(times) = attempts.get_mut(&by_client) {
            times.pop();
        }
    }
}

/// The limiter's keys; names are cut so made-up ones cannot grow memory without end.
fn keys(client: &str, name: &str) -> (String, String) {
    let name: String = name.chars().take(64).collect();
    (client.to_string(), format!("{client}\u{0}{name}"))
}

/// A hash of no password, checked when the account does not exist, so a wrong name takes as
/// long as a wrong password.
const DUMMY_HASH: &str = "$argon2id$v=19$m=19456,t=2,p=1$c29tZXNhbHRzb21lc2FsdA$3ms6m9jYrw4gU2KlnUX3EbzOxqhlKgsNB2PPp4ALjn4";

/// Signs in: the cookie value to set, and its session.
/// The secrets of a new session: the cookie, and the key the page sends as a header.
#[derive(Clone, Debug)]
pub struct NewSession {
    pub cookie: String,
    pub key: String,
    pub session: ConsoleSession,
}

/// Signs in `name` from `client` (its address, for the rate limit).
pub async fn sign_in(
    store: &Store,
    limiter: &SignInLimiter,
    client: &str,
    name: &str,
    password: &str,
) -> Result<NewSession, AccountError> {
    check_credentials(store, limiter, client, name, password).await?;
    start_session(store, name).await
}

/// The account `name` if `password` is its own, with sign-in's rate limit and timing (an
/// unknown name costs what a wrong password does); starts no session. The built-in
/// authorization server's consent checks a person this way.
pub async fn check_credentials(
    store: &Store,
    limiter: &SignInLimiter,
    client: &str,
    name: &str,
    password: &str,
) -> Result<aether_store::Account, AccountError> {
    limiter
        .begin(client, name)
        .map_err(AccountError::RateLimited)?;
    let account = store.account(name).await?;
    let hash = account
        .as_ref()
        .map(|a| a.password_hash.clone())
        .unwrap_or_else(|| DUMMY_HASH.to_string());
    let ok = verify_password(hash, password).await;
    match account {
        Some(account) if ok => {
            limiter.succeeded(client, name);
            Ok(account)
        }
        _ => Err(AccountError::WrongCredentials),
    }
}

/// The password hash an account signed in through an identity provider holds: no password
/// opens it (it is no argon2 hash), and it names the provider and the person there.
pub fn external_marker(issuer: &str, subject: &str) -> String {
    format!("oidc:{issuer}#{subject}")
}

/// A session for a person the identity provider `issuer` vouched for, as account `name` with
/// `role` (the role follows the provider at every sign-in). The account is made on first
/// sign-in; a local account of that name is never taken over.
pub async fn sign_in_external(
    store: &Store,
    issuer: &str,
    subject: &str,
    name: &str,
    role: &str,
) -> Result<NewSession, AccountError> {
    check_name(name)?;
    check_role(role)?;
    let marker = external_marker(issuer, subject);
    let by = format!("{issuer} (sign-in)");
    match store.account(name).await? {
        None => {
            let now = aether_store::now_us();
            let event = operator_event(
                &by,
                "accounts.create",
                json!({ "account": name, "role": role, "identity_provider": issuer }),
            );
            let account = Account {
                name: name.to_string(),
                password_hash: marker,
                role: role.to_string(),
                created_us: now,
                created_by: by.clone(),
                changed_us: now,
            };
            store.create_account(account, None, Some(event)).await?;
        }
        Some(account) if account.password_hash == marker => {
            if account.role != role {
                let event = operator_event(
                    &by,
                    "accounts.update",
                    json!({ "account": name, "role": role, "identity_provider": issuer }),
                );
                store
                    .update_account(name, Some(role.to_string()), None, Some(event))
                    .await?;
            }
        }
        Some(_) => {
            return Err(invalid(format!(
                "the account {name:?} is a local account (or another provider's); it cannot be signed in to through {issuer} by this person"
            )));
        }
    }
    start_session(store, name).await
}

/// A new session for `name` (after a sign-in, or the setup that made the account).
pub async fn start_session(store: &Store, name: &str) -> Result<NewSession, AccountError> {
    let cookie = random_token()?;
    let key = random_token()?;
    let now = aether_store::now_us();
    let session = ConsoleSession {
        account: name.to_string(),
        key_hash: cookie_hash(&key),
        created_us: now,
        expires_us: now + SESSION_LIFETIME.as_micros() as i64,
    };
    store
        .create_console_session(&cookie_hash(&cookie), session.clone())
        .await?;
    Ok(NewSession {
        cookie,
        key,
        session,
    })
}

pub fn cookie_hash(cookie: &str) -> String {
    sha256(cookie.as_bytes()).to_string()
}

/// The account a session (its cookie and key) is signed in as, with its current role, if
/// the session is live: unexpired, its key right, and younger than the account's last change
/// (a sign-in that raced a password change, a removal or a new account of the same name does
/// not survive it).
pub async fn session_account(
    store: &Store,
    cookie: &str,
    key: &str,
) -> Result<Option<(Account, ConsoleSession)>, StoreError> {
    let Some(session) = store.console_session(&cookie_hash(cookie)).await? else {
        return Ok(None);
    };
    if session.expires_us <= aether_store::now_us() || session.key_hash != cookie_hash(key) {
        return Ok(None);
    }
    Ok(store
        .account(&session.account)
        .await?
        .filter(|account| session.created_us >= account.changed_us)
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
    fn the_limiter_stops_a_guesser_not_everyone_and_forgets_on_success() {
        let l = SignInLimiter::default();
        for _ in 0..FAILURES_PER_ACCOUNT {
            assert!(l.begin("10.0.0.9", "admin").is_ok());
        }
        assert!(l.begin("10.0.0.9", "admin").is_err(), "the guesser");
        assert!(l.begin("127.0.0.1", "admin").is_ok(), "the admin elsewhere");
        assert!(l.begin("10.0.0.9", "other").is_ok(), "another account");
        l.succeeded("10.0.0.9", "admin");
        assert!(l.begin("10.0.0.9", "admin").is_ok());
        let l = SignInLimiter::default();
        for i in 0..FAILURES_OVERALL {
            assert!(l.begin("10.0.0.9", &format!("made-up-{i}")).is_ok());
        }
        assert!(
            l.begin("10.0.0.9", "anyone").is_err(),
            "many names from one client"
        );
        assert!(l.begin("10.0.0.8", "anyone").is_ok());
        // Successes, however many, leave the client's budget for failures whole.
        let l = SignInLimiter::default();
        for _ in 0..FAILURES_OVERALL * 2 {
            assert!(l.begin("10.0.0.7", "admin").is_ok());
            l.succeeded("10.0.0.7", "admin");
        }
        for i in 0..FAILURES_OVERALL {
            assert!(l.begin("10.0.0.7", &format!("guess-{i}")).is_ok());
        }
        assert!(l.begin("10.0.0.7", "admin").is_err());
    }
}
