//! The vault: upstream credentials encrypted at rest.
//!
//! A credential is sealed with XChaCha20-Poly1305 under a 256-bit key that lives in a file of
//! its own, outside the store (created on first use, owner-only), with the credential's name as
//! associated data: the store holds only nonces and ciphertexts, a copy of the store alone
//! opens nothing, and a ciphertext moved to another name does not open. Plaintexts are handed
//! out only to the code that sends them upstream, never displayed, never logged.
//!
//! The same key, through HMAC-SHA256 under a purpose label of its own, signs the audit's
//! retention checkpoints.

use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use chacha20poly1305::aead::{Aead, AeadCore, KeyInit, OsRng, Payload};
use chacha20poly1305::{Key, XChaCha20Poly1305, XNonce};
use hmac::{Hmac, KeyInit as MacKey, Mac};
use sha2::Sha256;

use crate::{Result, SealedSecret, StoreError, now_us};

/// A vault's key, loaded from its file.
pub struct Vault {
    cipher: XChaCha20Poly1305,
    /// HMAC-SHA256 keyed for signing checkpoints (derived: never the encryption key itself).
    signer: Hmac<Sha256>,
    /// The key as read, kept only to derive purpose keys from.
    root: Hmac<Sha256>,
    path: PathBuf,
}

impl std::fmt::Debug for Vault {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Vault({})", self.path.display())
    }
}

/// A credential's name: 1-64 of letters, digits, `-`, `_` and `.`.
pub fn valid_secret_name(name: &str) -> bool {
    aether_vocab::is_plain_name(name)
}

impl Vault {
    /// Loads the key at `path`, creating it (and its folder, owner-only) if `create` and it
    /// does not exist. A key file others may read, or that is not 32 bytes, is refused.
    pub fn open(path: &Path, create: bool) -> Result<Vault> {
        let invalid =
            |what: String| StoreError::Invalid(format!("vault key {}: {what}", path.display()));
        let bytes = match std::fs::read(path) {
            Ok(bytes) => {
                let meta = std::fs::metadata(path).map_err(|e| invalid(e.to_string()))?;
                if meta.permissions().mode() & 0o077 != 0 {
                    return Err(invalid(format!(
                        "others may read it (mode {:o}); run chmod 600 on it",
                        meta.permissions().mode() & 0o777
                    )));
                }
                let me = rustix::process::geteuid().as_raw();
                if meta.uid() != me {
                    return Err(invalid(format!(
                        "it belongs to user {} and Aether runs as {me}",
                        meta.uid()
                    )));
                }
                bytes
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && create => {
                let key = XChaCha20Poly1305::generate_key(&mut OsRng);
                if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
                    std::fs::DirBuilder::new()
                        .recursive(true)
                        .mode(0o700)
                        .create(parent)
                        .map_err(|e| invalid(format!("cannot create its folder: {e}")))?;
                }
                let mut file = match std::fs::OpenOptions::new()
                    .write(true)
                    .create_new(true)
                    .mode(0o600)
                    .open(path)
                {
                    Ok(file) => file,
                    // Another process made it first: its key is the key.
                    Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                        std::thread::sleep(std::time::Duration::from_millis(50));
                        return Vault::open(path, false);
                    }
                    Err(e) => return Err(invalid(format!("cannot create it: {e}"))),
                };
                file.write_all(key.as_slice())
                    .and_then(|()| file.sync_all())
                    .map_err(|e| invalid(format!("cannot write it: {e}")))?;
                key.to_vec()
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(invalid(
                    "it does not exist (it is created when the first credential is set: aether credentials set NAME)".into(),
                ));
            }
            Err(e) => return Err(invalid(e.to_string())),
        };
        if bytes.len() != 32 {
            return Err(invalid(format!("it holds {} bytes, not 32", bytes.len())));
        }
        let derived = <Hmac<Sha256> as MacKey>::new_from_slice(&bytes)
            .expect("HMAC takes any key length")
            .chain_update(b"aether-audit-checkpoint-signing-v1")
            .finalize()
            .into_bytes();
        Ok(Vault {
            cipher: XChaCha20Poly1305::new(Key::from_slice(&bytes)),
            signer: <Hmac<Sha256> as MacKey>::new_from_slice(&derived)
                .expect("HMAC takes any key length"),
            root: <Hmac<Sha256> as MacKey>::new_from_slice(&bytes)
                .expect("HMAC takes any key length"),
            path: path.to_path_buf(),
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The key that authenticates the audit's rows, its markers and its witness's checkpoints
    /// (derived under a label of its own).
    pub fn audit_key(&self) -> AuditKey {
        AuditKey::derive(&self.root)
    }

    /// An HMAC-SHA256 signature (hex) of `text`.
    pub fn sign(&self, text: &str) -> String {
        mac_hex(&self.signer, text)
    }

    /// Whether `signature` is this key's signature of `text` (compared in constant time).
    pub fn verify(&self, text: &str, signature: &str) -> bool {
        mac_verify(&self.signer, text, signature)
    }

    /// Encrypts `plaintext` as credential `name`.
    pub fn seal(&self, name: &str, plaintext: &str) -> Result<SealedSecret> {
        if !valid_secret_name(name) {
            return Err(StoreError::Invalid(format!(
                "{name:?} is not a credential name (1-64 of letters, digits, -, _ and .)"
            )));
        }
        let nonce = XChaCha20Poly1305::generate_nonce(&mut OsRng);
        let ciphertext = self
            .cipher
            .encrypt(
                &nonce,
                Payload {
                    msg: plaintext.as_bytes(),
                    aad: name.as_bytes(),
                },
            )
            .map_err(|_| StoreError::Invalid("encryption failed".into()))?;
        Ok(SealedSecret {
            name: name.to_string(),
            nonce: nonce.to_vec(),
            ciphertext,
            updated_us: now_us(),
        })
    }

    /// Decrypts a sealed credential; fails if it was sealed under another key or name, or was
    /// changed.
    pub fn open_secret(&self, sealed: &SealedSecret) -> Result<String> {
        let fail = || {
            StoreError::Invalid(format!(
                "credential {:?} does not open with the vault key {} (another key, or it was tampered with)",
                sealed.name,
                self.path.display()
            ))
        };
        if sealed.nonce.len() != 24 {
            return Err(fail());
        }
        let plaintext = self
            .cipher
            .decrypt(
                XNonce::from_slice(&sealed.nonce),
                Payload {
                    msg: &sealed.ciphertext,
                    aad: sealed.name.as_bytes(),
                },
            )
            .map_err(|_| fail())?;
        String::from_utf8(plaintext).map_err(|_| fail())
    }
}

/// HMAC-SHA256 under a key derived from the vault key: what makes the audit's rows, its
/// keying marker and its witness's checkpoints impossible to forge with the store alone.
/// Each text it signs begins with a label naming what it is, so no signature of one kind
/// passes for another.
#[derive(Clone)]
pub struct AuditKey {
    mac: Hmac<Sha256>,
    id: String,
}

impl std::fmt::Debug for AuditKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "AuditKey({})", self.id)
    }
}

