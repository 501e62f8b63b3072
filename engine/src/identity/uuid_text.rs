//! The canonical text of a UUID, both ways: parsing the 36 bytes into a [`Uid`](super::Uid)'s
//! two words, fast (every event parses its own UID and its owners'), and formatting them back.

#[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
use std::arch::x86_64::*;

/// Parses exactly the canonical form: 36 bytes, lowercase hex, dashes at 8, 13, 18 and 23.
/// Uppercase is rejected on purpose: the API compares UIDs as strings, so `ABC…` and `abc…`
/// are different UIDs and must stay different.
///
/// Every event parses its own UID and its owners', so the 32 digits are read sixteen at a time
/// with SSE2 ([`hex32`]), or eight at a time in one 64-bit word elsewhere ([`hex8`]), rather
/// than one by one: the byte-at-a-time loop had been a sixth of the warm-up's instructions
/// (`scripts/bench-instructions`). The tests hold both to a byte-at-a-time reference.
pub(super) fn parse_canonical_uuid(text: &[u8]) -> Option<(u64, u64)> {
    let words = canonical_digit_words(text)?;
    #[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
    // SAFETY: `hex32` is safe code that needs SSE2, and this build assumes SSE2 (the
    // `target_feature` cfg above; every x86-64 CPU has it).
    #[allow(unsafe_code)]
    let bytes = unsafe { hex32(words)? };
    #[cfg(not(all(target_arch = "x86_64", target_feature = "sse2")))]
    let bytes = hex32_portable(words)?;
    Some(uuid_halves(bytes))
}

/// The 32 digits of a 36-byte text with dashes where a canonical UUID has them, as four words
/// of eight, each in memory order (the first digit in the least significant byte); `None` for
/// any other length or dash. The dashes sit between the groups the reads skip.
pub(super) fn canonical_digit_words(text: &[u8]) -> Option<[u64; 4]> {
    let b: &[u8; 36] = text.try_into().ok()?;
    if b[8] != b'-' || b[13] != b'-' || b[18] != b'-' || b[23] != b'-' {
        return None;
    }
    let eight = |i: usize| u64::from_le_bytes(b[i..i + 8].try_into().unwrap());
    let four = |i: usize| u64::from(u32::from_le_bytes(b[i..i + 4].try_into().unwrap()));
    Some([eight(0), four(9) | four(14) << 32, four(19) | four(24) << 32, eight(28)])
}

/// A UUID's 16 bytes, first to last, as its high and low 64 bits.
pub(super) fn uuid_halves(bytes: [u8; 16]) -> (u64, u64) {
    let (hi, lo) = bytes.split_at(8);
    (u64::from_be_bytes(hi.try_into().unwrap()), u64::from_be_bytes(lo.try_into().unwrap()))
}

/// The 16 bytes that the 32 lowercase hex digits in `words` spell, the first digit the high
/// nibble of the first byte; `None` if any byte is not a lowercase hex digit.
///
/// With SSE2 (every x86-64 has it): two 16-byte vectors of digits, classified by signed byte
/// comparisons (a byte of 0x80 or more is negative, so below `'0'`: never a digit), then each
/// digit's value, then each pair joined in a 16-bit lane and the lanes packed into bytes.
#[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
#[target_feature(enable = "sse2")]
fn hex32(words: [u64; 4]) -> Option<[u8; 16]> {
    let (valid_lo, lo) = hex16_pairs(words[0], words[1]);
    let (valid_hi, hi) = hex16_pairs(words[2], words[3]);
    if !(valid_lo && valid_hi) {
        return None;
    }
    let packed = _mm_packus_epi16(lo, hi);
    let first = _mm_cvtsi128_si64(packed) as u64;
    let second = _mm_cvtsi128_si64(_mm_unpackhi_epi64(packed, packed)) as u64;
    let mut bytes = [0u8; 16];
    bytes[..8].copy_from_slice(&first.to_le_bytes());
    bytes[8..].copy_from_slice(&second.to_le_bytes());
    Some(bytes)
}

