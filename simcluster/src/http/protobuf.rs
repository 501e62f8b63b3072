//! The protobuf representation of metadata (kube-gc-wire), as a real kube-apiserver serves it to
//! upstream's metadata informers: the `Accept` negotiation, `PartialObjectMetadataList` pages,
//! and the objects, bookmarks and `410 Expired` of a protobuf watch.
//!
//! Only metadata is served as protobuf: simcluster has no protobuf schema of whole objects, so
//! an `Accept` naming protobuf without `as=PartialObjectMetadata(List)` falls through to the next
//! media type it lists, as the real server does for a type it cannot encode. Errors stay JSON
//! `Status` bodies (clients read a body by its `Content-Type`).

use std::collections::BTreeMap;
use std::fmt;

use kube_gc_wire::messages::{
    FieldsV1, ListMeta, ManagedFieldsEntry, ObjectMeta, OwnerReference, PartialObjectMetadata,
    Status, Time,
};
use kube_gc_wire::{PROTOBUF, PROTOBUF_WATCH, WatchEventType};

use crate::store::StoredObject;

use super::*;

/// How a response is encoded, as the request's `Accept` negotiated it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Encoding {
    /// JSON: whole objects, `PartialObjectMetadata`, tables.
    Json,
    /// Protobuf `PartialObjectMetadata(List)` (lists and watches; other answers stay JSON).
    MetadataProtobuf,
}

impl Encoding {
    /// The encoding of the first media type of the request's `Accept` headers simcluster serves
    /// (JSON if none is).
    pub(super) fn negotiate(headers: &HeaderMap) -> Encoding {
        headers
            .get_all(header::ACCEPT)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(','))
            .find_map(media_type)
            .unwrap_or(Encoding::Json)
    }
}

/// The encoding of one media type of an `Accept` list, `None` if simcluster does not serve it.
fn media_type(entry: &str) -> Option<Encoding> {
    let mut parts = entry.split(';').map(str::trim);
    let essence = parts.next().unwrap_or_default();
    if essence.eq_ignore_ascii_case(PROTOBUF) {
        let (mut kind, mut group, mut version) = (None, None, None);
        for param in parts {
            let Some((key, value)) = param.split_once('=') else { continue };
            match key.trim().to_ascii_lowercase().as_str() {
                "as" => kind = Some(value.trim()),
                "g" => group = Some(value.trim()),
                "v" => version = Some(value.trim()),
                _ => {}
            }
        }
        let metadata = matches!(kind, Some("PartialObjectMetadata" | "PartialObjectMetadataList"))
            && group == Some("meta.k8s.io")
            && version == Some("v1");
        return metadata.then_some(Encoding::MetadataProtobuf);
    }
    // JSON in any representation (the handlers read `as=` themselves); simcluster answers
    // JSON to the wildcards too.
    let json = ["application/json", "application/*", "*/*"]
        .iter()
        .any(|t| essence.eq_ignore_ascii_case(t));
    json.then_some(Encoding::Json)
}

/// A list page as a protobuf `PartialObjectMetadataList`.
pub(super) fn list_response(
    store: &Store,
    r: &Resolved,
    namespace: Option<String>,
    query: &HashMap<String, String>,
) -> Result<Response> {
    let page = store.list(r, &list_options(namespace, query)?)?;
    let metadata = ListMeta {
        resource_version: Some(page.resource_version.to_string()),
        r#continue: page.continue_token,
        remaining_item_count: None,
    };
    let framed = frame_items(&page.items);
    let (head, tail) = kube_gc_wire::list_body_around(&metadata, framed.iter().map(Vec::len).sum());
    // Sent part by part: joined, a list of a million objects was another 100 MB of fresh
    // pages and a copy, a fifth of the emulator's CPU during a warm-up.
    let parts = std::iter::once(head).chain(framed).chain(std::iter::once(tail));
    let body = Body::from_stream(futures_util::stream::iter(
        parts.map(|part| Ok::<_, std::convert::Infallible>(Bytes::from(part))),
    ));
    Ok((StatusCode::OK, [(header::CONTENT_TYPE, PROTOBUF)], body).into_response())
}

