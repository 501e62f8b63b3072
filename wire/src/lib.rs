//! Kubernetes' protobuf wire format, for object metadata: what kube-gc's watchers read when
//! they ask for `PartialObjectMetadata(List)` as upstream's metadata informers do
//! (`application/vnd.kubernetes.protobuf;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1`,
//! kubernetes#78742), and what simcluster serves to such a request.
//!
//! Start at [`decode_list`] (or [`ListStreamDecoder`], the same as the bytes arrive) and
//! [`FrameReader`] + [`decode_watch_event`] (the reading side), or
//! [`encode_list`] and [`encode_watch_event`] (the serving side).
//!
//! Upstream: `k8s.io/apimachinery/pkg/runtime/serializer/protobuf` (the envelope),
//! `k8s.io/apimachinery/pkg/util/framer` (the watch framing),
//! `k8s.io/apiserver/pkg/endpoints/handlers/watch.go` (a watch event's shape).
//!
//! # The format
//!
//! - **A body** (a list page, an object, a `Status`) is the 4 bytes `k8s\0` followed by a
//!   `runtime.Unknown` message whose `typeMeta` names the kind and whose `raw` holds the
//!   message itself (`envelope.rs`).
//! - **A watch stream** is a sequence of frames, each a 4-byte big-endian length and that many
//!   bytes of a `metav1.WatchEvent` message, *not* enveloped; the event's `object.raw` is an
//!   enveloped body ([`FrameReader`]).
//!
//! Only what kube-gc keeps is decoded ([`messages::LeanObjectMeta`]): protobuf decoders step
//! over undeclared fields, so labels, annotations and managedFields cost a scan, not a build.

#![forbid(unsafe_code)]
#![warn(missing_docs, missing_debug_implementations, unreachable_pub)]

pub mod messages;

mod envelope;
mod frames;
mod list_stream;

use bytes::Bytes;
use kube_gc_engine::{ObjectMeta, OwnerReference};

pub use envelope::{MAGIC, enveloped, open_envelope};
pub use frames::{FrameReader, MAX_FRAME_BYTES, frame};
pub use list_stream::ListStreamDecoder;
pub use messages::{ListMeta, Status};
/// prost's trait of the messages (`encode_to_vec`, `decode`), for callers that build them.
pub use prost::Message;

/// The `Accept` header of a metadata list: protobuf first, JSON if the server cannot (as
/// client-go's metadata client asks).
pub const LIST_ACCEPT: &str = "application/vnd.kubernetes.protobuf;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json";

/// The `Accept` header of a metadata watch (and GET): protobuf first, JSON if the server cannot.
pub const OBJECT_ACCEPT: &str = "application/vnd.kubernetes.protobuf;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json";

/// The media type of protobuf bodies (a response's `Content-Type` starts with it).
pub const PROTOBUF: &str = "application/vnd.kubernetes.protobuf";

/// The `Content-Type` of a protobuf watch stream.
pub const PROTOBUF_WATCH: &str = "application/vnd.kubernetes.protobuf;stream=watch";

/// Whether a response's `Content-Type` is protobuf (anything else is read as JSON).
pub fn is_protobuf(content_type: &str) -> bool {
    content_type.trim_start().starts_with(PROTOBUF)
}

/// What went wrong reading a protobuf body or stream.
#[derive(Debug, thiserror::Error)]
pub enum WireError {
    /// The bytes are not the format (no magic, a message that does not decode, a frame over
    /// [`MAX_FRAME_BYTES`]).
    #[error("malformed protobuf: {0}")]
    Malformed(String),
    /// A well-formed body of another kind than the one expected.
    #[error("unexpected kind {found:?} (expected {expected})")]
    UnexpectedKind {
        /// The kind the envelope names.
        found: String,
        /// The kind that was expected.
        expected: &'static str,
    },
}

impl From<prost::DecodeError> for WireError {
    fn from(e: prost::DecodeError) -> WireError {
        WireError::Malformed(e.to_string())
    }
}

/// A body that is either the expected message or a `Status` (an error the server returned).
#[derive(Debug, PartialEq)]
pub enum OrStatus<T> {
    /// The expected message.
    Ok(T),
    /// A `metav1.Status`.
    Status(Status),
}

/// One page of a metadata list.
#[derive(Debug, PartialEq, Default)]
pub struct ListPage {
    /// The list's resourceVersion (where a watch starts after the last page).
    pub resource_version: String,
    /// The token of the next page, if any.
    pub continue_token: Option<String>,
    /// The objects, as the engine keeps them.
    pub items: Vec<ObjectMeta>,
}

