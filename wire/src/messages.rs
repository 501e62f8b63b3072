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
    #[prost(string, optional, tag = "1")]
    pub api_version: Option<String>,
    #[prost(string, optional, tag = "2")]
    pub kind: Option<String>,
}

/// `runtime.Unknown`: what follows the `k8s\0` magic of every protobuf body.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Unknown {
    #[prost(message, optional, tag = "1")]
    pub type_meta: Option<TypeMeta>,
    #[prost(bytes = "bytes", optional, tag = "2")]
    pub raw: Option<Bytes>,
    #[prost(string, optional, tag = "3")]
    pub content_encoding: Option<String>,
    #[prost(string, optional, tag = "4")]
    pub content_type: Option<String>,
}

/// `metav1.Time`: seconds and nanoseconds since the epoch.
#[derive(Clone, Copy, PartialEq, Eq, prost::Message)]
pub struct Time {
    #[prost(int64, optional, tag = "1")]
    pub seconds: Option<i64>,
    #[prost(int32, optional, tag = "2")]
    pub nanos: Option<i32>,
}

/// `metav1.OwnerReference`.
#[derive(Clone, PartialEq, Eq, prost::Message)]
pub struct OwnerReference {
    #[prost(string, optional, tag = "1")]
    pub kind: Option<String>,
    #[prost(string, optional, tag = "3")]
    pub name: Option<String>,
    #[prost(string, optional, tag = "4")]
    pub uid: Option<String>,
    #[prost(string, optional, tag = "5")]
    pub api_version: Option<String>,
    #[prost(bool, optional, tag = "6")]
    pub controller: Option<bool>,
    #[prost(bool, optional, tag = "7")]
    pub block_owner_deletion: Option<bool>,
}

/// `metav1.ObjectMeta` as kube-gc decodes it: what the engine keeps, nothing else.
#[derive(Clone, PartialEq, prost::Message)]
pub struct LeanObjectMeta {
    #[prost(string, optional, tag = "1")]
    pub name: Option<String>,
    #[prost(string, optional, tag = "3")]
    pub namespace: Option<String>,
    #[prost(string, optional, tag = "5")]
    pub uid: Option<String>,
    #[prost(string, optional, tag = "6")]
    pub resource_version: Option<String>,
    #[prost(message, optional, tag = "9")]
    pub deletion_timestamp: Option<Time>,
    #[prost(message, repeated, tag = "13")]
    pub owner_references: Vec<OwnerReference>,
    #[prost(string, repeated, tag = "14")]
    pub finalizers: Vec<String>,
}

/// `metav1.ManagedFieldsEntry`, as simcluster serves it.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ManagedFieldsEntry {
    #[prost(string, optional, tag = "1")]
    pub manager: Option<String>,
    #[prost(string, optional, tag = "2")]
    pub operation: Option<String>,
    #[prost(string, optional, tag = "3")]
    pub api_version: Option<String>,
    #[prost(message, optional, tag = "4")]
    pub time: Option<Time>,
    #[prost(string, optional, tag = "6")]
    pub fields_type: Option<String>,
    #[prost(message, optional, tag = "7")]
    pub fields_v1: Option<FieldsV1>,
}

/// `metav1.FieldsV1`: the managed fields' JSON, as bytes.
#[derive(Clone, PartialEq, prost::Message)]
pub struct FieldsV1 {
    #[prost(bytes = "vec", optional, tag = "1")]
    pub raw: Option<Vec<u8>>,
}

