//! The protobuf messages, declared by hand with only the fields kube-gc reads or simcluster
//! serves.
//!
//! Upstream: `k8s.io/apimachinery/pkg/apis/meta/v1/generated.proto` and
//! `k8s.io/apimachinery/pkg/runtime/generated.proto` (v1.20.2); the tags below are theirs.
//!
//! Protobuf decoders skip fields a message does not declare, so the lean messages
//! ([`LeanObjectMeta`], [`LeanList`]) are the decoder kube-gc needs: labels, annotations and
//! managedFields (tags 11, 12, 17) are stepped over without being built. The full
//! [`ObjectMeta`] declares those too, so that simcluster serves what a real server does.

use std::collections::BTreeMap;

use bytes::Bytes;

/// `runtime.TypeMeta`: the envelope's apiVersion and kind.
#[derive(Clone, PartialEq, prost::Message)]
pub struct TypeMeta {
    /// The enveloped message's `apiVersion` (`meta.k8s.io/v1`, `v1`, ...).
    #[prost(string, optional, tag = "1")]
    pub api_version: Option<String>,
    /// The enveloped message's `kind` (`PartialObjectMetadataList`, `Status`, ...).
    #[prost(string, optional, tag = "2")]
    pub kind: Option<String>,
}

/// `runtime.Unknown`: what follows the `k8s\0` magic of every protobuf body.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Unknown {
    /// What `raw` holds.
    #[prost(message, optional, tag = "1")]
    pub type_meta: Option<TypeMeta>,
    /// The message itself, encoded.
    #[prost(bytes = "bytes", optional, tag = "2")]
    pub raw: Option<Bytes>,
    /// How `raw` is compressed; empty (none) in what servers send.
    #[prost(string, optional, tag = "3")]
    pub content_encoding: Option<String>,
    /// The media type of `raw`; empty (protobuf) in what servers send.
    #[prost(string, optional, tag = "4")]
    pub content_type: Option<String>,
}

/// `metav1.Time`: seconds and nanoseconds since the epoch.
#[derive(Clone, Copy, PartialEq, Eq, prost::Message)]
pub struct Time {
    /// Whole seconds since the Unix epoch.
    #[prost(int64, optional, tag = "1")]
    pub seconds: Option<i64>,
    /// Nanoseconds past `seconds`.
    #[prost(int32, optional, tag = "2")]
    pub nanos: Option<i32>,
}

/// `metav1.OwnerReference`.
#[derive(Clone, PartialEq, Eq, prost::Message)]
pub struct OwnerReference {
    /// `kind` of the owner.
    #[prost(string, optional, tag = "1")]
    pub kind: Option<String>,
    /// `name` of the owner.
    #[prost(string, optional, tag = "3")]
    pub name: Option<String>,
    /// `uid` of the owner.
    #[prost(string, optional, tag = "4")]
    pub uid: Option<String>,
    /// `apiVersion` of the owner.
    #[prost(string, optional, tag = "5")]
    pub api_version: Option<String>,
    /// `controller`: the owner is the dependent's managing controller.
    #[prost(bool, optional, tag = "6")]
    pub controller: Option<bool>,
    /// `blockOwnerDeletion`: a foreground deletion of the owner waits for this dependent.
    #[prost(bool, optional, tag = "7")]
    pub block_owner_deletion: Option<bool>,
}

/// `metav1.ObjectMeta` as kube-gc decodes it: what the engine keeps, nothing else.
///
/// Its text fields are bytes, not protobuf `string`s: the API server does not check that what
/// a client wrote there is UTF-8 (Go's decoder does not), and prost refuses a `string` that is
/// not, so one object with a stray byte in an owner reference would fail every list and watch
/// of its resource for ever. The decoders (`lean_meta` in `lib.rs`) read them as UTF-8, with
/// U+FFFD for each byte that is not, as the server's JSON encoder writes the same object.
#[derive(Clone, PartialEq, prost::Message)]
pub struct LeanObjectMeta {
    /// `metadata.name`.
    #[prost(bytes = "vec", optional, tag = "1")]
    pub name: Option<Vec<u8>>,
    /// `metadata.namespace` (empty for a cluster-scoped object).
    #[prost(bytes = "vec", optional, tag = "3")]
    pub namespace: Option<Vec<u8>>,
    /// `metadata.uid`.
    #[prost(bytes = "vec", optional, tag = "5")]
    pub uid: Option<Vec<u8>>,
    /// `metadata.resourceVersion`.
    #[prost(bytes = "vec", optional, tag = "6")]
    pub resource_version: Option<Vec<u8>>,
    /// `metadata.creationTimestamp`.
    #[prost(message, optional, tag = "8")]
    pub creation_timestamp: Option<Time>,
    /// `metadata.deletionTimestamp`: set once the object is being deleted.
    #[prost(message, optional, tag = "9")]
    pub deletion_timestamp: Option<Time>,
    /// `metadata.ownerReferences`, in order.
    #[prost(message, repeated, tag = "13")]
    pub owner_references: Vec<LeanOwnerReference>,
    /// `metadata.finalizers`, in order.
    #[prost(bytes = "vec", repeated, tag = "14")]
    pub finalizers: Vec<Vec<u8>>,
}