/// Each stored object's `PartialObjectMetadata`, encoded and framed as a list's items, in
/// buffers of about [`PART_LEN`] bytes (no reallocation copies a whole list). A whole list
/// (`resourceVersion=0`, a million objects) is converted on two threads: the client waits for
/// its first byte meanwhile, so the second core would be idle.
fn frame_items(items: &[Arc<StoredObject>]) -> Vec<Vec<u8>> {
    let encode = |chunk: &[Arc<StoredObject>]| -> Vec<Vec<u8>> {
        let mut parts = vec![Vec::new()];
        for stored in chunk {
            let item = encoded_metadata(stored);
            let part = parts.last_mut().expect("never empty");
            if part.len() + item.len() + 16 > PART_LEN && !part.is_empty() {
                parts.push(Vec::with_capacity(PART_LEN));
            }
            kube_gc_wire::frame_list_item(item, parts.last_mut().expect("never empty"));
        }
        parts
    };
    if items.len() < 10_000 {
        return encode(items);
    }
    let (first, second) = items.split_at(items.len() / 2);
    std::thread::scope(|s| {
        let other = s.spawn(|| encode(second));
        let mut parts = encode(first);
        parts.extend(other.join().expect("encoding a list's items does not panic"));
        parts
    })
}

/// The size of the buffers a list body is sent in.
const PART_LEN: usize = 1 << 20;

/// The `Content-Type` of a watch stream in `encoding`.
pub(super) fn watch_content_type(encoding: Encoding) -> &'static str {
    match encoding {
        Encoding::Json => "application/json",
        Encoding::MetadataProtobuf => PROTOBUF_WATCH,
    }
}

/// One frame of a protobuf watch: a change to a stored object.
pub(super) fn watch_event(kind: ChangeKind, stored: &[u8]) -> Vec<u8> {
    let event_type = match kind {
        ChangeKind::Added => WatchEventType::Added,
        ChangeKind::Modified => WatchEventType::Modified,
        ChangeKind::Deleted => WatchEventType::Deleted,
    };
    kube_gc_wire::encode_watch_event(event_type, object_body(&partial_object_metadata(stored)))
}

/// One frame of a protobuf watch: a bookmark at `resource_version`, with `annotations` (the
/// initial-events-end one) if any.
pub(super) fn bookmark(resource_version: u64, annotations: BTreeMap<String, String>) -> Vec<u8> {
    let object = PartialObjectMetadata {
        metadata: Some(ObjectMeta {
            resource_version: Some(resource_version.to_string()),
            annotations,
            ..ObjectMeta::default()
        }),
    };
    kube_gc_wire::encode_watch_event(WatchEventType::Bookmark, object_body(&object))
}

/// One frame of a protobuf watch: the `ERROR` event carrying `error`'s `Status`.
pub(super) fn error_event(error: &Error) -> Vec<u8> {
    let status = Status {
        // The JSON `Status`'s `metadata: {}`.
        metadata: Some(ListMeta::default()),
        status: Some("Failure".into()),
        message: Some(error.to_string()),
        reason: Some(error.reason().into()),
        code: Some(i32::from(error.code())),
    };
    kube_gc_wire::encode_watch_event(WatchEventType::Error, kube_gc_wire::encode_status(&status))
}

fn object_body(object: &PartialObjectMetadata) -> Vec<u8> {
    kube_gc_wire::enveloped("meta.k8s.io/v1", "PartialObjectMetadata", object)
}

/// The protobuf `PartialObjectMetadata` of a stored object (its JSON bytes). Metadata that does
/// not decode is served empty, as the JSON rendering serves `{}` (`push_stored`).
pub fn partial_object_metadata(stored: &[u8]) -> PartialObjectMetadata {
    let meta = serde_json::from_slice::<Stored<'_>>(stored).map(|s| s.metadata).unwrap_or_default();
    PartialObjectMetadata { metadata: Some(meta.into_message()) }
}