impl AuditKey {
    fn derive(root: &Hmac<Sha256>) -> AuditKey {
        let derived = root
            .clone()
            .chain_update(b"aether-audit-chain-v2")
            .finalize()
            .into_bytes();
        let mac =
            <Hmac<Sha256> as MacKey>::new_from_slice(&derived).expect("HMAC takes any key length");
        let id = mac_hex(&mac, "aether-audit-key-id")[..16].to_string();
        AuditKey { mac, id }
    }

    /// A key from raw bytes (tests, and tools that hold the key some other way).
    pub fn from_bytes(bytes: &[u8]) -> AuditKey {
        AuditKey::derive(
            &<Hmac<Sha256> as MacKey>::new_from_slice(bytes).expect("HMAC takes any key length"),
        )
    }

    /// Names the key without revealing it: a store keyed under one key tells another apart.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The signature (hex) of `text`.
    pub fn sign(&self, text: &str) -> String {
        mac_hex(&self.mac, text)
    }

    /// Whether `signature` is this key's of `text`, compared in constant time.
    pub fn verify(&self, text: &str, signature: &str) -> bool {
        mac_verify(&self.mac, text, signature)
    }

    /// A key for `purpose` (another use than the audit's), derived from this one: every
    /// replica holding the vault key derives the same, and no audit signature is one.
    pub fn purpose_key(&self, purpose: &str) -> Vec<u8> {
        self.mac
            .clone()
            .chain_update(b"aether-purpose-key\n")
            .chain_update(purpose.as_bytes())
            .finalize()
            .into_bytes()
            .to_vec()
    }
}

/// HMAC-SHA256 of `text` under `mac`'s key, as hex.
fn mac_hex(mac: &Hmac<Sha256>, text: &str) -> String {
    hex::encode(
        mac.clone()
            .chain_update(text.as_bytes())
            .finalize()
            .into_bytes(),
    )
}

/// Whether `signature` (hex) is `mac`'s of `text`, compared in constant time.
fn mac_verify(mac: &Hmac<Sha256>, text: &str, signature: &str) -> bool {
    let Ok(bytes) = hex::decode(signature) else {
        return false;
    };
    mac.clone()
        .chain_update(text.as_bytes())
        .verify_slice(&bytes)
        .is_ok()
}