/// [`OwnerReference`] as kube-gc decodes it, its text as bytes (see [`LeanObjectMeta`]).
#[derive(Clone, PartialEq, Eq, prost::Message)]
pub struct LeanOwnerReference {
    /// `kind` of the owner.
    #[prost(bytes = "vec", optional, tag = "1")]
    pub kind: Option<Vec<u8>>,
    /// `name` of the owner.
    #[prost(bytes = "vec", optional, tag = "3")]
    pub name: Option<Vec<u8>>,
    /// `uid` of the owner.
    #[prost(bytes = "vec", optional, tag = "4")]
    pub uid: Option<Vec<u8>>,
    /// `apiVersion` of the owner.
    #[prost(bytes = "vec", optional, tag = "5")]
    pub api_version: Option<Vec<u8>>,
    /// `controller`: the owner is the dependent's managing controller.
    #[prost(bool, optional, tag = "6")]
    pub controller: Option<bool>,
    /// `blockOwnerDeletion`: a foreground deletion of the owner waits for this dependent.
    #[prost(bool, optional, tag = "7")]
    pub block_owner_deletion: Option<bool>,
}

/// `metav1.ManagedFieldsEntry`, as simcluster serves it.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ManagedFieldsEntry {
    /// `manager`: the field manager's name.
    #[prost(string, optional, tag = "1")]
    pub manager: Option<String>,
    /// `operation`: `Apply` or `Update`.
    #[prost(string, optional, tag = "2")]
    pub operation: Option<String>,
    /// `apiVersion` of the fields' schema.
    #[prost(string, optional, tag = "3")]
    pub api_version: Option<String>,
    /// `time` of the manager's last write.
    #[prost(message, optional, tag = "4")]
    pub time: Option<Time>,
    /// `fieldsType`: `FieldsV1`.
    #[prost(string, optional, tag = "6")]
    pub fields_type: Option<String>,
    /// `fieldsV1`: the fields the manager owns.
    #[prost(message, optional, tag = "7")]
    pub fields_v1: Option<FieldsV1>,
}

/// `metav1.FieldsV1`: the managed fields' JSON, as bytes.
#[derive(Clone, PartialEq, prost::Message)]
pub struct FieldsV1 {
    /// The fields, as JSON.
    #[prost(bytes = "vec", optional, tag = "1")]
    pub raw: Option<Vec<u8>>,
}

/// `metav1.ObjectMeta` with what else a server sends (labels, annotations, timestamps,
/// managedFields): simcluster's encoder, and tests that check the lean decoder skips it.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ObjectMeta {
    /// `metadata.name`.
    #[prost(string, optional, tag = "1")]
    pub name: Option<String>,
    /// `metadata.generateName`.
    #[prost(string, optional, tag = "2")]
    pub generate_name: Option<String>,
    /// `metadata.namespace` (empty for a cluster-scoped object).
    #[prost(string, optional, tag = "3")]
    pub namespace: Option<String>,
    /// `metadata.uid`.
    #[prost(string, optional, tag = "5")]
    pub uid: Option<String>,
    /// `metadata.resourceVersion`.
    #[prost(string, optional, tag = "6")]
    pub resource_version: Option<String>,
    /// `metadata.generation`.
    #[prost(int64, optional, tag = "7")]
    pub generation: Option<i64>,
    /// `metadata.creationTimestamp`.
    #[prost(message, optional, tag = "8")]
    pub creation_timestamp: Option<Time>,
    /// `metadata.deletionTimestamp`: set once the object is being deleted.
    #[prost(message, optional, tag = "9")]
    pub deletion_timestamp: Option<Time>,
    /// `metadata.deletionGracePeriodSeconds`.
    #[prost(int64, optional, tag = "10")]
    pub deletion_grace_period_seconds: Option<i64>,
    /// `metadata.labels`.
    #[prost(btree_map = "string, string", tag = "11")]
    pub labels: BTreeMap<String, String>,
    /// `metadata.annotations`.
    #[prost(btree_map = "string, string", tag = "12")]
    pub annotations: BTreeMap<String, String>,
    /// `metadata.ownerReferences`, in order.
    #[prost(message, repeated, tag = "13")]
    pub owner_references: Vec<OwnerReference>,
    /// `metadata.finalizers`, in order.
    #[prost(string, repeated, tag = "14")]
    pub finalizers: Vec<String>,
    /// `metadata.managedFields`.
    #[prost(message, repeated, tag = "17")]
    pub managed_fields: Vec<ManagedFieldsEntry>,
}

