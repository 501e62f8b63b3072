use super::uuid_text::{canonical_digit_words, hex32_portable, uuid_halves};
use super::*;

#[test]
fn canonical_uuid_round_trips_as_value() {
    let text = "910a2dec-8902-4cc1-beeb-8da1658eec67";
    let uid = Uid::parse(text);
    assert!(!uid.is_interned());
    assert_eq!(uid.as_u128(), 0x910a2dec_8902_4cc1_beeb_8da1658eec67);
    assert_eq!(uid.to_string(), text);
}

#[test]
fn hostile_uids_never_panic_and_round_trip() {
    let long = "x".repeat(10 * 1024);
    let cases = [
        "",
        "910a2dec-8902-4cc1-beeb-8da1658eec677", // 37 characters
        "910a2dec-8902-4cc1-beeb-8da1658eec6",   // 35 characters
        "910A2DEC-8902-4CC1-BEEB-8DA1658EEC67",  // uppercase: a different string
        "910a2dec+8902-4cc1-beeb-8da1658eec67",  // dash in the wrong place
        "g10a2dec-8902-4cc1-beeb-8da1658eec67",  // non-hex
        "ffffffff-ffff-ffff-ffff-ffffffffffff",  // canonical, but in the reserved range
        "ünïcödé-ẞ",
        long.as_str(),
    ];
    let mut seen = std::collections::HashSet::new();
    for (i, text) in cases.iter().enumerate() {
        let uid = Uid::parse(text);
        assert_eq!(uid.to_string(), *text, "#{i}: round trip");
        assert_eq!(Uid::parse(text), uid, "#{i}: parse is a function");
        assert!(seen.insert(uid), "#{i}: two strings share a UID");
    }
    // Upper and lower case are different UIDs.
    assert_ne!(Uid::parse(cases[3]), Uid::parse("910a2dec-8902-4cc1-beeb-8da1658eec67"));
}

#[test]
fn lookup_never_interns() {
    let unseen = "never-seen-uid-for-lookup";
    assert_eq!(Uid::lookup(unseen), None);
    assert_eq!(Uid::lookup(unseen), None, "a lookup must not intern");
    let seen = Uid::parse("seen-uid-for-lookup");
    assert_eq!(Uid::lookup("seen-uid-for-lookup"), Some(seen));
    let uuid = "910a2dec-8902-4cc1-beeb-8da1658eec67";
    assert_eq!(Uid::lookup(uuid), Some(Uid::parse(uuid)));
}

#[test]
fn reserved_range_value_is_interned_through_its_text() {
    let v = u128::MAX;
    let uid = Uid::from_u128(v);
    assert!(uid.is_interned());
    assert_eq!(uid, Uid::parse("ffffffff-ffff-ffff-ffff-ffffffffffff"));
}

#[test]
fn object_reference_string_form_is_upstreams() {
    let r = ObjectReference::new("v1", "Pod", "ns1", "podname2", "poduid2");
    assert_eq!(r.to_string(), "[v1/Pod, namespace: ns1, name: podname2, uid: poduid2]");
    let c = ObjectReference::new("v1", "Pod", "", "podname1", "poduid1");
    assert_eq!(c.to_string(), "[v1/Pod, namespace: , name: podname1, uid: poduid1]");
}

#[test]
fn object_type_splits_group_and_version() {
    let t = ObjectType::new("apps/v1", "Deployment");
    assert_eq!((t.group(), t.version(), t.kind()), ("apps", "v1", "Deployment"));
    let core = ObjectType::new("v1", "Pod");
    assert_eq!((core.group(), core.version()), ("", "v1"));
}

