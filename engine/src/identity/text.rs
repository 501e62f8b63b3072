//! Equality of the short strings interning compares on nearly every event (namespaces, kinds,
//! apiVersions), without a call.
//!
//! `==` on strings calls `memcmp`, which for a 7-byte namespace costs more than the comparison
//! itself: a call, and a dispatch on the length inside it. Here a string of up to 32 bytes is
//! compared as at most four overlapping words; anything longer still goes to `memcmp`.
//! (Owner names, 20 to 30 bytes, gained nothing from it: counted, and left to `==`.)

/// Whether `a` and `b` hold the same bytes. Same answer as `a == b`, for every input.
#[inline]
pub(crate) fn text_eq(a: &str, b: &str) -> bool {
    bytes_eq(a.as_bytes(), b.as_bytes())
}

/// [`text_eq`] on bytes.
#[inline]
pub(crate) fn bytes_eq(a: &[u8], b: &[u8]) -> bool {
    let len = a.len();
    if len != b.len() {
        return false;
    }
    // Overlapping reads: the two words cover every byte once the length is at least one
    // word, so equal words at both ends (and the middle, above 16) mean equal strings.
    let word = |s: &[u8], at: usize| u64::from_ne_bytes(s[at..at + 8].try_into().unwrap());
    let half = |s: &[u8], at: usize| u32::from_ne_bytes(s[at..at + 4].try_into().unwrap());
    match len {
        0 => true,
        1..4 => a[0] == b[0] && a[len / 2] == b[len / 2] && a[len - 1] == b[len - 1],
        4..8 => half(a, 0) == half(b, 0) && half(a, len - 4) == half(b, len - 4),
        8..=16 => word(a, 0) == word(b, 0) && word(a, len - 8) == word(b, len - 8),
        17..=32 => {
            ((word(a, 0) ^ word(b, 0))
                | (word(a, 8) ^ word(b, 8))
                | (word(a, len - 16) ^ word(b, len - 16))
                | (word(a, len - 8) ^ word(b, len - 8)))
                == 0
        }
        _ => a == b,
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn every_length_and_every_differing_byte() {
        for len in 0..=40usize {
            let a: Vec<u8> = (0..len).map(|i| b'a' + (i % 26) as u8).collect();
            assert!(bytes_eq(&a, &a.clone()), "equal, length {len}");
            for at in 0..len {
                let mut b = a.clone();
                b[at] ^= 0x01;
                assert!(!bytes_eq(&a, &b), "byte {at} of {len} differs");
                b[at] = a[at] ^ 0x80;
                assert!(!bytes_eq(&a, &b), "high bit of byte {at} of {len} differs");
            }
            let mut longer = a.clone();
            longer.push(b'x');
            assert!(
                !bytes_eq(&a, &longer) && !bytes_eq(&longer, &a),
                "length {len} against one more"
            );
        }
    }

    proptest! {
        #[test]
        fn agrees_with_the_library(a in "[a-c./-]{0,36}", b in "[a-c./-]{0,36}") {
            prop_assert_eq!(text_eq(&a, &b), a == b);
        }

        #[test]
        fn agrees_on_near_copies(
            a in ".{0,40}",
            at in any::<prop::sample::Index>(),
            bit in 0..8u8,
        ) {
            let mut b = a.clone().into_bytes();
            prop_assert!(bytes_eq(a.as_bytes(), &b));
            if !b.is_empty() {
                let i = at.index(b.len());
                b[i] ^= 1 << bit;
                prop_assert_eq!(bytes_eq(a.as_bytes(), &b), a.as_bytes() == b.as_slice());
            }
        }
    }
}