/// `metav1.ListMeta`.
#[derive(Clone, PartialEq, Eq, prost::Message)]
pub struct ListMeta {
    /// `resourceVersion` of the list: where a watch that follows it starts.
    #[prost(string, optional, tag = "2")]
    pub resource_version: Option<String>,
    /// `continue`: the token of the next page; empty on the last.
    #[prost(string, optional, tag = "3")]
    pub r#continue: Option<String>,
    /// `remainingItemCount`: items after this page, when the server counts them.
    #[prost(int64, optional, tag = "4")]
    pub remaining_item_count: Option<i64>,
}

/// `metav1.PartialObjectMetadata`, lean.
#[derive(Clone, PartialEq, prost::Message)]
pub struct LeanObject {
    /// The object's metadata, lean.
    #[prost(message, optional, tag = "1")]
    pub metadata: Option<LeanObjectMeta>,
}

/// `metav1.PartialObjectMetadata`, full.
#[derive(Clone, PartialEq, prost::Message)]
pub struct PartialObjectMetadata {
    /// The object's metadata.
    #[prost(message, optional, tag = "1")]
    pub metadata: Option<ObjectMeta>,
}

/// `metav1.PartialObjectMetadataList`, lean.
#[derive(Clone, PartialEq, prost::Message)]
pub struct LeanList {
    /// The list's metadata.
    #[prost(message, optional, tag = "1")]
    pub metadata: Option<ListMeta>,
    /// The page's objects.
    #[prost(message, repeated, tag = "2")]
    pub items: Vec<LeanObject>,
}

/// `metav1.PartialObjectMetadataList`, full.
#[derive(Clone, PartialEq, prost::Message)]
pub struct PartialObjectMetadataList {
    /// The list's metadata.
    #[prost(message, optional, tag = "1")]
    pub metadata: Option<ListMeta>,
    /// The page's objects.
    #[prost(message, repeated, tag = "2")]
    pub items: Vec<PartialObjectMetadata>,
}

/// `runtime.RawExtension`: an embedded object, itself an enveloped body.
#[derive(Clone, PartialEq, prost::Message)]
pub struct RawExtension {
    /// The object, an enveloped body.
    #[prost(bytes = "bytes", optional, tag = "1")]
    pub raw: Option<Bytes>,
}

/// `metav1.WatchEvent`: one frame of a protobuf watch stream (not enveloped itself).
#[derive(Clone, PartialEq, prost::Message)]
pub struct WatchEvent {
    /// `ADDED`, `MODIFIED`, `DELETED`, `BOOKMARK` or `ERROR`.
    #[prost(string, optional, tag = "1")]
    pub r#type: Option<String>,
    /// The object (for `ERROR`, a `Status`).
    #[prost(message, optional, tag = "2")]
    pub object: Option<RawExtension>,
}

/// `metav1.Status`, without its details.
#[derive(Clone, PartialEq, Eq, prost::Message)]
pub struct Status {
    /// `metadata`: a list's metadata, empty in the statuses servers send.
    #[prost(message, optional, tag = "1")]
    pub metadata: Option<ListMeta>,
    /// `Success` or `Failure`.
    #[prost(string, optional, tag = "2")]
    pub status: Option<String>,
    /// What went wrong, for a person.
    #[prost(string, optional, tag = "3")]
    pub message: Option<String>,
    /// Why, for a program (`Expired`, `NotFound`, ...).
    #[prost(string, optional, tag = "4")]
    pub reason: Option<String>,
    /// The HTTP status code it stands for (410 for an expired resourceVersion).
    #[prost(int32, optional, tag = "6")]
    pub code: Option<i32>,
}
