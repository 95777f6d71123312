//! The integrity chain: every event's hash is an HMAC-SHA256, under the session directory's
//! key, of the previous event's hash followed by the event's canonical bytes. The chain starts
//! from a value bound to the session id, so an event cannot be edited, removed from the middle,
//! moved to another session or forged without the key.

use std::io::{Read, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use crate::AgentError;

/// Length of a hash in the chain (SHA-256).
pub const HASH_LEN: usize = 32;

/// A hash in the chain.
pub type Hash = [u8; HASH_LEN];

const BLOCK: usize = 64;

/// The secret that seals a session directory's logs. It lives in the directory as `log.key`
/// (mode 0600, created on first use) and never inside a sandbox's view of writable roots.
#[derive(Clone)]
pub struct LogKey {
    /// The HMAC's hash states with the key's inner and outer pad already absorbed: every
    /// event's link is one MAC, and this saves two of its compressions.
    keyed: Keyed,
    path: PathBuf,
}

impl std::fmt::Debug for LogKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LogKey")
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

impl LogKey {
    /// File name of the key inside a session directory.
    pub const FILE_NAME: &'static str = "log.key";

    /// Reads the key of `dir`, creating it (from the kernel's random source) when there is none.
    pub fn load_or_create(dir: &Path) -> Result<Self, AgentError> {
        let path = dir.join(Self::FILE_NAME);
        match std::fs::File::open(&path) {
            Ok(file) => Self::read_from(file, path),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Self::create(path),
            Err(e) => Err(AgentError::ReadLogKey {
                path,
                reason: e.to_string(),
            }),
        }
    }

    /// Reads the key of `dir`; never creates one (verification of an existing log).
    pub fn load(dir: &Path) -> Result<Self, AgentError> {
        let path = dir.join(Self::FILE_NAME);
        let file = std::fs::File::open(&path).map_err(|e| AgentError::ReadLogKey {
            path: path.clone(),
            reason: e.to_string(),
        })?;
        Self::read_from(file, path)
    }

    fn read_from(file: std::fs::File, path: PathBuf) -> Result<Self, AgentError> {
        let mut bytes = Vec::with_capacity(HASH_LEN + 1);
        file.take(HASH_LEN as u64 + 1)
            .read_to_end(&mut bytes)
            .map_err(|e| AgentError::ReadLogKey {
                path: path.clone(),
                reason: e.to_string(),
            })?;
        let key: [u8; HASH_LEN] =
            bytes
                .try_into()
                .map_err(|b: Vec<u8>| AgentError::ReadLogKey {
                    path: path.clone(),
                    reason: format!("expected {HASH_LEN} bytes, found {}", b.len()),
                })?;
        Ok(Self::from_parts(key, path))
    }

    fn from_parts(key: [u8; HASH_LEN], path: PathBuf) -> Self {
        Self {
            keyed: Keyed::new(&key),
            path,
        }
    }

    fn create(path: PathBuf) -> Result<Self, AgentError> {
        let fail = |source| AgentError::CreateLogKey {
            path: path.clone(),
            source,
        };
        let mut key = [0u8; HASH_LEN];
        std::fs::File::open("/dev/urandom")
            .and_then(|mut f| f.read_exact(&mut key))
            .map_err(fail)?;
        // Written under a staging name and linked into place without replacing anything, so
        // two processes creating the key at once agree on one key and nobody reads half of one.
        let temp = super::store::staging_name(&path);
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&temp)
            .map_err(|source| AgentError::CreateLogKey {
                path: temp.clone(),
                source,
            })?;
        let written = file.write_all(&key).and_then(|()| file.sync_all());
        drop(file);
        if let Err(e) = written {
            let _ = std::fs::remove_file(&temp);
            return Err(fail(e));
        }
        match super::store::publish(&temp, &path) {
            Ok(()) => Ok(Self::from_parts(key, path)),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                Self::load(path.parent().unwrap_or(Path::new(".")))
            }
            Err(e) => Err(fail(e)),
        }
    }

    /// Where the key lives.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The chain's starting value for `session_id`.
    pub fn genesis(&self, session_id: &str) -> Hash {
        self.mac(&[b"bridle-log-v1\0", session_id.as_bytes()])
    }

    /// The hash of an event whose canonical bytes are `body`, following `prev`.
    pub fn link(&self, prev: &Hash, body: &[u8]) -> Hash {
        self.mac(&[prev, body])
    }

    /// HMAC-SHA256 (RFC 2104) of the concatenation of `parts`.
    pub(crate) fn mac(&self, parts: &[&[u8]]) -> Hash {
        self.keyed.mac(parts)
    }
}

/// HMAC-SHA256 (RFC 2104) under one key, its padded key blocks hashed once.
#[derive(Clone)]
struct Keyed {
    inner: Sha256,
    outer: Sha256,
}

