//! What the decoders do with bodies and streams a real server never sends: damaged, cut or
//! padded bytes, in any chunking. They must answer with an error or a value, never panic, and
//! the streaming decoders must not depend on where the chunks fall.

use bytes::Bytes;
use proptest::prelude::*;

use super::stream_decode_chunks;
use crate::messages::{
    ListMeta, ObjectMeta, OwnerReference, PartialObjectMetadata, PartialObjectMetadataList, Time,
};
use crate::{
    FrameReader, OrStatus, WatchEventType, decode_list, decode_status, decode_watch_event,
    encode_list, encode_watch_event, enveloped, frame,
};

fn object_meta() -> impl Strategy<Value = ObjectMeta> {
    let owner = ("[a-z]{0,6}", "[0-9a-f-]{0,8}", any::<Option<bool>>(), any::<Option<bool>>())
        .prop_map(|(name, uid, controller, blocks)| OwnerReference {
            api_version: Some("apps/v1".into()),
            kind: Some("ReplicaSet".into()),
            name: Some(name),
            uid: Some(uid),
            controller,
            block_owner_deletion: blocks,
        });
    (
        "[a-z]{0,8}",
        "[0-9a-f-]{0,12}",
        proptest::option::of(0u32..1000),
        proptest::collection::vec(owner, 0..3),
        proptest::collection::vec("[a-z.]{1,10}", 0..2),
        any::<bool>(),
    )
        .prop_map(|(name, uid, version, owners, finalizers, deleting)| ObjectMeta {
            name: Some(name),
            namespace: Some("ns".into()),
            uid: Some(uid),
            resource_version: version.map(|v| v.to_string()),
            deletion_timestamp: deleting.then_some(Time { seconds: Some(1), nanos: None }),
            owner_references: owners,
            finalizers,
            ..Default::default()
        })
}

/// A list page as the server encodes it.
fn list_body() -> impl Strategy<Value = Vec<u8>> {
    (proptest::collection::vec(object_meta(), 0..6), proptest::option::of("[a-z0-9]{0,4}"))
        .prop_map(|(items, token)| {
            encode_list(&PartialObjectMetadataList {
                metadata: Some(ListMeta {
                    resource_version: Some("7".into()),
                    r#continue: token,
                    remaining_item_count: None,
                }),
                items: items
                    .into_iter()
                    .map(|m| PartialObjectMetadata { metadata: Some(m) })
                    .collect(),
            })
        })
}

/// A watch stream as the server frames it.
fn watch_stream() -> impl Strategy<Value = Vec<u8>> {
    proptest::collection::vec((object_meta(), 0usize..4), 0..5).prop_map(|events| {
        let types = [
            WatchEventType::Added,
            WatchEventType::Modified,
            WatchEventType::Deleted,
            WatchEventType::Bookmark,
        ];
        events
            .into_iter()
            .flat_map(|(meta, t)| {
                let object = enveloped(
                    "meta.k8s.io/v1",
                    "PartialObjectMetadata",
                    &PartialObjectMetadata { metadata: Some(meta) },
                );
                frame(&encode_watch_event(types[t], object))
            })
            .collect()
    })
}

/// One change to a body: the kinds of damage a broken proxy or a foreign server could do.
#[derive(Clone, Debug)]
enum Edit {
    Flip { at: usize, mask: u8 },
    Cut { at: usize },
    Insert { at: usize, bytes: Vec<u8> },
    Remove { at: usize, len: usize },
}

fn edits() -> impl Strategy<Value = Vec<Edit>> {
    let edit = prop_oneof![
        (any::<usize>(), 1u8..=255).prop_map(|(at, mask)| Edit::Flip { at, mask }),
        any::<usize>().prop_map(|at| Edit::Cut { at }),
        (any::<usize>(), proptest::collection::vec(any::<u8>(), 1..12))
            .prop_map(|(at, bytes)| Edit::Insert { at, bytes }),
        (any::<usize>(), 1usize..16).prop_map(|(at, len)| Edit::Remove { at, len }),
    ];
    proptest::collection::vec(edit, 1..4)
}

fn damage(mut body: Vec<u8>, edits: &[Edit]) -> Vec<u8> {
    for edit in edits {
        let at = |i: usize| if body.is_empty() { 0 } else { i % (body.len() + 1) };
        match edit {
            Edit::Flip { at: i, mask } => {
                if !body.is_empty() {
                    let i = i % body.len();
                    body[i] ^= mask;
                }
            }
            Edit::Cut { at: i } => body.truncate(at(*i)),
            Edit::Insert { at: i, bytes } => {
                let i = at(*i);
                body.splice(i..i, bytes.iter().copied());
            }
            Edit::Remove { at: i, len } => {
                let i = at(*i);
                let end = (i + len).min(body.len());
                body.drain(i..end);
            }
        }
    }
    body
}

