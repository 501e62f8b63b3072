//! The patch bodies the collector sends (upstream's `patch.go`); GC-SPEC.md §5.1–5.3.
//!
//! The collector changes objects in three ways, each a small patch of `metadata`:
//!
//! | change | first try | fallback (on 415 from a custom resource) |
//! |---|---|---|
//! | drop owner references (§5.1) | [`delete_owner_refs_strategic`] | [`delete_owner_refs_json_merge`] |
//! | unblock owner references (§5.2) | [`unblock_owner_refs_strategic`] | [`unblock_owner_refs_json_merge`] |
//! | remove a finalizer (§5.3) | — | [`remove_finalizer_json_merge`] only |
//!
//! The builders are pure and produce upstream's bodies byte for byte when serialized (the
//! workspace enables serde_json's `preserve_order` so that keys keep upstream's order, e.g.
//! `uid` before `ownerReferences`). Owner references serialize as the API does: `apiVersion`,
//! `kind`, `name`, `uid`, then `controller` and `blockOwnerDeletion` only when set.
//!
//! Applying them is the API server's job: `kube_gc_testkit::patch` holds appliers with the
//! server's semantics for the fields the collector touches, and tests them against these bodies.
//!
//! # Invariants
//!
//! * A strategic-merge body carries the dependent's UID (when known), which acts as a
//!   precondition: the server rejects a patch that would change `metadata.uid` (422), so a
//!   patch meant for a deleted object never lands on its successor of the same name.
//! * A JSON-merge body carries the `resourceVersion` its owner references or finalizers were
//!   computed from, which the server checks (409 on mismatch): JSON merge replaces whole lists,
//!   so it must not be applied over a version it did not see.
//!
//! # Upstream
//!
//! `GenerateDeleteOwnerRefStrategicMergeBytes` and `generateDeleteOwnerRefJSONMergePatch`
//! (`patch.go`, `k8s.io/component-helpers`), `unblockOwnerReferencesStrategicMergePatch` and
//! `unblockOwnerReferencesJSONMergePatch` (`patch.go`), `removeFinalizer` (`garbagecollector.go`).
//!
//! # Examples
//!
//! ```
//! use kube_gc_engine::patch::delete_owner_refs_strategic;
//!
//! let patch = delete_owner_refs_strategic("100", ["2", "3"]);
//! assert_eq!(
//!     patch.body.to_string(),
//!     r#"{"metadata":{"uid":"100","ownerReferences":[{"$patch":"delete","uid":"2"},{"$patch":"delete","uid":"3"}]}}"#
//! );
//! ```

use std::collections::HashSet;
use std::fmt::Display;

use serde_json::{Map, Value, json};

use crate::cluster::{ClusterError, Patch, PatchType};
use crate::error::IngestError;
use crate::identity::{ObjectType, OwnerRef, Uid};
use crate::meta::OwnerReference;

// ---------------------------------------------------------------------------------------------
// Conversions
// ---------------------------------------------------------------------------------------------

/// The API form (strings) of a graph owner reference.
pub fn owner_ref_to_api(owner: &OwnerRef) -> OwnerReference {
    OwnerReference {
        api_version: owner.ty.api_version().to_owned(),
        kind: owner.ty.kind().to_owned(),
        name: owner.name.clone(),
        uid: owner.uid.to_string(),
        controller: owner.controller,
        block_owner_deletion: owner.block_owner_deletion,
    }
}

/// The graph form (interned type, parsed UID) of an API owner reference. Never fails: any type
/// and UID text is interned, past the caps of [`crate::identity`] too, so it is for one-shot
/// tools (`kubectl gc`) and tests; a long-running process interns live references with
/// [`try_owner_ref_from_api`].
pub fn owner_ref_from_api(owner: &OwnerReference) -> OwnerRef {
    OwnerRef {
        ty: ObjectType::new(&owner.api_version, &owner.kind),
        name: owner.name.clone(),
        uid: Uid::parse(&owner.uid),
        controller: owner.controller,
        block_owner_deletion: owner.block_owner_deletion,
    }
}

/// As [`owner_ref_from_api`], for untrusted text: interned as ingestion interns it
/// ([`ObjectType::try_new`], [`Uid::try_parse`]), so a type or non-UUID UID past the caps of
/// [`crate::identity`] is refused ([`IngestError::TypeCapacity`] or
/// [`IngestError::UidCapacity`]) and nothing is interned for it.
pub fn try_owner_ref_from_api(owner: &OwnerReference) -> Result<OwnerRef, IngestError> {
    Ok(OwnerRef {
        ty: ObjectType::try_new(&owner.api_version, &owner.kind)?,
        name: owner.name.clone(),
        uid: Uid::try_parse(&owner.uid)?,
        controller: owner.controller,
        block_owner_deletion: owner.block_owner_deletion,
    })
}