/// Decodes a protobuf list page (`PartialObjectMetadataList`) or the `Status` in its place.
pub fn decode_list(body: Bytes) -> Result<OrStatus<ListPage>, WireError> {
    let (kind, raw) = open_envelope(body)?;
    match kind.as_str() {
        "PartialObjectMetadataList" => {
            let list = messages::LeanList::decode(raw)?;
            let meta = list.metadata.unwrap_or_default();
            Ok(OrStatus::Ok(ListPage {
                resource_version: meta.resource_version.unwrap_or_default(),
                continue_token: meta.r#continue.filter(|c| !c.is_empty()),
                items: list.items.into_iter().map(|o| lean_meta(o.metadata)).collect(),
            }))
        }
        "Status" => Ok(OrStatus::Status(Status::decode(raw)?)),
        _ => Err(WireError::UnexpectedKind { found: kind, expected: "PartialObjectMetadataList" }),
    }
}

/// Decodes the `Status` of an error response (a body in the envelope).
pub fn decode_status(body: Bytes) -> Result<Status, WireError> {
    let (kind, raw) = open_envelope(body)?;
    if kind != "Status" {
        return Err(WireError::UnexpectedKind { found: kind, expected: "Status" });
    }
    Ok(Status::decode(raw)?)
}

/// The type of a watch event.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum WatchEventType {
    /// `ADDED`.
    Added,
    /// `MODIFIED`.
    Modified,
    /// `DELETED`.
    Deleted,
    /// `BOOKMARK`: only the object's resourceVersion means anything.
    Bookmark,
    /// `ERROR`: the object is a `Status`.
    Error,
}

impl WatchEventType {
    /// The type as the stream spells it, `None` for a type this decoder does not know.
    pub fn parse(s: &str) -> Option<WatchEventType> {
        Some(match s {
            "ADDED" => WatchEventType::Added,
            "MODIFIED" => WatchEventType::Modified,
            "DELETED" => WatchEventType::Deleted,
            "BOOKMARK" => WatchEventType::Bookmark,
            "ERROR" => WatchEventType::Error,
            _ => return None,
        })
    }

    /// The type as the stream spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            WatchEventType::Added => "ADDED",
            WatchEventType::Modified => "MODIFIED",
            WatchEventType::Deleted => "DELETED",
            WatchEventType::Bookmark => "BOOKMARK",
            WatchEventType::Error => "ERROR",
        }
    }
}

/// One decoded watch event: an object's metadata, or for `ERROR` the `Status`.
#[derive(Debug, PartialEq)]
pub struct WatchEvent {
    /// The event's type.
    pub event_type: WatchEventType,
    /// The object (`PartialObjectMetadata`) or, for errors, the `Status`.
    pub object: OrStatus<ObjectMeta>,
}

/// Decodes one frame of a protobuf watch stream (see [`FrameReader`]).
pub fn decode_watch_event(frame: Bytes) -> Result<WatchEvent, WireError> {
    let event = messages::WatchEvent::decode(frame)?;
    let type_name = event.r#type.unwrap_or_default();
    let event_type = WatchEventType::parse(&type_name)
        .ok_or_else(|| WireError::Malformed(format!("unknown watch event type {type_name:?}")))?;
    let raw = event.object.and_then(|o| o.raw).unwrap_or_default();
    let (kind, raw) = open_envelope(raw)?;
    let object = match kind.as_str() {
        "Status" => OrStatus::Status(Status::decode(raw)?),
        // A metadata watch sends PartialObjectMetadata; bookmarks name the same kind.
        "PartialObjectMetadata" => {
            OrStatus::Ok(lean_meta(messages::LeanObject::decode(raw)?.metadata))
        }
        _ => {
            return Err(WireError::UnexpectedKind {
                found: kind,
                expected: "PartialObjectMetadata",
            });
        }
    };
    Ok(WatchEvent { event_type, object })
}

