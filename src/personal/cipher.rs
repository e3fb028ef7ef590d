//! A subject's data key, and one value sealed and opened with it: AES-256-GCM
//! from aws-lc-rs, a random 96-bit nonce per value, the event's identity as
//! associated data. Nothing here is written by hand but the layout.

use std::fmt;
use std::sync::Arc;

use aws_lc_rs::aead::{AES_256_GCM, Aad, LessSafeKey, NONCE_LEN, Nonce, UnboundKey};
use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;

use super::{SEALED_PREFIX, SEALED_PREFIX_V1};

/// The length of a data key: 256 bits.
pub const KEY_LEN: usize = 32;

/// A subject's data key, in clear, as a process holds it (never logged,
/// never stored: the store holds it wrapped under the KMS key).
#[derive(Clone)]
pub struct DataKey(Arc<LessSafeKey>);

impl fmt::Debug for DataKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("DataKey(..)")
    }
}

/// Why a value could not be sealed or opened.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CipherError {
    /// Not 32 bytes.
    #[error("a data key is 32 bytes, got {0}")]
    KeyLength(usize),
    /// Not a sealed value, or not sealed with this key for this event and
    /// field (altered, or moved).
    #[error("cannot be opened with its subject's key")]
    Unopenable,
    /// The system's random source failed.
    #[error("no random bytes for a nonce")]
    Random,
}

impl DataKey {
    /// The key of these 32 bytes.
    pub fn new(bytes: &[u8]) -> Result<Self, CipherError> {
        let unbound = UnboundKey::new(&AES_256_GCM, bytes)
            .map_err(|_| CipherError::KeyLength(bytes.len()))?;
        Ok(DataKey(Arc::new(LessSafeKey::new(unbound))))
    }

    /// 32 random bytes: a new key's material.
    pub fn random_bytes() -> Result<[u8; KEY_LEN], CipherError> {
        let mut bytes = [0_u8; KEY_LEN];
        aws_lc_rs::rand::fill(&mut bytes).map_err(|_| CipherError::Random)?;
        Ok(bytes)
    }

    /// `plain` sealed with `aad`: [`SEALED_PREFIX`] and the base64 of the
    /// nonce, the ciphertext and the tag.
    pub fn seal(&self, plain: &[u8], aad: &[u8]) -> Result<String, CipherError> {
        let mut nonce = [0_u8; NONCE_LEN];
        aws_lc_rs::rand::fill(&mut nonce).map_err(|_| CipherError::Random)?;
        let mut sealed = Vec::with_capacity(NONCE_LEN + plain.len() + AES_256_GCM.tag_len());
        sealed.extend_from_slice(&nonce);
        sealed.extend_from_slice(plain);
        let mut in_out = sealed.split_off(NONCE_LEN);
        self.0
            .seal_in_place_append_tag(
                Nonce::assume_unique_for_key(nonce),
                Aad::from(aad),
                &mut in_out,
            )
            .map_err(|_| CipherError::Unopenable)?;
        sealed.extend_from_slice(&in_out);
        let mut text = String::with_capacity(SEALED_PREFIX.len() + sealed.len() * 4 / 3 + 4);
        text.push_str(SEALED_PREFIX);
        URL_SAFE_NO_PAD.encode_string(&sealed, &mut text);
        Ok(text)
    }

    /// A value [`DataKey::seal`] sealed with the same `aad`, opened (in
    /// either format: the prefix says only how `aad` was made).
    pub fn open(&self, sealed: &str, aad: &[u8]) -> Result<Vec<u8>, CipherError> {
        let encoded = sealed
            .strip_prefix(SEALED_PREFIX)
            .or_else(|| sealed.strip_prefix(SEALED_PREFIX_V1))
            .ok_or(CipherError::Unopenable)?;
        let bytes = URL_SAFE_NO_PAD
            .decode(encoded)
            .map_err(|_| CipherError::Unopenable)?;
        if bytes.len() < NONCE_LEN + AES_256_GCM.tag_len() {
            return Err(CipherError::Unopenable);
        }
        let (nonce, rest) = bytes.split_at(NONCE_LEN);
        let nonce = Nonce::try_assume_unique_for_key(nonce).map_err(|_| CipherError::Unopenable)?;
        let mut in_out = rest.to_vec();
        let plain = self
            .0
            .open_in_place(nonce, Aad::from(aad), &mut in_out)
            .map_err(|_| CipherError::Unopenable)?;
        Ok(plain.to_vec())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key() -> DataKey {
        DataKey::new(&DataKey::random_bytes().expect("random")).expect("key")
    }

    #[test]
    fn a_value_opens_with_its_key_and_its_associated_data_only() {
        let key = key();
        let sealed = key
            .seal(b"\"Ada Lovelace\"", b"e-1\0customerName")
            .expect("sealed");
        assert!(sealed.starts_with(SEALED_PREFIX));
        assert!(!sealed.contains("Ada"));
        assert_eq!(
            key.open(&sealed, b"e-1\0customerName").expect("opened"),
            b"\"Ada Lovelace\""
        );
        // Moved to another event or field, or opened with another key: refused.
        assert_eq!(
            key.open(&sealed, b"e-2\0customerName"),
            Err(CipherError::Unopenable)
        );
        assert_eq!(
            key.open(&sealed, b"e-1\0email"),
            Err(CipherError::Unopenable)
        );
        assert_eq!(
            self::key().open(&sealed, b"e-1\0customerName"),
            Err(CipherError::Unopenable)
        );
        // Altered: refused.
        let mut altered = sealed.clone().into_bytes();
        let last = altered.len() - 1;
        altered[last] = if altered[last] == b'A' { b'B' } else { b'A' };
        let altered = String::from_utf8(altered).expect("text");
        assert_eq!(
            key.open(&altered, b"e-1\0customerName"),
            Err(CipherError::Unopenable)
        );
        for bad in ["", "sg:pd1:", "sg:pd2:", "sg:pd1:!!", "plain"] {
            assert_eq!(key.open(bad, b""), Err(CipherError::Unopenable), "{bad}");
        }
    }

    #[test]
    fn a_value_of_an_earlier_release_still_opens() {
        let key = key();
        let sealed = key.seal(b"\"Ada\"", b"e-1\0name").expect("sealed");
        let earlier = sealed.replacen(SEALED_PREFIX, SEALED_PREFIX_V1, 1);
        assert_eq!(
            key.open(&earlier, b"e-1\0name").expect("opened"),
            b"\"Ada\""
        );
    }

    #[test]
    fn two_seals_of_one_value_differ() {
        let key = key();
        let (a, b) = (key.seal(b"x", b"a"), key.seal(b"x", b"a"));
        assert_ne!(a, b);
    }

    #[test]
    fn a_key_is_32_bytes() {
        assert_eq!(
            DataKey::new(&[0; 16]).map(|_| ()),
            Err(CipherError::KeyLength(16))
        );
    }
}