/// `metav1.ObjectMeta` with what else a server sends (labels, annotations, timestamps,
/// managedFields): simcluster's encoder, and tests that check the lean decoder skips it.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ObjectMeta {
    #[prost(string, optional, tag = "1")]
    pub name: Option<String>,
    #[prost(string, optional, tag = "2")]
    pub generate_name: Option<String>,
    #[prost(string, optional, tag = "3")]
    pub namespace: Option<String>,
    #[prost(string, optional, tag = "5")]
    pub uid: Option<String>,
    #[prost(string, optional, tag = "6")]
    pub resource_version: Option<String>,
    #[prost(int64, optional, tag = "7")]
    pub generation: Option<i64>,
    #[prost(message, optional, tag = "8")]
    pub creation_timestamp: Option<Time>,
    #[prost(message, optional, tag = "9")]
    pub deletion_timestamp: Option<Time>,
    #[prost(int64, optional, tag = "10")]
    pub deletion_grace_period_seconds: Option<i64>,
    #[prost(btree_map = "string, string", tag = "11")]
    pub labels: BTreeMap<String, String>,
    #[prost(btree_map = "string, string", tag = "12")]
    pub annotations: BTreeMap<String, String>,
    #[prost(message, repeated, tag = "13")]
    pub owner_references: Vec<OwnerReference>,
    #[prost(string, repeated, tag = "14")]
    pub finalizers: Vec<String>,
    #[prost(message, repeated, tag = "17")]
    pub managed_fields: Vec<ManagedFieldsEntry>,
}

/// `metav1.ListMeta`.
#[derive(Clone, PartialEq, Eq, prost::Message)]
pub struct ListMeta {
    #[prost(string, optional, tag = "2")]
    pub resource_version: Option<String>,
    #[prost(string, optional, tag = "3")]
    pub r#continue: Option<String>,
    #[prost(int64, optional, tag = "4")]
    pub remaining_item_count: Option<i64>,
}

/// `metav1.PartialObjectMetadata`, lean.
#[derive(Clone, PartialEq, prost::Message)]
pub struct LeanObject {
    #[prost(message, optional, tag = "1")]
    pub metadata: Option<LeanObjectMeta>,
}

/// `metav1.PartialObjectMetadata`, full.
#[derive(Clone, PartialEq, prost::Message)]
pub struct PartialObjectMetadata {
    #[prost(message, optional, tag = "1")]
    pub metadata: Option<ObjectMeta>,
}

/// `metav1.PartialObjectMetadataList`, lean.
#[derive(Clone, PartialEq, prost::Message)]
pub struct LeanList {
    #[prost(message, optional, tag = "1")]
    pub metadata: Option<ListMeta>,
    #[prost(message, repeated, tag = "2")]
    pub items: Vec<LeanObject>,
}

/// `metav1.PartialObjectMetadataList`, full.
#[derive(Clone, PartialEq, prost::Message)]
pub struct PartialObjectMetadataList {
    #[prost(message, optional, tag = "1")]
    pub metadata: Option<ListMeta>,
    #[prost(message, repeated, tag = "2")]
    pub items: Vec<PartialObjectMetadata>,
}

/// `runtime.RawExtension`: an embedded object, itself an enveloped body.
#[derive(Clone, PartialEq, prost::Message)]
pub struct RawExtension {
    #[prost(bytes = "bytes", optional, tag = "1")]
    pub raw: Option<Bytes>,
}

/// `metav1.WatchEvent`: one frame of a protobuf watch stream (not enveloped itself).
#[derive(Clone, PartialEq, prost::Message)]
pub struct WatchEvent {
    #[prost(string, optional, tag = "1")]
    pub r#type: Option<String>,
    #[prost(message, optional, tag = "2")]
    pub object: Option<RawExtension>,
}

/// `metav1.Status`, without its details.
#[derive(Clone, PartialEq, Eq, prost::Message)]
pub struct Status {
    #[prost(message, optional, tag = "1")]
    pub metadata: Option<ListMeta>,
    #[prost(string, optional, tag = "2")]
    pub status: Option<String>,
    #[prost(string, optional, tag = "3")]
    pub message: Option<String>,
    #[prost(string, optional, tag = "4")]
    pub reason: Option<String>,
    #[prost(int32, optional, tag = "6")]
    pub code: Option<i32>,
}