/// A [`UidSet`] hashes a UID as exactly its own [`Uid::hash64`], and is a set: of random
/// UUIDs and interned strings alike, every one is found, and a removed one is not.
#[test]
fn uid_maps_hash_by_the_uids_own_mix() {
    use std::hash::BuildHasher;
    let build = UidBuildHasher::default();
    let uid = Uid::parse("910a2dec-8902-4cc1-beeb-8da1658eec67");
    assert_eq!(build.hash_one(uid), uid.hash64());
    let mut uids: Vec<Uid> = (0..5000u128)
        .map(|i| Uid::from_u128(i.wrapping_mul(0x9E37_79B9_7F4A_7C15_F39C_C060_5CED_C835)))
        .collect();
    uids.extend((0..500).map(|i| Uid::parse(&format!("not-a-uuid-{i}"))));
    let mut set: UidSet = uids.iter().copied().collect();
    assert_eq!(set.len(), uids.len());
    for (i, uid) in uids.iter().enumerate() {
        assert!(set.contains(uid), "#{i} missing");
    }
    for uid in uids.iter().step_by(2) {
        assert!(set.remove(uid));
    }
    for (i, uid) in uids.iter().enumerate() {
        assert_eq!(set.contains(uid), i % 2 == 1, "#{i}");
    }
}

/// What `parse_canonical_uuid` must return, written the obvious way, a byte at a time.
fn canonical_uuid_reference(text: &[u8]) -> Option<(u64, u64)> {
    if text.len() != 36 {
        return None;
    }
    let mut value: u128 = 0;
    for (i, &c) in text.iter().enumerate() {
        if matches!(i, 8 | 13 | 18 | 23) {
            if c != b'-' {
                return None;
            }
            continue;
        }
        let digit = match c {
            b'0'..=b'9' => c - b'0',
            b'a'..=b'f' => c - b'a' + 10,
            _ => return None,
        };
        value = value << 4 | u128::from(digit);
    }
    Some(((value >> 64) as u64, value as u64))
}

fn canonical_text(value: u128) -> Vec<u8> {
    format_uuid((value >> 64) as u64, value as u64).into_bytes()
}

/// The parser as targets without SSE2 build it: the digits a word at a time.
fn parse_canonical_uuid_portable(text: &[u8]) -> Option<(u64, u64)> {
    canonical_digit_words(text).and_then(hex32_portable).map(uuid_halves)
}

/// A canonical-UUID parser: the text's value as its high and low halves, if it is canonical.
type UuidParser = fn(&[u8]) -> Option<(u64, u64)>;

/// Both parsers: the one this build runs, and the word-at-a-time one other targets run.
const PARSERS: [(&str, UuidParser); 2] =
    [("built", parse_canonical_uuid), ("portable", parse_canonical_uuid_portable)];

/// The vector and word-at-a-time parsers against the byte-at-a-time reference, at every byte
/// value in every position of UUIDs that hold every digit, and at pairs of neighbouring bytes
/// taken from each range's edges (where a carry from one byte into the next would show).
#[test]
fn canonical_uuid_parser_agrees_with_the_reference_at_every_byte() {
    for (name, parse_canonical_uuid) in PARSERS {
        every_byte_against_the_reference(name, parse_canonical_uuid);
    }
}

fn every_byte_against_the_reference(name: &str, parse_canonical_uuid: UuidParser) {
    let bases = [
        0,
        u128::MAX,
        0x0123_4567_89ab_cdef_0123_4567_89ab_cdef,
        0xfedc_ba98_7654_3210_fedc_ba98_7654_3210,
        0x910a_2dec_8902_4cc1_beeb_8da1_658e_ec67,
    ];
    let edges = [
        0x00, 0x2f, b'0', b'9', 0x3a, b'A', b'F', 0x60, b'a', b'f', 0x67, 0x7f, 0x80, 0xc3, 0xff,
        b'-',
    ];
    for base in bases {
        let text = canonical_text(base);
        let value = Some(((base >> 64) as u64, base as u64));
        assert_eq!(parse_canonical_uuid(&text), value, "{name}: {base:032x}");
        for i in 0..text.len() {
            for byte in 0..=255u8 {
                let mut t = text.clone();
                t[i] = byte;
                assert_eq!(parse_canonical_uuid(&t), canonical_uuid_reference(&t), "{name}: {t:?}");
            }
            for (a, b) in edges.iter().flat_map(|&a| edges.iter().map(move |&b| (a, b))) {
                let mut t = text.clone();
                t[i] = a;
                if let Some(next) = t.get_mut(i + 1) {
                    *next = b;
                }
                assert_eq!(parse_canonical_uuid(&t), canonical_uuid_reference(&t), "{name}: {t:?}");
            }
        }
        for len in [0, 35, 37] {
            let t: Vec<u8> = text.iter().copied().cycle().take(len).collect();
            assert_eq!(parse_canonical_uuid(&t), None, "{name}: length {len}");
        }
    }
}