/// `body` cut into chunks of the sizes in `sizes`, taken in turn.
fn chunks<'b>(body: &'b [u8], sizes: &[usize]) -> Vec<&'b [u8]> {
    let mut out = Vec::new();
    let mut rest = body;
    for size in sizes.iter().cycle() {
        if rest.is_empty() {
            break;
        }
        let (head, tail) = rest.split_at((*size).min(rest.len()));
        out.push(head);
        rest = tail;
    }
    out
}

/// Each frame of `chunks`, decoded, then whether bytes were left over; stops at the reader's
/// first error.
fn read_stream(chunks: &[&[u8]]) -> (Vec<Result<String, String>>, Result<usize, String>) {
    let mut reader = FrameReader::new();
    let mut events = Vec::new();
    for chunk in chunks {
        reader.push(chunk);
        loop {
            match reader.next_frame() {
                Ok(Some(frame)) => events.push(
                    decode_watch_event(frame).map(|e| format!("{e:?}")).map_err(|e| e.to_string()),
                ),
                Ok(None) => break,
                Err(e) => return (events, Err(e.to_string())),
            }
        }
    }
    (events, Ok(reader.pending()))
}

fn chunk_sizes() -> impl Strategy<Value = Vec<usize>> {
    proptest::collection::vec(1usize..40, 1..6)
}

/// Cases per property: `PROPTEST_CASES`, or 512 (a second; 50,000 each found nothing either).
fn cases() -> u32 {
    std::env::var("PROPTEST_CASES").ok().and_then(|c| c.parse().ok()).unwrap_or(512)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(), ..ProptestConfig::default() })]

    /// An undamaged page reads the same whole and streamed, whatever the chunks.
    #[test]
    fn a_page_streams_as_it_decodes_whole(body in list_body(), sizes in chunk_sizes()) {
        let OrStatus::Ok(whole) = decode_list(Bytes::from(body.clone())).unwrap() else {
            panic!("a list page decoded as a Status")
        };
        prop_assert_eq!(stream_decode_chunks(&chunks(&body, &sizes)).unwrap(), whole);
    }

    /// A damaged page is an error or a page, never a panic, from every decoder; the streaming
    /// decoder's answer does not depend on the chunks.
    #[test]
    fn a_damaged_page_is_never_a_panic(
        body in list_body(),
        edits in edits(),
        sizes in chunk_sizes(),
    ) {
        let body = damage(body, &edits);
        let _ = decode_list(Bytes::from(body.clone()));
        let _ = decode_status(Bytes::from(body.clone()));
        let streamed = stream_decode_chunks(&chunks(&body, &sizes)).map_err(|e| e.to_string());
        let at_once = stream_decode_chunks(&[&body]).map_err(|e| e.to_string());
        prop_assert_eq!(streamed, at_once);
    }

    /// A damaged watch stream yields the same frames and errors however it is chunked, and
    /// decoding a damaged frame is an error or an event, never a panic.
    #[test]
    fn a_damaged_watch_stream_is_never_a_panic(
        stream in watch_stream(),
        edits in edits(),
        sizes in chunk_sizes(),
    ) {
        let stream = damage(stream, &edits);
        prop_assert_eq!(read_stream(&chunks(&stream, &sizes)), read_stream(&[&stream]));
    }

    /// Bytes of no format at all: an error from both list decoders (a body that does not start
    /// with the magic is not a list), and no panic from the watch event decoder.
    #[test]
    fn noise_is_an_error(noise in proptest::collection::vec(any::<u8>(), 0..200)) {
        let _ = decode_watch_event(Bytes::from(noise.clone()));
        if !noise.starts_with(&crate::MAGIC) {
            prop_assert!(decode_list(Bytes::from(noise.clone())).is_err());
            prop_assert!(stream_decode_chunks(&[&noise]).is_err());
        }
    }
}

/// `needle` replaced by `with` (of the same length, so every length prefix still holds).
fn replaced(mut bytes: Vec<u8>, needle: &[u8], with: &[u8]) -> Vec<u8> {
    assert_eq!(needle.len(), with.len());
    let mut at = 0;
    while let Some(i) = bytes[at..].windows(needle.len()).position(|w| w == needle) {
        bytes[at + i..at + i + needle.len()].copy_from_slice(with);
        at += i + needle.len();
    }
    bytes
}

