//! The one digest the crate computes: sha256 as lower-case hex (audit lines, policy
//! and code hashes, package set keys, image definitions). Imports nothing of the
//! crate, so every layer may use it.

use sha2::Digest;

/// `bytes`' sha256, as 64 lower-case hex digits.
pub fn sha256_hex(bytes: &[u8]) -> String {
    sha2::Sha256::digest(bytes)
        .iter()
        .map(|byte| format!("{byte:02x}"))
        .collect()
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_digest_of_nothing_is_the_known_one() {
        assert_eq!(
            super::sha256_hex(b""),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
    }
}