/// An owner reference as the API serializes it: `apiVersion`, `kind`, `name`, `uid` always (Go
/// strings are not `omitempty` there), then `controller` and `blockOwnerDeletion` if set.
pub fn owner_reference_to_json(owner: &OwnerReference) -> Value {
    let mut m = Map::new();
    m.insert("apiVersion".into(), owner.api_version.clone().into());
    m.insert("kind".into(), owner.kind.clone().into());
    m.insert("name".into(), owner.name.clone().into());
    m.insert("uid".into(), owner.uid.clone().into());
    if let Some(controller) = owner.controller {
        m.insert("controller".into(), controller.into());
    }
    if let Some(block) = owner.block_owner_deletion {
        m.insert("blockOwnerDeletion".into(), block.into());
    }
    Value::Object(m)
}

/// Decodes an owner reference from its API JSON. Missing (or `null`) strings decode as empty and
/// missing flags as unset, as Go's decoder does; unknown fields are ignored; a value of the
/// wrong type is a 400.
pub fn owner_reference_from_json(value: &Value) -> Result<OwnerReference, ClusterError> {
    let m = value
        .as_object()
        .ok_or_else(|| bad_request(format!("ownerReferences: expected an object, got {value}")))?;
    let string = |key: &str| -> Result<String, ClusterError> {
        match m.get(key) {
            None | Some(Value::Null) => Ok(String::new()),
            Some(Value::String(s)) => Ok(s.clone()),
            Some(other) => {
                Err(bad_request(format!("ownerReferences.{key}: expected a string, got {other}")))
            }
        }
    };
    let flag = |key: &str| -> Result<Option<bool>, ClusterError> {
        match m.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::Bool(b)) => Ok(Some(*b)),
            Some(other) => {
                Err(bad_request(format!("ownerReferences.{key}: expected a bool, got {other}")))
            }
        }
    };
    Ok(OwnerReference {
        api_version: string("apiVersion")?,
        kind: string("kind")?,
        name: string("name")?,
        uid: string("uid")?,
        controller: flag("controller")?,
        block_owner_deletion: flag("blockOwnerDeletion")?,
    })
}

// ---------------------------------------------------------------------------------------------
// Builders
// ---------------------------------------------------------------------------------------------

/// §5.1, first try: the strategic merge patch that deletes the references to `owner_uids` from
/// the dependent whose UID is `dependent_uid`:
///
/// `{"metadata":{"uid":"<dep>","ownerReferences":[{"$patch":"delete","uid":"<owner>"},…]}}`
///
/// `ownerReferences` merges by `uid`, so each element deletes one reference (or nothing, if it
/// is already gone); `uid` makes the patch fail (422) on an object recreated under the same name.
///
/// Divergence from upstream: an empty `owner_uids` gives `"ownerReferences":[]` (a no-op),
/// where upstream marshals its nil slice as `null`, which would delete *every* reference.
/// Upstream never calls it with none; neither should the collector
/// (`delete_owner_refs_with_no_uids_is_a_no_op` pins the difference).
pub fn delete_owner_refs_strategic<U: Display>(
    dependent_uid: impl Display,
    owner_uids: impl IntoIterator<Item = U>,
) -> Patch {
    let deletes: Vec<Value> = owner_uids
        .into_iter()
        .map(|uid| json!({"$patch": "delete", "uid": uid.to_string()}))
        .collect();
    strategic(json!({"metadata": {"uid": dependent_uid.to_string(), "ownerReferences": deletes}}))
}

/// §5.1, fallback: the JSON merge patch that keeps every reference of `current_refs` whose UID is
/// not in `remove_uids`, at `resource_version` (the version `current_refs` were read at):
///
/// `{"metadata":{"resourceVersion":"<rv>","ownerReferences":[…remaining refs…]}}`, with
/// `"ownerReferences":null` when none remain (which removes the field).
pub fn delete_owner_refs_json_merge<U: Display>(
    resource_version: &str,
    current_refs: &[OwnerReference],
    remove_uids: impl IntoIterator<Item = U>,
) -> Patch {
    let remove: HashSet<String> = remove_uids.into_iter().map(|u| u.to_string()).collect();
    let remaining: Vec<Value> = current_refs
        .iter()
        .filter(|r| !remove.contains(&r.uid))
        .map(owner_reference_to_json)
        .collect();
    json_merge(json!({"metadata": {
        "resourceVersion": resource_version,
        "ownerReferences": array_or_null(remaining),
    }}))
}

