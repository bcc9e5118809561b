//! Cursors a client holds but can neither read nor forge.
//!
//! A page's `next_cursor` names a place in the index's own order (a segment and a position in
//! it), and a position counts every document before it, another tenant's included. So the
//! server seals it with a key made when the process starts: the place is encrypted (XOR with a
//! SHA-256 keystream under a fresh nonce) and authenticated (HMAC-SHA256 over nonce and text).
//! A cursor from another server process, or an edited one, is refused like any other text.

use sha2::{Digest, Sha256};
use std::sync::OnceLock;

const NONCE: usize = 16;
const TAG: usize = 16;
/// The longest place sealed (a segment name and a position are far shorter).
const MAX_PLACE: usize = 256;

/// This process's key; `None` if the system's random source failed (then no cursor is given).
fn key() -> Option<&'static [u8; 32]> {
    static KEY: OnceLock<Option<[u8; 32]>> = OnceLock::new();
    KEY.get_or_init(|| {
        let mut key = [0u8; 32];
        getrandom::fill(&mut key).ok().map(|()| key)
    })
    .as_ref()
}

/// `place` sealed, as lowercase hexadecimal.
pub fn seal(place: &str) -> Option<String> {
    let key = key()?;
    if place.len() > MAX_PLACE {
        return None;
    }
    let mut nonce = [0u8; NONCE];
    getrandom::fill(&mut nonce).ok()?;
    let mut sealed = nonce.to_vec();
    sealed.extend(xor_keystream(key, &nonce, place.as_bytes()));
    let tag = hmac(key, &sealed);
    sealed.extend_from_slice(&tag[..TAG]);
    Some(sealed.iter().map(|b| format!("{b:02x}")).collect())
}

/// The place [`seal`] sealed in `text`; `None` for anything else.
pub fn open(text: &str) -> Option<String> {
    let key = key()?;
    if !text.len().is_multiple_of(2) || text.len() > 2 * (NONCE + MAX_PLACE + TAG) {
        return None;
    }
    let bytes: Vec<u8> = (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(text.get(i..i + 2)?, 16).ok())
        .collect::<Option<_>>()?;
    if bytes.len() < NONCE + TAG {
        return None;
    }
    let (body, tag) = bytes.split_at(bytes.len() - TAG);
    let expected = hmac(key, body);
    if !bool::from(subtle::ConstantTimeEq::ct_eq(&expected[..TAG], tag)) {
        return None;
    }
    let (nonce, encrypted) = body.split_at(NONCE);
    String::from_utf8(xor_keystream(key, nonce, encrypted)).ok()
}

/// `data` XOR the keystream `SHA-256(key ‖ nonce ‖ block number)`.
fn xor_keystream(key: &[u8; 32], nonce: &[u8], data: &[u8]) -> Vec<u8> {
    data.chunks(32)
        .enumerate()
        .flat_map(|(block, chunk)| {
            let mut hasher = Sha256::new();
            hasher.update(b"lector cursor stream");
            hasher.update(key);
            hasher.update(nonce);
            hasher.update((block as u32).to_le_bytes());
            let stream = hasher.finalize();
            chunk
                .iter()
                .zip(stream)
                .map(|(b, s)| b ^ s)
                .collect::<Vec<u8>>()
        })
        .collect()
}

/// HMAC-SHA256 (RFC 2104) of `message` under `key`.
fn hmac(key: &[u8; 32], message: &[u8]) -> [u8; 32] {
    let pad = |byte: u8| {
        let mut block = [byte; 64];
        block.iter_mut().zip(key).for_each(|(b, k)| *b ^= k);
        block
    };
    let inner = Sha256::new()
        .chain_update(pad(0x36))
        .chain_update(message)
        .finalize();
    Sha256::new()
        .chain_update(pad(0x5c))
        .chain_update(inner)
        .finalize()
        .into()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sealed_place_opens_and_hides_itself_and_an_edited_one_does_not_open() {
        let place = "seg-12-a1b2.37";
        let sealed = seal(place).unwrap();
        assert_eq!(open(&sealed).as_deref(), Some(place));
        // Hexadecimal of nonce, encrypted place and tag: nothing of the place shows.
        assert!(sealed.bytes().all(|b| b.is_ascii_hexdigit()));
        assert_eq!(sealed.len(), 2 * (NONCE + place.len() + TAG));
        assert_ne!(seal(place).unwrap(), sealed, "a fresh nonce each time");
        // Flipping any one bit, or cutting the text, is refused.
        for i in 0..sealed.len() {
            let mut edited: Vec<char> = sealed.chars().collect();
            edited[i] = if edited[i] == '0' { '1' } else { '0' };
            let edited: String = edited.into_iter().collect();
            assert_eq!(open(&edited), None, "edited at {i}");
        }
        for bad in ["", "zz", &sealed[..sealed.len() - 2], "seg-12-a1b2.37"] {
            assert_eq!(open(bad), None, "{bad}");
        }
    }
}
