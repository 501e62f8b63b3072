//! The draws of [`WORKLOAD.md`](../../../shared/WORKLOAD.md), written once: the splitmix64
//! streams every generated object comes from, its UIDs, name suffixes and names.
//!
//! The graph benchmarks (`kube-gc-bench`) build engine events from them, the emulator
//! (`kube-gc-simcluster`) stored objects, and its faults and the chaos suite their random
//! choices; so a benchmark's input and a preloaded emulator hold the very same objects, byte
//! for byte on any machine (the golden rows of WORKLOAD.md are tested in both).
//!
//! ```
//! use kube_gc_workload::{SplitMix64, namespace_name};
//!
//! let mut uids = SplitMix64::new(1);
//! let uid = uids.uid();
//! assert_eq!(uid.len(), 36);
//! assert_eq!(&uid[14..15], "4"); // a version-4 UUID
//! assert_eq!(namespace_name(7), "ns-0007");
//! ```
#![forbid(unsafe_code)]
#![warn(missing_docs, missing_debug_implementations)]

/// WORKLOAD.md's default seed.
pub const DEFAULT_SEED: u64 = 1;

/// WORKLOAD.md's default number of namespaces.
pub const DEFAULT_NAMESPACES: usize = 1000;

/// Kubernetes' `rand.String` alphabet (no vowels, no confusable digits), of name suffixes.
pub const ALPHABET: &[u8; 27] = b"bcdfghjklmnpqrstvwxz2456789";

/// splitmix64, the PRNG of every stream.
#[derive(Clone, Debug)]
pub struct SplitMix64 {
    state: u64,
}

impl SplitMix64 {
    /// A stream whose initial state is `state`.
    pub fn new(state: u64) -> SplitMix64 {
        SplitMix64 { state }
    }

    /// The next 64-bit value.
    #[inline]
    #[allow(clippy::should_implement_trait)] // not an iterator: an infinite stream of draws
    pub fn next(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A UUIDv4 string from two draws (WORKLOAD.md § UIDs).
    pub fn uid(&mut self) -> String {
        let mut out = String::with_capacity(36);
        self.push_uid(&mut out);
        out
    }

    /// Appends a UUIDv4 from two draws ([`uid`](Self::uid) without the allocation).
    pub fn push_uid(&mut self, out: &mut String) {
        const HEX: &[u8; 16] = b"0123456789abcdef";
        let hi = self.next();
        let lo = self.next();
        let mut b = [0u8; 16];
        b[..8].copy_from_slice(&hi.to_be_bytes());
        b[8..].copy_from_slice(&lo.to_be_bytes());
        b[6] = (b[6] & 0x0f) | 0x40;
        b[8] = (b[8] & 0x3f) | 0x80;
        for (i, byte) in b.iter().enumerate() {
            if matches!(i, 4 | 6 | 8 | 10) {
                out.push('-');
            }
            out.push(HEX[usize::from(byte >> 4)] as char);
            out.push(HEX[usize::from(byte & 0xf)] as char);
        }
    }

    /// Appends a `k`-character name suffix from one draw (WORKLOAD.md § Name suffixes).
    pub fn push_suffix(&mut self, out: &mut String, k: usize) {
        let mut x = self.next();
        for _ in 0..k {
            out.push(ALPHABET[(x % 27) as usize] as char);
            x /= 27;
        }
    }

    /// A `k`-character name suffix from one draw.
    pub fn suffix(&mut self, k: usize) -> String {
        let mut s = String::with_capacity(k);
        self.push_suffix(&mut s, k);
        s
    }
}

/// Appends `value` as zero-padded decimal of at least `width` digits (`%0*d`).
pub fn push_padded(out: &mut String, value: u64, width: usize) {
    let digits = value.to_string();
    for _ in digits.len()..width {
        out.push('0');
    }
    out.push_str(&digits);
}

/// `prefix` followed by `value` as `%08d`, with room for `extra_capacity` more bytes.
pub fn numbered(prefix: &str, value: usize, extra_capacity: usize) -> String {
    let mut s = String::with_capacity(prefix.len() + 8 + extra_capacity);
    s.push_str(prefix);
    push_padded(&mut s, value as u64, 8);
    s
}

/// The `i`-th namespace's name, `ns-%04d`.
pub fn namespace_name(i: usize) -> String {
    let mut s = String::with_capacity(7);
    s.push_str("ns-");
    push_padded(&mut s, i as u64, 4);
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    /// splitmix64's published first outputs for seed 0 (Vigna's reference implementation).
    #[test]
    fn splitmix64_matches_the_reference() {
        let mut r = SplitMix64::new(0);
        assert_eq!(r.next(), 0xe220_a839_7b1d_cdaf);
        assert_eq!(r.next(), 0x6e78_9e6a_a1b9_65f4);
    }

    #[test]
    fn names_are_padded() {
        assert_eq!(numbered("app-", 42, 0), "app-00000042");
        assert_eq!(namespace_name(999), "ns-0999");
        let mut s = SplitMix64::new(3);
        let suffix = s.suffix(5);
        assert_eq!(suffix.len(), 5);
        assert!(suffix.bytes().all(|b| ALPHABET.contains(&b)));
    }
}
