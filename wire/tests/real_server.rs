//! Bodies recorded from a real kube-apiserver v1.20.2 (`scripts/testenv`), read as kube-gc
//! reads them. In namespace `wire`: ConfigMap `owner`, and ConfigMap `dep` owned by it (labels,
//! annotations, a finalizer of its own), deleted with foreground propagation (so it has a
//! deletionTimestamp and `foregroundDeletion`). The watch ran from the list's resourceVersion
//! while `owner` was patched and ConfigMap `later` was created and deleted.

use bytes::Bytes;
use kube_gc_engine::{ObjectMeta, OwnerReference};
use kube_gc_wire::{
    FrameReader, ListPage, ListStreamDecoder, OrStatus, WatchEventType, decode_list,
    decode_watch_event,
};

const OWNER_UID: &str = "b6df1c5b-9959-44d0-8361-dbbc3c800668";

fn fixture(name: &str) -> Bytes {
    let path = format!("{}/tests/fixtures/{name}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read(&path).unwrap_or_else(|e| panic!("{path}: {e}")).into()
}

fn dep() -> ObjectMeta {
    ObjectMeta {
        uid: "c11fb5c1-34de-4d5d-9395-7fe7a9ebdbf0".into(),
        name: "dep".into(),
        namespace: "wire".into(),
        resource_version: "203".into(),
        owner_references: vec![OwnerReference {
            api_version: "v1".into(),
            kind: "ConfigMap".into(),
            name: "owner".into(),
            uid: OWNER_UID.into(),
            controller: Some(true),
            block_owner_deletion: Some(true),
        }],
        finalizers: vec!["example.com/keep".into(), "foregroundDeletion".into()],
        deletion_timestamp: true,
        // 2026-11-25T13:45:39Z: the seconds of the protobuf Time.
        creation_time: Some(1_795_614_339),
        deletion_time: Some(1_795_614_339),
    }
}

fn owner(resource_version: &str) -> ObjectMeta {
    ObjectMeta {
        uid: OWNER_UID.into(),
        name: "owner".into(),
        namespace: "wire".into(),
        resource_version: resource_version.into(),
        creation_time: Some(1_795_614_338),
        ..Default::default()
    }
}

#[test]
fn a_whole_list_decodes_as_its_json_twin_reads() {
    let page = decode_list(fixture("list-kube-apiserver-v1.20.2.pb")).unwrap();
    let expected = ListPage {
        resource_version: "203".into(),
        continue_token: None,
        items: vec![dep(), owner("201")],
    };
    assert_eq!(page, OrStatus::Ok(expected));
}

#[test]
fn the_stream_decoder_reads_both_pages_as_the_whole_decoder_does() {
    for name in ["list-kube-apiserver-v1.20.2.pb", "list-page-1-kube-apiserver-v1.20.2.pb"] {
        let body = fixture(name);
        let OrStatus::Ok(whole) = decode_list(body.clone()).unwrap() else { panic!("{name}") };
        for chunk_len in 1..=body.len().min(64) {
            let mut decoder = ListStreamDecoder::new();
            let mut items = Vec::new();
            for chunk in body.chunks(chunk_len) {
                decoder.push(chunk);
                while let Some(item) = decoder.next_item().unwrap() {
                    items.push(item);
                }
            }
            let mut page = decoder.finish().unwrap();
            page.items = items;
            assert_eq!(page, whole, "{name}, chunks of {chunk_len}");
        }
    }
}

#[test]
fn a_first_page_carries_its_continue_token() {
    let OrStatus::Ok(page) = decode_list(fixture("list-page-1-kube-apiserver-v1.20.2.pb")).unwrap()
    else {
        panic!("a list page");
    };
    assert_eq!(page.items, vec![dep()]);
    assert!(page.continue_token.is_some_and(|t| !t.is_empty()));
}

#[test]
fn a_watch_stream_decodes_frame_by_frame() {
    let stream = fixture("watch-kube-apiserver-v1.20.2.pb");
    let mut reader = FrameReader::new();
    reader.push(&stream);
    let mut events = Vec::new();
    while let Some(frame) = reader.next_frame().unwrap() {
        events.push(decode_watch_event(frame).unwrap());
    }
    assert_eq!(reader.pending(), 0, "the stream ends on a frame boundary");
    let summary: Vec<_> = events
        .iter()
        .map(|e| match &e.object {
            OrStatus::Ok(m) => (e.event_type, m.name.as_str(), m.resource_version.as_str()),
            OrStatus::Status(_) => panic!("no error in this stream"),
        })
        .collect();
    use WatchEventType::*;
    assert_eq!(
        summary,
        [
            (Modified, "owner", "204"),
            (Added, "later", "205"),
            (Deleted, "later", "206"),
            (Bookmark, "", "206"),
            (Bookmark, "", "206"),
        ]
    );
    let OrStatus::Ok(modified) = &events[0].object else { unreachable!() };
    assert_eq!(*modified, owner("204"), "labels and managedFields are skipped");
}
