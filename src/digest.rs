//! A short, stable digest for ids that do not fit where they must go: SQS
//! group and deduplication ids, and DynamoDB keys past their limits.

use sha2::{Digest, Sha256};

/// The first 128 bits of the SHA-256 of `text`, as 32 lower-case hex
/// digits: the same in every build and every process, and collision-free in
/// practice whatever the ids are (no one can craft two ids with one digest).
pub(crate) fn digest(text: &str) -> String {
    let hash = Sha256::digest(text.as_bytes());
    hash[..16]
        .iter()
        .map(|byte| format!("{byte:02x}"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_digest_is_sha256_cut_to_128_bits() {
        assert_eq!(digest("abc"), "ba7816bf8f01cfea414140de5dae2223");
        assert_ne!(digest("a"), digest("b"));
    }
}