/// The engine's metadata from the lean message: an absent field is its zero value, as Go's
/// decoder leaves it.
fn lean_meta(m: Option<messages::LeanObjectMeta>) -> ObjectMeta {
    let m = m.unwrap_or_default();
    ObjectMeta {
        uid: text(m.uid),
        name: text(m.name),
        namespace: text(m.namespace),
        resource_version: text(m.resource_version),
        owner_references: m
            .owner_references
            .into_iter()
            .map(|r| OwnerReference {
                api_version: text(r.api_version),
                kind: text(r.kind),
                name: text(r.name),
                uid: text(r.uid),
                controller: r.controller,
                block_owner_deletion: r.block_owner_deletion,
            })
            .collect(),
        finalizers: m.finalizers.into_iter().map(|f| text(Some(f))).collect(),
        deletion_timestamp: m.deletion_timestamp.is_some(),
        // A Time without its seconds is one no server sends: not known, rather than 1970.
        creation_time: m.creation_timestamp.and_then(|t| t.seconds),
        deletion_time: m.deletion_timestamp.and_then(|t| t.seconds),
    }
}

/// A decoded text field as a `String`: as it is when UTF-8 (no copy), else with each byte of
/// an invalid sequence replaced by U+FFFD, as the API server's JSON encoder (Go's
/// `encoding/json`) writes it (see [`messages::LeanObjectMeta`]).
fn text(bytes: Option<Vec<u8>>) -> String {
    match String::from_utf8(bytes.unwrap_or_default()) {
        Ok(text) => text,
        Err(e) => {
            let bytes = e.into_bytes();
            let mut text = String::with_capacity(bytes.len() + 8);
            for chunk in bytes.utf8_chunks() {
                text.push_str(chunk.valid());
                text.extend(chunk.invalid().iter().map(|_| char::REPLACEMENT_CHARACTER));
            }
            text
        }
    }
}

/// A protobuf list page (`PartialObjectMetadataList`), enveloped.
pub fn encode_list(list: &messages::PartialObjectMetadataList) -> Vec<u8> {
    enveloped("meta.k8s.io/v1", "PartialObjectMetadataList", list)
}

/// Appends `item` (an encoded `PartialObjectMetadata`, not enveloped) to `out` as an item of
/// a list body (see [`list_body_around`]).
pub fn frame_list_item(item: &[u8], out: &mut Vec<u8>) {
    use prost::encoding::{WireType, encode_key, encode_varint};
    encode_key(2, WireType::LengthDelimited, out);
    encode_varint(item.len() as u64, out);
    out.extend_from_slice(item);
}

/// The bytes of a list body, as [`encode_list`] writes it, before and after its items, which
/// take `framed_items_len` bytes written by [`frame_list_item`]. Sent one after the other, the
/// head, the items (in as many buffers as the server likes) and the tail are the body: a
/// server of a million objects need not join a 100 MB list into one buffer of fresh pages.
pub fn list_body_around(metadata: &ListMeta, framed_items_len: usize) -> (Vec<u8>, Vec<u8>) {
    use prost::encoding::{WireType, encode_key, encode_varint, encoded_len_varint};
    let list_meta_len = metadata.encoded_len();
    let raw_len = 1 + encoded_len_varint(list_meta_len as u64) + list_meta_len + framed_items_len;
    let type_meta = messages::TypeMeta {
        api_version: Some("meta.k8s.io/v1".into()),
        kind: Some("PartialObjectMetadataList".into()),
    };
    let mut head = Vec::with_capacity(MAGIC.len() + list_meta_len + 64);
    head.extend_from_slice(&MAGIC);
    prost::encoding::message::encode(1, &type_meta, &mut head);
    // The envelope's `raw`: the list message, whose items follow the head.
    encode_key(2, WireType::LengthDelimited, &mut head);
    encode_varint(raw_len as u64, &mut head);
    prost::encoding::message::encode(1, metadata, &mut head);
    let mut tail = Vec::new();
    prost::encoding::string::encode(3, &String::new(), &mut tail);
    prost::encoding::string::encode(4, &String::new(), &mut tail);
    (head, tail)
}

/// A `Status` body, enveloped.
pub fn encode_status(status: &Status) -> Vec<u8> {
    enveloped("v1", "Status", status)
}

/// One frame of a protobuf watch stream: `object` (an enveloped body, from [`enveloped`] or
/// [`encode_status`]) as an event of `event_type`, length-prefixed.
pub fn encode_watch_event(event_type: WatchEventType, object: Vec<u8>) -> Vec<u8> {
    let event = messages::WatchEvent {
        r#type: Some(event_type.as_str().to_owned()),
        object: Some(messages::RawExtension { raw: Some(object.into()) }),
    };
    frame(&event.encode_to_vec())
}

#[cfg(test)]
mod tests;