impl Keyed {
    fn new(key: &[u8]) -> Self {
        let mut block = [0u8; BLOCK];
        if key.len() > BLOCK {
            block[..HASH_LEN].copy_from_slice(&Sha256::digest(key));
        } else {
            block[..key.len()].copy_from_slice(key);
        }
        let mut inner = Sha256::new();
        inner.update(block.map(|b| b ^ 0x36));
        let mut outer = Sha256::new();
        outer.update(block.map(|b| b ^ 0x5c));
        Self { inner, outer }
    }

    /// The MAC of the concatenation of `parts`.
    fn mac(&self, parts: &[&[u8]]) -> Hash {
        let mut inner = self.inner.clone();
        for part in parts {
            inner.update(part);
        }
        let mut outer = self.outer.clone();
        outer.update(inner.finalize());
        outer.finalize().into()
    }
}

/// HMAC-SHA256 (RFC 2104) of the concatenation of `parts` under `key`.
#[cfg(test)]
fn hmac_sha256(key: &[u8], parts: &[&[u8]]) -> Hash {
    Keyed::new(key).mac(parts)
}

/// Lower-case hex of the SHA-256 of `bytes` (the policy digest in a session header).
pub fn sha256_hex(bytes: &[u8]) -> String {
    to_hex(&Sha256::digest(bytes).into())
}

/// Lower-case hex of `hash`.
pub fn to_hex(hash: &Hash) -> String {
    // Every event's hash goes through here: no formatting machinery per byte.
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(HASH_LEN * 2);
    for b in hash {
        out.push(char::from(DIGITS[usize::from(b >> 4)]));
        out.push(char::from(DIGITS[usize::from(b & 0xf)]));
    }
    out
}

/// Parses lower-case hex written by [`to_hex`].
pub fn from_hex(text: &str) -> Option<Hash> {
    // Every event's stored hash goes through here: a table and no branch per digit (the
    // digits are random, so a branch on digit or letter is mispredicted half the time).
    const INVALID: u8 = 0x10;
    const VALUES: [u8; 256] = {
        let mut table = [INVALID; 256];
        let mut d = 0u8;
        while d < 16 {
            let digit = if d < 10 { b'0' + d } else { b'a' + d - 10 };
            table[digit as usize] = d;
            d += 1;
        }
        table
    };
    let bytes = text.as_bytes();
    if bytes.len() != HASH_LEN * 2 {
        return None;
    }
    let mut out = [0u8; HASH_LEN];
    let mut bad = 0u8;
    for (byte, pair) in out.iter_mut().zip(bytes.chunks_exact(2)) {
        let (high, low) = (VALUES[usize::from(pair[0])], VALUES[usize::from(pair[1])]);
        bad |= high | low;
        *byte = high << 4 | (low & 0x0f);
    }
    (bad & INVALID == 0).then_some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    // RFC 4231 test cases 1, 2 and 6 (a key longer than a block).
    #[test]
    fn hmac_matches_rfc_4231() {
        let case1 = hmac_sha256(&[0x0b; 20], &[b"Hi There"]);
        assert_eq!(
            to_hex(&case1),
            "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7"
        );
        let case2 = hmac_sha256(b"Jefe", &[b"what do ya want ", b"for nothing?"]);
        assert_eq!(
            to_hex(&case2),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
        let case6 = hmac_sha256(
            &[0xaa; 131],
            &[b"Test Using Larger Than Block-Size Key - Hash Key First"],
        );
        assert_eq!(
            to_hex(&case6),
            "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54"
        );
    }

    #[test]
    fn hex_round_trips_and_rejects_anything_else() {
        let hash: Hash = std::array::from_fn(|i| u8::try_from(i * 7 % 256).unwrap_or(0));
        assert_eq!(from_hex(&to_hex(&hash)), Some(hash));
        assert_eq!(from_hex("00"), None);
        assert_eq!(from_hex(&"G".repeat(64)), None);
        assert_eq!(
            from_hex(&"AB".repeat(32)),
            None,
            "upper case is not what we write"
        );
    }

    #[test]
    fn a_key_is_created_once_with_mode_0600_and_read_back() {
        let dir = tempfile::tempdir().unwrap();
        let first = LogKey::load_or_create(dir.path()).unwrap();
        let second = LogKey::load_or_create(dir.path()).unwrap();
        assert_eq!(first.genesis("a"), second.genesis("a"), "the same key");
        let mode = std::os::unix::fs::PermissionsExt::mode(
            &std::fs::metadata(first.path()).unwrap().permissions(),
        );
        assert_eq!(mode & 0o777, 0o600);
        assert_ne!(first.genesis("a"), first.genesis("b"));
    }

    #[test]
    fn a_key_of_the_wrong_length_is_an_error_naming_the_file() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(LogKey::FILE_NAME), b"short").unwrap();
        let err = LogKey::load_or_create(dir.path()).unwrap_err().to_string();
        assert!(err.contains("log.key") && err.contains("found 5"), "{err}");
    }
}