/// `stored`'s `PartialObjectMetadata`, encoded: converted from its JSON once per stored version.
pub(crate) fn encoded_metadata(stored: &StoredObject) -> &[u8] {
    use kube_gc_wire::Message as _;
    stored.metadata_protobuf(|json| partial_object_metadata(json).encode_to_vec())
}

/// A stored object as far as its protobuf metadata goes: serde steps over `spec`, `status` and
/// the metadata fields not served without building them (no `Value` tree per object: a list of
/// a million objects converts them all).
#[derive(Deserialize)]
struct Stored<'a> {
    #[serde(borrow, default)]
    metadata: Meta<'a>,
}

/// The served fields of `metadata`. `Option` everywhere: an explicit `null` is an absent field.
#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct Meta<'a> {
    name: Option<String>,
    generate_name: Option<String>,
    namespace: Option<String>,
    uid: Option<String>,
    resource_version: Option<String>,
    generation: Option<i64>,
    #[serde(default, deserialize_with = "time")]
    creation_timestamp: Option<Time>,
    #[serde(default, deserialize_with = "time")]
    deletion_timestamp: Option<Time>,
    deletion_grace_period_seconds: Option<i64>,
    labels: Option<BTreeMap<String, String>>,
    annotations: Option<BTreeMap<String, String>>,
    owner_references: Option<Vec<OwnerRef>>,
    finalizers: Option<Vec<String>>,
    #[serde(borrow)]
    managed_fields: Option<Vec<ManagedField<'a>>>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct OwnerRef {
    api_version: Option<String>,
    kind: Option<String>,
    name: Option<String>,
    uid: Option<String>,
    controller: Option<bool>,
    block_owner_deletion: Option<bool>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ManagedField<'a> {
    manager: Option<String>,
    operation: Option<String>,
    api_version: Option<String>,
    #[serde(default, deserialize_with = "time")]
    time: Option<Time>,
    fields_type: Option<String>,
    /// Kept as its JSON text: the protobuf `FieldsV1` carries exactly those bytes.
    #[serde(borrow, rename = "fieldsV1")]
    fields_v1: Option<&'a RawValue>,
}

impl Meta<'_> {
    fn into_message(self) -> ObjectMeta {
        ObjectMeta {
            name: self.name,
            generate_name: self.generate_name,
            namespace: self.namespace,
            uid: self.uid,
            resource_version: self.resource_version,
            generation: self.generation,
            creation_timestamp: self.creation_timestamp,
            deletion_timestamp: self.deletion_timestamp,
            deletion_grace_period_seconds: self.deletion_grace_period_seconds,
            labels: self.labels.unwrap_or_default(),
            annotations: self.annotations.unwrap_or_default(),
            owner_references: self
                .owner_references
                .unwrap_or_default()
                .into_iter()
                .map(|o| OwnerReference {
                    kind: o.kind,
                    name: o.name,
                    uid: o.uid,
                    api_version: o.api_version,
                    controller: o.controller,
                    block_owner_deletion: o.block_owner_deletion,
                })
                .collect(),
            finalizers: self.finalizers.unwrap_or_default(),
            managed_fields: self
                .managed_fields
                .unwrap_or_default()
                .into_iter()
                .map(|m| ManagedFieldsEntry {
                    manager: m.manager,
                    operation: m.operation,
                    api_version: m.api_version,
                    time: m.time,
                    fields_type: m.fields_type,
                    fields_v1: m
                        .fields_v1
                        .map(|f| FieldsV1 { raw: Some(f.get().as_bytes().to_vec()) }),
                })
                .collect(),
        }
    }
}

