//! The metadata decoder: list pages, watch events and GET answers decoded straight into what the
//! engine keeps of an object, and nothing else.
//!
//! kube-rs's `PartialObjectMeta` decodes the whole of `metadata` into k8s-openapi's
//! `ObjectMeta`: every label and annotation into a map, every `managedFields` entry (its
//! `fieldsV1` as a `serde_json::Value` tree) and the timestamps parsed, and then the watchers
//! copied the few fields the engine keeps out of it. On a real API server `managedFields` is most
//! of an object's metadata. [`LeanObject`] reads uid, name, namespace, resourceVersion,
//! ownerReferences, finalizers and the creation and deletion timestamps; serde skips every other
//! field as it scans past it ([`serde::de::IgnoredAny`]: nothing is built), and the kept strings
//! are moved, not copied, into the engine's [`ObjectMeta`].
//!
//! It is a [`kube::Resource`] whose requests are metadata-only, as `PartialObjectMeta`'s are, so
//! `Api<LeanObject>` asks the server for `PartialObjectMetadata(List)`; the watchers read their
//! JSON watch events with [`decode_watch_event`], and their lists' objects as
//! `crate::json_list` finds them.
//!
//! Decoding follows Go's rules for what the API server sends (upstream decodes into Go
//! structs): an absent or `null` field is its zero value. The server never omits what an owner
//! reference requires, so a reference that lacks its uid, say, can only come from a broken
//! server; it decodes to an empty uid, which the graph builder rejects as it does any malformed
//! event, instead of failing the whole page as k8s-openapi's required fields would.

use std::borrow::Cow;

use k8s_openapi::apimachinery::pkg::apis::meta::v1 as meta;
use kube::api::ApiResource;
use kube::core::DynamicResourceScope;
use kube_gc_engine::{ObjectMeta, OwnerReference};
use kube_gc_wire::{OrStatus, WatchEventType};
use serde::de::IgnoredAny;
use serde::{Deserialize, Deserializer};
use serde_json::value::RawValue;

/// An object as the metadata decoder reads it (see the module docs).
#[derive(Clone, Debug, Default)]
pub struct LeanObject {
    /// What kube-rs reads of an object ([`kube::Resource::meta`]): its resourceVersion.
    /// Nothing else is set.
    kube_meta: meta::ObjectMeta,
    /// What the engine keeps, but the resourceVersion (in `kube_meta` until [`Self::into_meta`]).
    meta: ObjectMeta,
}

impl LeanObject {
    /// The engine's metadata of the object.
    pub fn into_meta(mut self) -> ObjectMeta {
        self.meta.resource_version = self.kube_meta.resource_version.take().unwrap_or_default();
        self.meta
    }

    /// The object's namespace, name and uid (what a proof list reads), without copying.
    pub fn into_identity(self) -> (String, String, String) {
        (self.meta.namespace, self.meta.name, self.meta.uid)
    }
}

impl kube::Resource for LeanObject {
    type DynamicType = ApiResource;
    type Scope = DynamicResourceScope;

    fn metadata_api() -> bool {
        true
    }

    fn kind(dt: &ApiResource) -> Cow<'_, str> {
        Cow::Borrowed(&dt.kind)
    }

    fn group(dt: &ApiResource) -> Cow<'_, str> {
        Cow::Borrowed(&dt.group)
    }

    fn version(dt: &ApiResource) -> Cow<'_, str> {
        Cow::Borrowed(&dt.version)
    }

    fn api_version(dt: &ApiResource) -> Cow<'_, str> {
        Cow::Borrowed(&dt.api_version)
    }

    fn plural(dt: &ApiResource) -> Cow<'_, str> {
        Cow::Borrowed(&dt.plural)
    }

    fn meta(&self) -> &meta::ObjectMeta {
        &self.kube_meta
    }

    fn meta_mut(&mut self) -> &mut meta::ObjectMeta {
        &mut self.kube_meta
    }
}

/// The wire shape: only `metadata` is declared, so serde skips apiVersion, kind and (for a
/// server that ignores the metadata-only Accept header) spec and status.
#[derive(Deserialize)]
struct Wire {
    #[serde(default)]
    metadata: Option<WireMeta>,
}