proptest::proptest! {
    /// Any 36 bytes, most of them near the digits' ranges, parse as the reference parses them;
    /// any value's canonical text parses back to it.
    #[test]
    fn canonical_uuid_parser_agrees_with_the_reference(
        value in proptest::prelude::any::<u128>(),
        edits in proptest::collection::vec(
            (0usize..36, proptest::prop_oneof![
                proptest::sample::select(b"0123456789abcdefABCDEFgG/:`@-\x00\x7f\x80\xff".to_vec()),
                proptest::prelude::any::<u8>(),
            ]),
            0..4,
        ),
    ) {
        let mut text = canonical_text(value);
        for (_, parse) in PARSERS {
            proptest::prop_assert_eq!(parse(&text), Some(((value >> 64) as u64, value as u64)));
        }
        for (i, byte) in edits {
            text[i] = byte;
        }
        for (name, parse) in PARSERS {
            proptest::prop_assert_eq!(parse(&text), canonical_uuid_reference(&text), "{}", name);
        }
    }
}

#[test]
fn a_type_is_the_same_from_every_thread_and_its_two_strings_stay_apart() {
    let here = ObjectType::new("split.example/v1", "Kind");
    assert_eq!(ObjectType::new("split.example/v1", "Kind"), here, "from this thread's copy");
    let there = std::thread::spawn(|| ObjectType::new("split.example/v1", "Kind")).join().unwrap();
    assert_eq!(there, here, "from another thread, which had no copy");
    // The same characters split differently are another type, on a thread that knows both.
    let other = ObjectType::new("split.example/v1K", "ind");
    assert_ne!(other, here);
    assert_eq!((other.api_version(), other.kind()), ("split.example/v1K", "ind"));
    assert_eq!(ObjectType::new("split.example/v1", "Kind"), here);
}

/// Namespaces of every length up to past the inline comparison's 32 bytes, each beside
/// neighbours one byte apart: this thread's table (filled by the first pass, answering the
/// second) and another thread's give each text one id, and no two texts the same one.
#[test]
fn a_namespace_is_the_same_from_every_thread_and_neighbours_stay_apart() {
    let mut texts = Vec::new();
    for len in 0..=40usize {
        let base: String = (0..len).map(|i| char::from(b'a' + (i % 26) as u8)).collect();
        texts.push(format!("nsq-{base}"));
        for at in [0, len / 2, len.saturating_sub(1)] {
            let mut near = base.clone().into_bytes();
            if let Some(byte) = near.get_mut(at) {
                *byte = b'0' + (*byte % 10);
                texts.push(format!("nsq-{}", String::from_utf8(near).unwrap()));
            }
        }
    }
    texts.sort();
    texts.dedup();
    let first: Vec<Namespace> = texts.iter().map(|t| Namespace::new(t)).collect();
    let again: Vec<Namespace> = texts.iter().map(|t| Namespace::new(t)).collect();
    let elsewhere = std::thread::spawn({
        let texts = texts.clone();
        move || texts.iter().map(|t| Namespace::new(t)).collect::<Vec<_>>()
    })
    .join()
    .unwrap();
    assert_eq!(again, first, "from this thread's copy");
    assert_eq!(elsewhere, first, "from another thread's");
    for (text, ns) in texts.iter().zip(&first) {
        assert_eq!(ns.as_str(), text);
    }
    let distinct: HashSet<Namespace> = first.iter().copied().collect();
    assert_eq!(distinct.len(), texts.len(), "one id per text");
}