/// Deserializes a `metav1.Time` from its RFC 3339 string where it lies (no `String` built); a
/// string that is no timestamp is left out, as an absent one.
fn time<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<Time>, D::Error> {
    struct Rfc3339;
    impl serde::de::Visitor<'_> for Rfc3339 {
        type Value = Option<Time>;
        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("an RFC 3339 timestamp or null")
        }
        fn visit_str<E: serde::de::Error>(self, s: &str) -> Result<Option<Time>, E> {
            let seconds = crate::time::parse_rfc3339(s);
            Ok(seconds.map(|s| Time { seconds: Some(s), nanos: None }))
        }
        fn visit_unit<E: serde::de::Error>(self) -> Result<Option<Time>, E> {
            Ok(None)
        }
        fn visit_none<E: serde::de::Error>(self) -> Result<Option<Time>, E> {
            Ok(None)
        }
    }
    d.deserialize_any(Rfc3339)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn negotiated(accept: &str) -> Encoding {
        let mut headers = HeaderMap::new();
        headers.insert(header::ACCEPT, accept.parse().unwrap());
        Encoding::negotiate(&headers)
    }

    #[test]
    fn negotiation_should_pick_the_first_media_type_served() {
        use Encoding::{Json, MetadataProtobuf};
        // Protobuf first: what client-go's metadata client (and kube-gc) send.
        assert_eq!(negotiated(kube_gc_wire::LIST_ACCEPT), MetadataProtobuf);
        assert_eq!(negotiated(kube_gc_wire::OBJECT_ACCEPT), MetadataProtobuf);
        assert_eq!(
            negotiated(
                "application/vnd.kubernetes.protobuf; as=PartialObjectMetadataList; g=meta.k8s.io; v=v1"
            ),
            MetadataProtobuf
        );
        // JSON first wins, even with protobuf after it.
        assert_eq!(
            negotiated(
                "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/vnd.kubernetes.protobuf;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"
            ),
            Json
        );
        assert_eq!(
            negotiated("application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1"),
            Json
        );
        assert_eq!(negotiated("*/*"), Json);
        // Protobuf of whole objects (no `as=`) or of another kind is not served: the next type.
        assert_eq!(negotiated("application/vnd.kubernetes.protobuf, application/json"), Json);
        assert_eq!(negotiated("application/vnd.kubernetes.protobuf"), Json);
        assert_eq!(
            negotiated(
                "application/vnd.kubernetes.protobuf;as=Table;g=meta.k8s.io;v=v1,application/json"
            ),
            Json
        );
        assert_eq!(
            negotiated(
                "application/vnd.kubernetes.protobuf;as=PartialObjectMetadata;g=meta.k8s.io;v=v1beta1"
            ),
            Json
        );
        // Unserved types are skipped, not answered.
        assert_eq!(
            negotiated(
                "application/yaml,application/vnd.kubernetes.protobuf;as=PartialObjectMetadata;g=meta.k8s.io;v=v1"
            ),
            MetadataProtobuf
        );
        assert_eq!(Encoding::negotiate(&HeaderMap::new()), Json);
    }

    #[test]
    fn partial_object_metadata_should_carry_every_served_field() {
        let stored = br#"{"metadata":{"name":"web-1","generateName":"web-","namespace":"default","uid":"u-1","resourceVersion":"42","generation":3,"creationTimestamp":"2024-05-01T13:01:01Z","deletionTimestamp":"2024-05-01T13:01:02Z","deletionGracePeriodSeconds":0,"labels":{"app":"web"},"annotations":{"a":"b"},"ownerReferences":[{"apiVersion":"apps/v1","kind":"ReplicaSet","name":"web","uid":"u-0","controller":true,"blockOwnerDeletion":true}],"finalizers":["foregroundDeletion"],"managedFields":[{"manager":"kubectl","operation":"Update","apiVersion":"v1","time":"2024-05-01T13:01:01Z","fieldsType":"FieldsV1","fieldsV1":{"f:metadata":{"f:labels":{}}}}],"selfLink":"ignored"},"spec":{"containers":[{"name":"app"}]},"status":{}}"#;
        let t = 1_714_564_800 + 3_661;
        let meta = partial_object_metadata(stored).metadata.unwrap();
        let expected = ObjectMeta {
            name: Some("web-1".into()),
            generate_name: Some("web-".into()),
            namespace: Some("default".into()),
            uid: Some("u-1".into()),
            resource_version: Some("42".into()),
            generation: Some(3),
            creation_timestamp: Some(Time { seconds: Some(t), nanos: None }),
            deletion_timestamp: Some(Time { seconds: Some(t + 1), nanos: None }),
            deletion_grace_period_seconds: Some(0),
            labels: [("app".into(), "web".into())].into(),
            annotations: [("a".into(), "b".into())].into(),
            owner_references: vec![OwnerReference {
                kind: Some("ReplicaSet".into()),
                name: Some("web".into()),
                uid: Some("u-0".into()),
                api_version: Some("apps/v1".into()),
                controller: Some(true),
                block_owner_deletion: Some(true),
            }],
            finalizers: vec!["foregroundDeletion".into()],
            managed_fields: vec![ManagedFieldsEntry {
                manager: Some("kubectl".into()),
                operation: Some("Update".into()),
                api_version: Some("v1".into()),
                time: Some(Time { seconds: Some(t), nanos: None }),
                fields_type: Some("FieldsV1".into()),
                fields_v1: Some(FieldsV1 {
                    raw: Some(br#"{"f:metadata":{"f:labels":{}}}"#.to_vec()),
                }),
            }],
        };
        assert_eq!(meta, expected);
    }

    #[test]
    fn partial_object_metadata_should_leave_absent_and_null_fields_out() {
        let meta = partial_object_metadata(
            br#"{"metadata":{"name":"a","labels":null,"deletionTimestamp":null,"creationTimestamp":"not a time"}}"#,
        )
        .metadata
        .unwrap();
        assert_eq!(meta, ObjectMeta { name: Some("a".into()), ..ObjectMeta::default() });
        // No metadata at all, or none that decodes: an empty one.
        assert_eq!(partial_object_metadata(b"{}").metadata, Some(ObjectMeta::default()));
        assert_eq!(partial_object_metadata(b"[1]").metadata, Some(ObjectMeta::default()));
    }

    #[test]
    fn watch_frames_should_decode_with_the_wire_readers() {
        let mut reader = kube_gc_wire::FrameReader::new();
        reader.push(&watch_event(ChangeKind::Modified, br#"{"metadata":{"name":"a","uid":"u"}}"#));
        reader.push(&bookmark(7, [(INITIAL_EVENTS_END.into(), "true".into())].into()));
        reader.push(&error_event(&Error::Expired("too old".into())));
        let mut next = || {
            let frame = reader.next_frame().unwrap().expect("a whole frame");
            kube_gc_wire::decode_watch_event(frame).unwrap()
        };
        let modified = next();
        assert_eq!(modified.event_type, WatchEventType::Modified);
        let kube_gc_wire::OrStatus::Ok(meta) = modified.object else { panic!("an object") };
        assert_eq!((meta.name.as_str(), meta.uid.as_str()), ("a", "u"));
        let bookmark = next();
        assert_eq!(bookmark.event_type, WatchEventType::Bookmark);
        let kube_gc_wire::OrStatus::Ok(meta) = bookmark.object else { panic!("an object") };
        assert_eq!(meta.resource_version, "7");
        let error = next();
        assert_eq!(error.event_type, WatchEventType::Error);
        let kube_gc_wire::OrStatus::Status(status) = error.object else { panic!("a Status") };
        assert_eq!(
            (status.code, status.reason.as_deref(), status.message.as_deref()),
            (Some(410), Some("Expired"), Some("too old"))
        );
        assert_eq!(reader.pending(), 0);
    }
}