/// The kept fields of `metadata`; labels, annotations, managedFields and the rest are skipped.
#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct WireMeta {
    #[serde(default)]
    uid: Option<String>,
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    namespace: Option<String>,
    #[serde(default)]
    resource_version: Option<String>,
    #[serde(default)]
    owner_references: Option<Vec<WireOwnerReference>>,
    #[serde(default)]
    finalizers: Option<Vec<String>>,
    #[serde(default)]
    creation_timestamp: Option<Timestamp>,
    #[serde(default)]
    deletion_timestamp: Option<Timestamp>,
}

/// A `metav1.Time` as its seconds since the Unix epoch, if it is an RFC 3339 string (the
/// server's `2026-11-25T10:00:00Z`); any other string, number, boolean, list or map decodes as a
/// time not known, not as an error: a timestamp is not worth failing a page for, and a
/// `deletionTimestamp` that does not parse still says the object is being deleted. (What
/// serde_json cannot read at all, as for any field, still fails: a number past `f64`'s range, a
/// lone surrogate escape. The API server decodes metadata into Go's `metav1.Time` before it
/// stores it, and never writes either.)
struct Timestamp(Option<i64>);

impl<'de> Deserialize<'de> for Timestamp {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Visitor;

        impl<'de> serde::de::Visitor<'de> for Visitor {
            type Value = Timestamp;

            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a timestamp")
            }

            fn visit_str<E: serde::de::Error>(self, s: &str) -> Result<Timestamp, E> {
                Ok(Timestamp(s.parse::<k8s_openapi::jiff::Timestamp>().ok().map(|t| t.as_second())))
            }

            fn visit_bool<E: serde::de::Error>(self, _: bool) -> Result<Timestamp, E> {
                Ok(Timestamp(None))
            }

            fn visit_i64<E: serde::de::Error>(self, _: i64) -> Result<Timestamp, E> {
                Ok(Timestamp(None))
            }

            fn visit_u64<E: serde::de::Error>(self, _: u64) -> Result<Timestamp, E> {
                Ok(Timestamp(None))
            }

            fn visit_f64<E: serde::de::Error>(self, _: f64) -> Result<Timestamp, E> {
                Ok(Timestamp(None))
            }

            fn visit_unit<E: serde::de::Error>(self) -> Result<Timestamp, E> {
                Ok(Timestamp(None))
            }

            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                mut seq: A,
            ) -> Result<Timestamp, A::Error> {
                while seq.next_element::<IgnoredAny>()?.is_some() {}
                Ok(Timestamp(None))
            }

            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut map: A,
            ) -> Result<Timestamp, A::Error> {
                while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
                Ok(Timestamp(None))
            }
        }

        deserializer.deserialize_any(Visitor)
    }
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct WireOwnerReference {
    #[serde(default)]
    api_version: Option<String>,
    #[serde(default)]
    kind: Option<String>,
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    uid: Option<String>,
    #[serde(default)]
    controller: Option<bool>,
    #[serde(default)]
    block_owner_deletion: Option<bool>,
}

impl<'de> Deserialize<'de> for LeanObject {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let m = Wire::deserialize(deserializer)?.metadata.unwrap_or_default();
        let owner_references = m
            .owner_references
            .unwrap_or_default()
            .into_iter()
            .map(|r| OwnerReference {
                api_version: r.api_version.unwrap_or_default(),
                kind: r.kind.unwrap_or_default(),
                name: r.name.unwrap_or_default(),
                uid: r.uid.unwrap_or_default(),
                controller: r.controller,
                block_owner_deletion: r.block_owner_deletion,
            })
            .collect();
        Ok(LeanObject {
            kube_meta: meta::ObjectMeta {
                resource_version: m.resource_version,
                ..Default::default()
            },
            meta: ObjectMeta {
                uid: m.uid.unwrap_or_default(),
                name: m.name.unwrap_or_default(),
                namespace: m.namespace.unwrap_or_default(),
                resource_version: String::new(),
                owner_references,
                finalizers: m.finalizers.unwrap_or_default(),
                deletion_timestamp: m.deletion_timestamp.is_some(),
                creation_time: m.creation_timestamp.and_then(|t| t.0),
                deletion_time: m.deletion_timestamp.and_then(|t| t.0),
            },
        })
    }
}

/// A watch event's wire shape: the object is decoded once its type is known.
#[derive(Deserialize)]
struct JsonWatchEvent<'a> {
    #[serde(rename = "type")]
    event_type: String,
    #[serde(borrow)]
    object: &'a RawValue,
}

