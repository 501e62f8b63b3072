use std::collections::BTreeMap;

use bytes::Bytes;
use prost::Message;

use super::messages::{
    FieldsV1, ManagedFieldsEntry, OwnerReference, PartialObjectMetadata, PartialObjectMetadataList,
    Time,
};
use super::*;

mod malformed_input;

fn owner(name: &str, uid: &str, controller: Option<bool>, blocks: Option<bool>) -> OwnerReference {
    OwnerReference {
        api_version: Some("apps/v1".into()),
        kind: Some("ReplicaSet".into()),
        name: Some(name.into()),
        uid: Some(uid.into()),
        controller,
        block_owner_deletion: blocks,
    }
}

/// A Pod's metadata as a real server sends it: labels, annotations, timestamps, managedFields.
fn full_meta(i: usize, deleting: bool) -> PartialObjectMetadata {
    PartialObjectMetadata {
        metadata: Some(messages::ObjectMeta {
            name: Some(format!("web-{i}")),
            generate_name: Some("web-".into()),
            namespace: Some("ns-0001".into()),
            uid: Some(format!("00000000-0000-0000-0000-{i:012}")),
            resource_version: Some(format!("{}", 1000 + i)),
            generation: Some(1),
            creation_timestamp: Some(Time { seconds: Some(1_700_000_000), nanos: None }),
            deletion_timestamp: deleting
                .then_some(Time { seconds: Some(1_700_000_100), nanos: None }),
            deletion_grace_period_seconds: deleting.then_some(30),
            labels: BTreeMap::from([("app".into(), "web".into())]),
            annotations: BTreeMap::from([("note".into(), "x".repeat(200))]),
            owner_references: vec![owner("web-rs", "rs-uid", Some(true), Some(true))],
            finalizers: if deleting { vec!["foregroundDeletion".into()] } else { vec![] },
            managed_fields: vec![ManagedFieldsEntry {
                manager: Some("kube-controller-manager".into()),
                operation: Some("Update".into()),
                api_version: Some("v1".into()),
                time: Some(Time { seconds: Some(1_700_000_000), nanos: None }),
                fields_type: Some("FieldsV1".into()),
                fields_v1: Some(FieldsV1 { raw: Some(br#"{"f:metadata":{}}"#.to_vec()) }),
            }],
        }),
    }
}

fn engine_meta(i: usize, deleting: bool) -> kube_gc_engine::ObjectMeta {
    kube_gc_engine::ObjectMeta {
        uid: format!("00000000-0000-0000-0000-{i:012}"),
        name: format!("web-{i}"),
        namespace: "ns-0001".into(),
        resource_version: format!("{}", 1000 + i),
        owner_references: vec![kube_gc_engine::OwnerReference {
            api_version: "apps/v1".into(),
            kind: "ReplicaSet".into(),
            name: "web-rs".into(),
            uid: "rs-uid".into(),
            controller: Some(true),
            block_owner_deletion: Some(true),
        }],
        finalizers: if deleting { vec!["foregroundDeletion".into()] } else { vec![] },
        deletion_timestamp: deleting,
        creation_time: Some(1_700_000_000),
        deletion_time: deleting.then_some(1_700_000_100),
    }
}

#[test]
fn a_list_page_decodes_to_what_the_engine_keeps() {
    let list = PartialObjectMetadataList {
        metadata: Some(ListMeta {
            resource_version: Some("4242".into()),
            r#continue: Some("next-page".into()),
            remaining_item_count: Some(7),
        }),
        items: vec![full_meta(1, false), full_meta(2, true)],
    };
    let page = decode_list(encode_list(&list).into()).unwrap();
    assert_eq!(
        page,
        OrStatus::Ok(ListPage {
            resource_version: "4242".into(),
            continue_token: Some("next-page".into()),
            items: vec![engine_meta(1, false), engine_meta(2, true)],
        })
    );
}

#[test]
fn the_last_page_has_no_continue_token_and_absent_fields_are_zero_values() {
    let list = PartialObjectMetadataList {
        metadata: Some(ListMeta { r#continue: Some(String::new()), ..Default::default() }),
        items: vec![PartialObjectMetadata { metadata: None }],
    };
    let OrStatus::Ok(page) = decode_list(encode_list(&list).into()).unwrap() else {
        panic!("a list");
    };
    assert_eq!(page.continue_token, None);
    assert_eq!(page.resource_version, "");
    assert_eq!(page.items, vec![kube_gc_engine::ObjectMeta::default()]);
}

/// A Time without its seconds (no server sends one) is a time not known, not 1970; a
/// deletionTimestamp of any shape still says the object is being deleted.
#[test]
fn a_time_without_seconds_is_not_known() {
    let no_seconds = Some(Time { seconds: None, nanos: Some(5) });
    let list = PartialObjectMetadataList {
        metadata: None,
        items: vec![PartialObjectMetadata {
            metadata: Some(messages::ObjectMeta {
                creation_timestamp: no_seconds,
                deletion_timestamp: no_seconds,
                ..Default::default()
            }),
        }],
    };
    let OrStatus::Ok(page) = decode_list(encode_list(&list).into()).unwrap() else {
        panic!("a list");
    };
    let meta = &page.items[0];
    assert_eq!(
        (meta.creation_time, meta.deletion_timestamp, meta.deletion_time),
        (None, true, None)
    );
}

#[test]
fn a_status_in_place_of_a_list_is_returned_as_such() {
    let status = Status {
        status: Some("Failure".into()),
        reason: Some("Expired".into()),
        message: Some("continue token expired".into()),
        code: Some(410),
        metadata: None,
    };
    let got = decode_list(encode_status(&status).into()).unwrap();
    assert_eq!(got, OrStatus::Status(status));
}

#[test]
fn an_error_responses_status_decodes_and_nothing_else_does() {
    let status = Status {
        status: Some("Failure".into()),
        reason: Some("Forbidden".into()),
        message: Some("pods is forbidden".into()),
        code: Some(403),
        metadata: None,
    };
    assert_eq!(decode_status(encode_status(&status).into()).unwrap(), status);
    let list = encode_list(&Default::default());
    assert!(matches!(
        decode_status(list.into()),
        Err(WireError::UnexpectedKind { expected: "Status", .. })
    ));
    assert!(matches!(decode_status(Bytes::from_static(b"{}")), Err(WireError::Malformed(_))));
}

#[test]
fn bodies_that_are_not_the_format_are_errors_not_panics() {
    for body in [&b""[..], b"k8s", b"{\"kind\":\"PodList\"}", b"k8s\0\xff\xff\xff"] {
        assert!(
            matches!(decode_list(Bytes::copy_from_slice(body)), Err(WireError::Malformed(_))),
            "{body:?}"
        );
    }
    let pod = enveloped("v1", "Pod", &full_meta(1, false));
    assert!(matches!(
        decode_list(pod.into()),
        Err(WireError::UnexpectedKind { found, .. }) if found == "Pod"
    ));
}

fn watch_stream() -> (Vec<u8>, Vec<WatchEvent>) {
    let object =
        |i, deleting| enveloped("meta.k8s.io/v1", "PartialObjectMetadata", &full_meta(i, deleting));
    let bookmark = PartialObjectMetadata {
        metadata: Some(messages::ObjectMeta {
            resource_version: Some("5000".into()),
            ..Default::default()
        }),
    };
    let gone = Status { code: Some(410), reason: Some("Expired".into()), ..Default::default() };
    let mut stream = Vec::new();
    stream.extend(encode_watch_event(WatchEventType::Added, object(1, false)));
    stream.extend(encode_watch_event(WatchEventType::Modified, object(2, true)));
    stream.extend(encode_watch_event(WatchEventType::Deleted, object(2, true)));
    stream.extend(encode_watch_event(
        WatchEventType::Bookmark,
        enveloped("meta.k8s.io/v1", "PartialObjectMetadata", &bookmark),
    ));
    stream.extend(encode_watch_event(WatchEventType::Error, encode_status(&gone)));
    let expected = vec![
        WatchEvent {
            event_type: WatchEventType::Added,
            object: OrStatus::Ok(engine_meta(1, false)),
        },
        WatchEvent {
            event_type: WatchEventType::Modified,
            object: OrStatus::Ok(engine_meta(2, true)),
        },
        WatchEvent {
            event_type: WatchEventType::Deleted,
            object: OrStatus::Ok(engine_meta(2, true)),
        },
        WatchEvent {
            event_type: WatchEventType::Bookmark,
            object: OrStatus::Ok(kube_gc_engine::ObjectMeta {
                resource_version: "5000".into(),
                ..Default::default()
            }),
        },
        WatchEvent { event_type: WatchEventType::Error, object: OrStatus::Status(gone) },
    ];
    (stream, expected)
}

fn read_all(reader: &mut FrameReader) -> Vec<WatchEvent> {
    let mut events = Vec::new();
    while let Some(frame) = reader.next_frame().unwrap() {
        events.push(decode_watch_event(frame).unwrap());
    }
    events
}

#[test]
fn a_watch_stream_decodes_whatever_its_chunks() {
    let (stream, expected) = watch_stream();
    for chunk_len in [1, 2, 3, 5, 7, 64, 1000, stream.len()] {
        let mut reader = FrameReader::new();
        let mut events = Vec::new();
        for chunk in stream.chunks(chunk_len) {
            reader.push(chunk);
            events.extend(read_all(&mut reader));
        }
        assert_eq!(events, expected, "chunks of {chunk_len}");
        assert_eq!(reader.pending(), 0);
    }
}

#[test]
fn a_truncated_stream_leaves_its_tail_pending() {
    let (stream, expected) = watch_stream();
    let mut reader = FrameReader::new();
    reader.push(&stream[..stream.len() - 1]);
    let events = read_all(&mut reader);
    assert_eq!(events, expected[..expected.len() - 1]);
    assert!(reader.pending() > 0);
}

#[test]
fn an_oversized_frame_is_refused_before_it_is_buffered() {
    let mut reader = FrameReader::new();
    reader.push(&u32::MAX.to_be_bytes());
    assert!(matches!(reader.next_frame(), Err(WireError::Malformed(_))));
}

#[test]
fn an_unknown_event_type_is_an_error() {
    let event = messages::WatchEvent { r#type: Some("SYNC".into()), object: None };
    assert!(matches!(
        decode_watch_event(event.encode_to_vec().into()),
        Err(WireError::Malformed(m)) if m.contains("SYNC")
    ));
}

#[test]
fn content_types_are_told_apart() {
    assert!(is_protobuf("application/vnd.kubernetes.protobuf"));
    assert!(is_protobuf(PROTOBUF_WATCH));
    assert!(!is_protobuf("application/json"));
    assert!(!is_protobuf("application/json;stream=watch"));
}

/// Every item and the page's metadata from the stream decoder, fed `chunk_len` bytes at a time.
fn stream_decode(body: &[u8], chunk_len: usize) -> Result<ListPage, WireError> {
    stream_decode_chunks(&body.chunks(chunk_len).collect::<Vec<_>>())
}

/// Every item and the page's metadata from the stream decoder, fed `chunks` one at a time.
fn stream_decode_chunks(chunks: &[&[u8]]) -> Result<ListPage, WireError> {
    let mut decoder = ListStreamDecoder::new();
    let mut items = Vec::new();
    for chunk in chunks {
        decoder.push(chunk);
        while let Some(item) = decoder.next_item()? {
            items.push(item);
        }
    }
    let mut page = decoder.finish()?;
    page.items = items;
    Ok(page)
}

#[test]
fn the_stream_decoder_reads_what_the_whole_decoder_reads_whatever_the_chunks() {
    let list = PartialObjectMetadataList {
        metadata: Some(ListMeta {
            resource_version: Some("77".into()),
            r#continue: Some("more".into()),
            remaining_item_count: Some(3),
        }),
        items: (0..20).map(|i| full_meta(i, i % 3 == 0)).collect(),
    };
    let body = encode_list(&list);
    let OrStatus::Ok(whole) = decode_list(body.clone().into()).unwrap() else { panic!() };
    for chunk_len in [1, 2, 3, 5, 64, 333, body.len()] {
        assert_eq!(stream_decode(&body, chunk_len).unwrap(), whole, "chunks of {chunk_len}");
    }
}

#[test]
fn the_stream_decoder_refuses_what_is_not_a_whole_list() {
    let list = PartialObjectMetadataList { metadata: None, items: vec![full_meta(1, false)] };
    let body = encode_list(&list);
    // Cut anywhere: an early end, never a shorter list.
    for cut in [0, 3, 4, 10, body.len() / 2, body.len() - 1] {
        assert!(stream_decode(&body[..cut], 7).is_err(), "cut at {cut}");
    }
    let status = encode_status(&Status { code: Some(500), ..Default::default() });
    assert!(matches!(stream_decode(&status, 5), Err(WireError::UnexpectedKind { .. })));
    assert!(matches!(stream_decode(b"{\"items\":[]}", 5), Err(WireError::Malformed(_))));
    // The list before its kind: refused, not read blind.
    let unknown = messages::Unknown {
        type_meta: None,
        raw: Some(list.encode_to_vec().into()),
        content_encoding: None,
        content_type: None,
    };
    let mut blind = MAGIC.to_vec();
    blind.extend(unknown.encode_to_vec());
    assert!(matches!(stream_decode(&blind, 5), Err(WireError::UnexpectedKind { .. })));
    // An item claiming more than any object's metadata is refused before it is buffered.
    let mut huge = MAGIC.to_vec();
    huge.extend(
        messages::Unknown {
            type_meta: Some(messages::TypeMeta {
                api_version: None,
                kind: Some("PartialObjectMetadataList".into()),
            }),
            raw: None,
            content_encoding: None,
            content_type: None,
        }
        .encode_to_vec(),
    );
    huge.extend([0x12, 0xff, 0xff, 0xff, 0xff, 0x0f, 0x12, 0xff, 0xff, 0xff, 0x7f]);
    assert!(
        matches!(stream_decode(&huge, 64), Err(WireError::Malformed(m)) if m.contains("bytes"))
    );
}

#[test]
fn a_list_of_encoded_items_is_byte_for_byte_the_list() {
    let list = PartialObjectMetadataList {
        metadata: Some(ListMeta { resource_version: Some("5".into()), ..Default::default() }),
        items: (0..300).map(|i| full_meta(i, i % 2 == 0)).collect(),
    };
    // Framed into two buffers, as a server encoding on two threads does.
    let mut halves = [Vec::new(), Vec::new()];
    for (i, item) in list.items.iter().enumerate() {
        frame_list_item(&item.encode_to_vec(), &mut halves[i * 2 / list.items.len()]);
    }
    let meta = list.metadata.clone().unwrap();
    let (head, tail) = list_body_around(&meta, halves.iter().map(Vec::len).sum());
    let [first, second] = halves;
    assert_eq!([head, first, second, tail].concat(), encode_list(&list));
}

#[test]
fn a_compressed_list_is_refused_whole_and_streamed() {
    let list = PartialObjectMetadataList { metadata: None, items: vec![full_meta(1, false)] };
    let unknown = messages::Unknown {
        type_meta: Some(messages::TypeMeta {
            api_version: Some("meta.k8s.io/v1".into()),
            kind: Some("PartialObjectMetadataList".into()),
        }),
        raw: Some(list.encode_to_vec().into()),
        content_encoding: Some("gzip".into()),
        content_type: None,
    };
    let mut body = MAGIC.to_vec();
    body.extend(unknown.encode_to_vec());
    let refused = |r: Result<(), WireError>| match r {
        Err(WireError::Malformed(m)) => m.contains("content encoding"),
        _ => false,
    };
    assert!(refused(decode_list(body.clone().into()).map(|_| ())));
    assert!(refused(stream_decode(&body, 7).map(|_| ())));
}