/// Whether the 16 bytes of `lo` then `hi` are all lowercase hex digits, and their values
/// joined pairwise: each 16-bit lane holds a pair's byte.
#[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
#[target_feature(enable = "sse2")]
fn hex16_pairs(lo: u64, hi: u64) -> (bool, __m128i) {
    let v = _mm_set_epi64x(hi as i64, lo as i64);
    let digit = _mm_and_si128(
        _mm_cmpgt_epi8(v, _mm_set1_epi8(b'0' as i8 - 1)),
        _mm_cmplt_epi8(v, _mm_set1_epi8(b'9' as i8 + 1)),
    );
    let letter = _mm_and_si128(
        _mm_cmpgt_epi8(v, _mm_set1_epi8(b'a' as i8 - 1)),
        _mm_cmplt_epi8(v, _mm_set1_epi8(b'f' as i8 + 1)),
    );
    let valid = _mm_movemask_epi8(_mm_or_si128(digit, letter)) == 0xffff;
    // A digit's value is its low nibble; a letter's, its low nibble plus 9.
    let nibbles = _mm_add_epi8(
        _mm_and_si128(v, _mm_set1_epi8(0x0f)),
        _mm_and_si128(letter, _mm_set1_epi8(9)),
    );
    // Each 16-bit lane holds a pair, the higher-order digit in its low byte.
    let pairs = _mm_or_si128(_mm_slli_epi16::<4>(nibbles), _mm_srli_epi16::<8>(nibbles));
    (valid, _mm_and_si128(pairs, _mm_set1_epi16(0x00ff)))
}

/// [`hex32`] without SIMD, a word at a time: what other targets run, and what the tests hold
/// the SSE2 version to.
#[cfg_attr(all(target_arch = "x86_64", target_feature = "sse2"), allow(dead_code))]
pub(super) fn hex32_portable(words: [u64; 4]) -> Option<[u8; 16]> {
    let mut bytes = [0u8; 16];
    for (i, &w) in words.iter().enumerate() {
        let (packed, bad) = hex8(w);
        if bad != 0 {
            return None;
        }
        bytes[i * 4..i * 4 + 4].copy_from_slice(&(packed as u32).to_le_bytes());
    }
    Some(bytes)
}

/// The eight hex digits in `w` (the first in its least significant byte) as four value bytes,
/// the first digit pair in the least significant, and a word that is zero only if every byte
/// is a lowercase hex digit.
///
/// Byte-wise arithmetic in one word. A byte of 0x80 or more makes `bad` non-zero whatever
/// the others compute, so the rest may take every byte to be below 0x80, where adding at most
/// 0x50 never carries into the next byte. Then a byte is a digit when `+ 0x50` sets its high
/// bit (it is at least `'0'`) and `+ 0x46` does not (it is below `':'`), a letter likewise
/// between `'a'` and `'f'`. A digit's value is its low nibble, a
/// letter's its low nibble plus 9 (letters, unlike digits, have bit 6 set). Each nibble is
/// then joined to the one after it (the higher-order first), and the bytes packed together.
#[cfg_attr(all(target_arch = "x86_64", target_feature = "sse2"), allow(dead_code))]
fn hex8(w: u64) -> (u64, u64) {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGHS: u64 = ONES * 0x80;
    let digit = w.wrapping_add(ONES * (0x80 - u64::from(b'0')))
        & !w.wrapping_add(ONES * (0x80 - u64::from(b'9') - 1));
    let letter = w.wrapping_add(ONES * (0x80 - u64::from(b'a')))
        & !w.wrapping_add(ONES * (0x80 - u64::from(b'f') - 1));
    let bad = (w & HIGHS) | (!(digit | letter) & HIGHS);
    let nibbles = (w & (ONES * 0x0f)) + ((w >> 6) & ONES) * 9;
    let bytes = ((nibbles << 4) | (nibbles >> 8)) & 0x00ff_00ff_00ff_00ff;
    let halves = ((bytes >> 8) | bytes) & 0x0000_ffff_0000_ffff;
    (((halves >> 16) | halves) & 0xffff_ffff, bad)
}

/// The canonical text (lowercase, dashed) of the UUID whose high and low 64 bits are `hi` and
/// `lo`: what [`parse_canonical_uuid`] reads back.
pub(super) fn format_uuid(hi: u64, lo: u64) -> String {
    let v = (u128::from(hi) << 64) | u128::from(lo);
    let hex = format!("{v:032x}");
    format!("{}-{}-{}-{}-{}", &hex[0..8], &hex[8..12], &hex[12..16], &hex[16..20], &hex[20..32])
}