/// One line of a JSON watch stream: its type, and its object or (an `ERROR` event) its Status.
pub fn decode_watch_event(line: &[u8]) -> Result<kube_gc_wire::WatchEvent, String> {
    let event: JsonWatchEvent<'_> =
        serde_json::from_slice(line).map_err(|e| format!("a watch event: {e}"))?;
    let event_type = WatchEventType::parse(&event.event_type)
        .ok_or_else(|| format!("unknown watch event type {:?}", event.event_type))?;
    let object = if event_type == WatchEventType::Error {
        let status: kube::core::Status =
            serde_json::from_str(event.object.get()).map_err(|e| format!("a watch error: {e}"))?;
        // kube's Status reads an absent code as 0 and an absent message as empty.
        OrStatus::Status(kube_gc_wire::Status {
            code: (status.code != 0).then_some(i32::from(status.code)),
            message: (!status.message.is_empty()).then_some(status.message),
            reason: (!status.reason.is_empty()).then_some(status.reason),
            ..Default::default()
        })
    } else {
        let object: LeanObject = serde_json::from_str(event.object.get())
            .map_err(|e| format!("a watch event's object: {e}"))?;
        OrStatus::Ok(object.into_meta())
    };
    Ok(kube_gc_wire::WatchEvent { event_type, object })
}