/// Text that is not UTF-8 (the API server does not check what a client wrote into an owner
/// reference or a finalizer) decodes with U+FFFD in its place, as the server's JSON shows the
/// same object, in a list, a streamed list and a watch event. It used to fail the decoding of
/// the whole page or event, and so every list and watch of the object's resource, for ever.
#[test]
fn text_that_is_not_utf8_decodes_as_the_servers_json_shows_it() {
    let meta = ObjectMeta {
        name: Some("pod".into()),
        namespace: Some("ns".into()),
        uid: Some("u1".into()),
        resource_version: Some("7".into()),
        owner_references: vec![OwnerReference {
            api_version: Some("apps/v1".into()),
            kind: Some("ReplicaSet".into()),
            name: Some("rs-@@".into()),
            uid: Some("u0".into()),
            controller: None,
            block_owner_deletion: None,
        }],
        finalizers: vec!["x/##".into()],
        ..Default::default()
    };
    // A sequence cut short, and two bytes that start none: one U+FFFD a byte, as Go writes.
    let (cut, stray) = ([0xE2, 0x82], [0xFF, 0xFE]);
    let damaged = |bytes: Vec<u8>| replaced(replaced(bytes, b"@@", &cut), b"##", &stray);
    let check = |m: &crate::ObjectMeta| {
        assert_eq!(m.owner_references[0].name, "rs-\u{FFFD}\u{FFFD}");
        assert_eq!(m.finalizers, ["x/\u{FFFD}\u{FFFD}"]);
        assert_eq!((m.name.as_str(), m.uid.as_str()), ("pod", "u1"));
    };
    let object = PartialObjectMetadata { metadata: Some(meta) };
    let list = encode_list(&PartialObjectMetadataList {
        metadata: Some(ListMeta { resource_version: Some("7".into()), ..Default::default() }),
        items: vec![object.clone()],
    });
    let list = damaged(list);
    let OrStatus::Ok(page) = decode_list(Bytes::from(list.clone())).expect("a page") else {
        panic!("a Status")
    };
    check(&page.items[0]);
    check(&stream_decode_chunks(&[&list]).expect("a page").items[0]);
    let event = encode_watch_event(
        WatchEventType::Added,
        enveloped("meta.k8s.io/v1", "PartialObjectMetadata", &object),
    );
    let event = damaged(event);
    let mut reader = FrameReader::new();
    reader.push(&event);
    let decoded = decode_watch_event(reader.next_frame().unwrap().unwrap()).expect("an event");
    let OrStatus::Ok(m) = decoded.object else { panic!("a Status") };
    check(&m);
}

/// A list body that could pass for a shorter list than it is: read as Go reads it, or
/// refused. Two ListMetas are merged (the first's `continue` kept, so the list is not taken as
/// ending on this page); two lists in one envelope, a known field of the wrong wire type, and
/// an envelope with no list at all are errors, never a list missing items.
#[test]
fn what_could_pass_for_a_shorter_list_is_read_as_go_reads_it_or_refused() {
    use prost::Message;
    use prost::encoding::{WireType, encode_key, encode_varint};

    use crate::envelope::MAGIC;
    use crate::messages::{TypeMeta, Unknown};
    let list_meta = |token: Option<&str>| ListMeta {
        resource_version: Some("7".into()),
        r#continue: token.map(Into::into),
        remaining_item_count: None,
    };
    let item = PartialObjectMetadata {
        metadata: Some(ObjectMeta {
            name: Some("a".into()),
            uid: Some("u".into()),
            ..Default::default()
        }),
    };
    let list =
        PartialObjectMetadataList { metadata: Some(list_meta(Some("next"))), items: vec![item] }
            .encode_to_vec();
    let field = |tag: u32, value: &[u8], out: &mut Vec<u8>| {
        encode_key(tag, WireType::LengthDelimited, out);
        encode_varint(value.len() as u64, out);
        out.extend_from_slice(value);
    };
    let body = |raw: Option<Vec<u8>>, after: &[u8]| {
        let unknown = Unknown {
            type_meta: Some(TypeMeta {
                api_version: Some("meta.k8s.io/v1".into()),
                kind: Some("PartialObjectMetadataList".into()),
            }),
            raw: raw.map(Into::into),
            content_encoding: Some(String::new()),
            content_type: Some(String::new()),
        };
        let mut out = MAGIC.to_vec();
        unknown.encode(&mut out).unwrap();
        out.extend_from_slice(after);
        out
    };

    let mut two_metas = list.clone();
    field(1, &list_meta(None).encode_to_vec(), &mut two_metas);
    let page = stream_decode_chunks(&[&body(Some(two_metas), &[])]).unwrap();
    assert_eq!((page.items.len(), page.continue_token.as_deref()), (1, Some("next")));

    let mut second_list = Vec::new();
    field(2, &list, &mut second_list);
    assert!(stream_decode_chunks(&[&body(Some(list.clone()), &second_list)]).is_err());

    let mut item_as_varint = list.clone();
    encode_key(2, WireType::Varint, &mut item_as_varint);
    encode_varint(5, &mut item_as_varint);
    assert!(stream_decode_chunks(&[&body(Some(item_as_varint), &[])]).is_err());

    assert!(stream_decode_chunks(&[&body(None, &[])]).is_err());
}