/// §5.2, first try: the strategic merge patch that sets `blockOwnerDeletion: false` on every
/// reference of `owners` that has `blockOwnerDeletion: true`, each copied in full:
///
/// `{"metadata":{"uid":"<item>","creationTimestamp":null,"ownerReferences":[…]}}`
///
/// This is upstream's JSON of a `MetadataOnlyObject`, so it keeps that type's quirks: `uid` is
/// omitted when empty (`omitempty`), `ownerReferences` is omitted when no reference blocks, and
/// `"creationTimestamp":null` is always there (a struct is never `omitempty` in Go). The
/// server ignores a client's `creationTimestamp` on update, so the `null` is harmless.
///
/// An element whose UID the object no longer has would be *added* by the server: the collector
/// passes the references its decision read, and pins the patch to their resourceVersion.
pub fn unblock_owner_refs_strategic(item_uid: impl Display, owners: &[OwnerRef]) -> Patch {
    let blocking: Vec<Value> = owners
        .iter()
        .filter(|owner| owner.blocks())
        .map(|owner| owner_reference_to_json(&unblocked(owner)))
        .collect();
    let mut meta = Map::new();
    let uid = item_uid.to_string();
    if !uid.is_empty() {
        meta.insert("uid".into(), uid.into());
    }
    meta.insert("creationTimestamp".into(), Value::Null);
    if !blocking.is_empty() {
        meta.insert("ownerReferences".into(), Value::Array(blocking));
    }
    strategic(json!({"metadata": meta}))
}

/// §5.2, fallback: the JSON merge patch that sets *every* reference of `owners` to
/// `blockOwnerDeletion: false`, at `resource_version`, the version `owners` were read at (JSON
/// merge replaces the whole list: owners of another version would undo what changed since):
///
/// `{"metadata":{"resourceVersion":"<rv>","ownerReferences":[…all owners…]}}` (`null` if none).
pub fn unblock_owner_refs_json_merge(resource_version: &str, owners: &[OwnerReference]) -> Patch {
    let owners: Vec<Value> = owners
        .iter()
        .map(|owner| {
            owner_reference_to_json(&OwnerReference {
                block_owner_deletion: Some(false),
                ..owner.clone()
            })
        })
        .collect();
    json_merge(json!({"metadata": {
        "resourceVersion": resource_version,
        "ownerReferences": array_or_null(owners),
    }}))
}

/// §5.3: the JSON merge patch that leaves `remaining_finalizers` (the object's finalizers
/// without the one being removed, in order) at `resource_version`, the version they were read at:
///
/// `{"metadata":{"resourceVersion":"<rv>","finalizers":[…]}}`, `"finalizers":null` when none left.
pub fn remove_finalizer_json_merge(
    resource_version: &str,
    remaining_finalizers: &[String],
) -> Patch {
    let finalizers: Vec<Value> = remaining_finalizers.iter().map(|f| f.clone().into()).collect();
    json_merge(json!({"metadata": {
        "resourceVersion": resource_version,
        "finalizers": array_or_null(finalizers),
    }}))
}

/// Pins a strategic merge patch to `resource_version`: the server then applies it only to that
/// exact version of the object (409 otherwise), as it does for a JSON merge body carrying one.
/// For a patch decided from a copy of the object that may be stale (the graph's), so that it
/// never lands on a version the decision did not see. An empty version leaves the patch as it is.
pub fn at_resource_version(mut patch: Patch, resource_version: &str) -> Patch {
    if !resource_version.is_empty()
        && let Some(meta) = patch.body.get_mut("metadata").and_then(Value::as_object_mut)
    {
        meta.insert("resourceVersion".into(), resource_version.into());
    }
    patch
}

fn unblocked(owner: &OwnerRef) -> OwnerReference {
    OwnerReference { block_owner_deletion: Some(false), ..owner_ref_to_api(owner) }
}

fn strategic(body: Value) -> Patch {
    Patch { patch_type: PatchType::StrategicMerge, body }
}

fn json_merge(body: Value) -> Patch {
    Patch { patch_type: PatchType::JsonMerge, body }
}

/// A Go nil slice marshals as `null`; the collector's lists are nil when empty.
fn array_or_null(items: Vec<Value>) -> Value {
    if items.is_empty() { Value::Null } else { Value::Array(items) }
}

fn bad_request(message: String) -> ClusterError {
    ClusterError::Other { code: 400, message }
}