/// The engine's metadata of an object kube-rs decoded whole: what the watchers read before this
/// decoder replaced the full decoding (its test and benchmark compare the two).
pub fn from_kube_meta(m: &meta::ObjectMeta) -> ObjectMeta {
    ObjectMeta {
        uid: m.uid.clone().unwrap_or_default(),
        name: m.name.clone().unwrap_or_default(),
        namespace: m.namespace.clone().unwrap_or_default(),
        resource_version: m.resource_version.clone().unwrap_or_default(),
        owner_references: (m.owner_references.iter().flatten())
            .map(|r| OwnerReference {
                api_version: r.api_version.clone(),
                kind: r.kind.clone(),
                name: r.name.clone(),
                uid: r.uid.clone(),
                controller: r.controller,
                block_owner_deletion: r.block_owner_deletion,
            })
            .collect(),
        finalizers: m.finalizers.clone().unwrap_or_default(),
        deletion_timestamp: m.deletion_timestamp.is_some(),
        creation_time: m.creation_timestamp.as_ref().map(|t| t.0.as_second()),
        deletion_time: m.deletion_timestamp.as_ref().map(|t| t.0.as_second()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::api::{DynamicObject, ObjectList};
    use kube::core::PartialObjectMeta;
    use kube::{Resource as _, ResourceExt as _};

    /// A Pod's metadata as kube-apiserver sends it: labels, annotations, managedFields.
    const POD: &str = r#"{
        "kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1",
        "metadata": {
            "name": "web-1", "generateName": "web-", "namespace": "prod",
            "uid": "3c1a", "resourceVersion": "4711", "generation": 2,
            "creationTimestamp": "2026-11-25T09:00:00Z",
            "deletionTimestamp": "2026-11-25T10:00:00Z", "deletionGracePeriodSeconds": 30,
            "labels": {"app": "web", "pod-template-hash": "5d8f"},
            "annotations": {"note": "{\"nested\": [1, 2, {\"x\": null}]}"},
            "ownerReferences": [
                {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-5d8f",
                 "uid": "9a2b", "controller": true, "blockOwnerDeletion": true},
                {"apiVersion": "v1", "kind": "ConfigMap", "name": "cm", "uid": "77"}
            ],
            "finalizers": ["foregroundDeletion", "example.com/hold"],
            "managedFields": [{"manager": "kube-controller-manager", "operation": "Update",
                "apiVersion": "v1", "time": "2026-11-25T09:00:00Z", "fieldsType": "FieldsV1",
                "fieldsV1": {"f:metadata": {"f:labels": {".": {}, "f:app": {}}}}}]
        }
    }"#;

    /// The decoder keeps what kube-rs's full decoding (the path it replaces) gave the engine.
    #[test]
    fn keeps_what_the_full_decoding_kept() {
        let lean: LeanObject = serde_json::from_str(POD).unwrap();
        assert_eq!(lean.resource_version().as_deref(), Some("4711"), "kube-rs reads it");
        let full: PartialObjectMeta<DynamicObject> = serde_json::from_str(POD).unwrap();
        let expected = from_kube_meta(&full.metadata);
        assert_eq!(lean.into_meta(), expected);
        assert_eq!(expected.owner_references.len(), 2);
        assert!(expected.deletion_timestamp);
    }

    #[test]
    fn absent_and_null_fields_are_zero_values() {
        let lean: LeanObject = serde_json::from_str(
            r#"{"metadata": {"uid": "u", "name": null, "ownerReferences": null,
                "deletionTimestamp": null, "ownerReferences2": 1}}"#,
        )
        .unwrap();
        let meta = lean.into_meta();
        assert_eq!((meta.uid.as_str(), meta.name.as_str(), meta.namespace.as_str()), ("u", "", ""));
        assert!(meta.owner_references.is_empty() && !meta.deletion_timestamp);
        let bare: LeanObject = serde_json::from_str("{}").unwrap();
        assert_eq!(bare.into_meta(), ObjectMeta::default());
        // A reference missing its required fields decodes (empty) instead of failing its page.
        let broken: LeanObject =
            serde_json::from_str(r#"{"metadata": {"ownerReferences": [{"kind": "X"}]}}"#).unwrap();
        assert_eq!(broken.into_meta().owner_references[0].uid, "");
    }

    /// Timestamps are read to the second, whatever offset or fraction the server wrote; one
    /// that is not a timestamp is not known, and never fails the object: a deletionTimestamp
    /// still says the object is being deleted.
    #[test]
    fn timestamps_are_read_to_the_second_and_never_fail_a_page() {
        let times = |metadata: &str| {
            let lean: LeanObject =
                serde_json::from_str(&format!(r#"{{"metadata": {metadata}}}"#)).unwrap();
            let meta = lean.into_meta();
            (meta.creation_time, meta.deletion_timestamp, meta.deletion_time)
        };
        let full: PartialObjectMeta<DynamicObject> = serde_json::from_str(POD).unwrap();
        let lean: LeanObject = serde_json::from_str(POD).unwrap();
        let meta = lean.into_meta();
        assert_eq!(meta.creation_time, Some(1_795_597_200)); // 2026-11-25T09:00:00Z
        assert_eq!(meta.deletion_time, Some(1_795_600_800));
        assert_eq!(from_kube_meta(&full.metadata), meta);
        assert_eq!(
            times(r#"{"creationTimestamp": "2026-11-25T10:00:00.999+01:00"}"#),
            (Some(1_795_597_200), false, None)
        );
        for odd in [r#""yesterday""#, "7", "true", "{}", r#"["x"]"#, r#""2026-13-01T00:00:00Z""#] {
            let metadata = format!(r#"{{"creationTimestamp": {odd}, "deletionTimestamp": {odd}}}"#);
            assert_eq!(times(&metadata), (None, true, None), "{odd}");
        }
        assert_eq!(times(r#"{"deletionTimestamp": null}"#), (None, false, None));
    }

    #[test]
    fn malformed_json_is_an_error_not_a_panic() {
        let bad_ones = [
            r#"{"metadata": {"uid": 7}}"#,
            r#"{"metadata": "x"}"#,
            r#"{"metadata": {"ownerReferences": {}}}"#,
            r#"{"metadata": {"ownerReferences": [{"controller": "yes"}]}}"#,
            r#"{"metadata": {"#,
        ];
        for bad in bad_ones {
            assert!(serde_json::from_str::<LeanObject>(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_list_page_decodes_with_its_continue_token() {
        let page = format!(
            r#"{{"kind": "PartialObjectMetadataList", "apiVersion": "meta.k8s.io/v1",
                "metadata": {{"resourceVersion": "9", "continue": "abc", "remainingItemCount": 3}},
                "items": [{POD}, {POD}]}}"#
        );
        let list: ObjectList<LeanObject> = serde_json::from_str(&page).unwrap();
        assert_eq!(list.metadata.continue_.as_deref(), Some("abc"));
        assert_eq!(list.items.len(), 2);
        let (ns, name, uid) = list.items.into_iter().next().unwrap().into_identity();
        assert_eq!((ns.as_str(), name.as_str(), uid.as_str()), ("prod", "web-1", "3c1a"));
    }

    #[test]
    fn requests_are_metadata_only() {
        assert!(LeanObject::metadata_api());
        let ar = ApiResource {
            group: "apps".into(),
            version: "v1".into(),
            api_version: "apps/v1".into(),
            kind: "ReplicaSet".into(),
            plural: "replicasets".into(),
        };
        assert_eq!(
            LeanObject::url_path(&ar, Some("ns")),
            "/apis/apps/v1/namespaces/ns/replicasets"
        );
    }
}
