//! The API server's side of the collector's patches: pure appliers of strategic-merge and
//! JSON-merge bodies to an [`ObjectMeta`], with the server's semantics for the metadata fields
//! the collector touches (GC-SPEC.md §5.1–5.3). [`MemoryCluster`](crate::MemoryCluster) and the
//! HTTP emulator serve PATCH with them; tests use them as upstream's tests use
//! `strategicpatch.StrategicMergePatch`. Their fidelity to a real kube-apiserver is checked by
//! simcluster's fidelity suite.
//!
//! # Examples
//!
//! ```
//! use kube_gc_engine::{ObjectMeta, OwnerReference};
//! use kube_gc_engine::patch::delete_owner_refs_strategic;
//! use kube_gc_testkit::patch::apply_patch;
//!
//! let owner = |uid: &str| OwnerReference { uid: uid.into(), ..OwnerReference::default() };
//! let mut meta = ObjectMeta {
//!     uid: "100".into(),
//!     owner_references: vec![owner("1"), owner("2"), owner("3")],
//!     ..ObjectMeta::default()
//! };
//! apply_patch(&mut meta, &delete_owner_refs_strategic("100", ["2", "3"])).unwrap();
//! assert_eq!(meta.owner_references, vec![owner("1")]);
//! ```

use std::collections::HashSet;

use kube_gc_engine::cluster::{ClusterError, Patch, PatchType};
use kube_gc_engine::meta::{ObjectMeta, OwnerReference};
use kube_gc_engine::patch::{owner_reference_from_json, owner_reference_to_json};
use serde_json::{Map, Value};

/// The apiserver's message for a resourceVersion mismatch (`OptimisticLockErrorMsg`).
const OPTIMISTIC_LOCK_MSG: &str =
    "the object has been modified; please apply your changes to the latest version and try again";

/// Applies `patch` to `meta` by its type; see [`apply_strategic_merge`] and [`apply_json_merge`].
pub fn apply_patch(meta: &mut ObjectMeta, patch: &Patch) -> Result<(), ClusterError> {
    match patch.patch_type {
        PatchType::StrategicMerge => apply_strategic_merge(meta, &patch.body),
        PatchType::JsonMerge => apply_json_merge(meta, &patch.body),
    }
}

/// Applies a strategic merge patch to the metadata fields the collector touches, as the API
/// server would. On error `meta` is unchanged.
///
/// * `metadata.ownerReferences` merges by `uid`: `{"$patch":"delete","uid":…}` removes the
///   reference with that UID (absent: no-op); any other element is merged field by field into
///   the reference with its UID (`null` unsets a field) or, if none, appended; a
///   `{"$patch":"replace"}` element replaces the list with the other elements; `null` removes
///   the list.
/// * `metadata.finalizers` (a `merge` list of strings) is unioned with the patch's, keeping the
///   object's order and appending new ones; `$deleteFromPrimitiveList/finalizers` removes;
///   `null` removes the list.
/// * `metadata.uid` is immutable: a patch that would change it fails with 422
///   ([`ClusterError::Invalid`]); this is what makes the collector's `uid` a precondition.
/// * A non-empty `metadata.resourceVersion` different from the object's fails with 409
///   ([`ClusterError::Conflict`]).
/// * Every other key (`creationTimestamp`, `labels`, `$setElementOrder/…`, …) is ignored: kube-gc
///   does not model those fields. A malformed body is a 400 ([`ClusterError::Other`]).
pub fn apply_strategic_merge(meta: &mut ObjectMeta, body: &Value) -> Result<(), ClusterError> {
    let Some(patch) = patch_metadata(body)? else { return Ok(()) };
    let mut next = meta.clone();
    for (key, value) in patch {
        match key.as_str() {
            "uid" => next.uid = string_field(key, value)?,
            "resourceVersion" => next.resource_version = string_field(key, value)?,
            "ownerReferences" => {
                next.owner_references = merge_owner_references(&next.owner_references, value)?;
            }
            "finalizers" => next.finalizers = merge_strings(&next.finalizers, value)?,
            _ => {}
        }
    }
    // Deletions after merges, whatever the key order of the body.
    if let Some(value) = patch.get("$deleteFromPrimitiveList/finalizers") {
        let remove = string_list("$deleteFromPrimitiveList/finalizers", value)?;
        next.finalizers.retain(|f| !remove.contains(f));
    }
    commit(meta, next)
}

/// Applies a JSON merge patch (RFC 7386) to the metadata fields the collector touches, as the
/// API server would. On error `meta` is unchanged.
///
/// * `metadata.ownerReferences` and `metadata.finalizers` are replaced whole; `null` removes them.
/// * A non-empty `metadata.resourceVersion` different from the object's fails with 409
///   ([`ClusterError::Conflict`]): the optimistic precondition of the collector's fallbacks.
///   An empty one means "unconditional", as on the server.
/// * `metadata.uid` is immutable (422, [`ClusterError::Invalid`]).
/// * Every other key is ignored; a malformed body is a 400 ([`ClusterError::Other`]).
pub fn apply_json_merge(meta: &mut ObjectMeta, body: &Value) -> Result<(), ClusterError> {
    let Some(patch) = patch_metadata(body)? else { return Ok(()) };
    let mut next = meta.clone();
    for (key, value) in patch {
        match key.as_str() {
            "uid" => next.uid = string_field(key, value)?,
            "resourceVersion" => next.resource_version = string_field(key, value)?,
            "ownerReferences" => {
                next.owner_references = match value {
                    Value::Null => Vec::new(),
                    Value::Array(items) => {
                        items.iter().map(owner_reference_from_json).collect::<Result<_, _>>()?
                    }
                    other => {
                        return Err(bad_request(format!(
                            "metadata.ownerReferences: expected a list, got {other}"
                        )));
                    }
                };
            }
            "finalizers" => {
                next.finalizers = match value {
                    Value::Null => Vec::new(),
                    other => string_list(key, other)?,
                };
            }
            _ => {}
        }
    }
    commit(meta, next)
}

/// The server-side checks common to both patch types, then the write.
fn commit(meta: &mut ObjectMeta, mut next: ObjectMeta) -> Result<(), ClusterError> {
    // The update's optimistic-concurrency check comes before validation, as in the store's
    // GuaranteedUpdate.
    if !next.resource_version.is_empty() && next.resource_version != meta.resource_version {
        return Err(ClusterError::Conflict(OPTIMISTIC_LOCK_MSG.to_owned()));
    }
    if next.uid != meta.uid {
        return Err(ClusterError::Invalid(format!(
            "metadata.uid: Invalid value: {:?}: field is immutable",
            next.uid
        )));
    }
    // The server, not the client, sets the resulting resourceVersion.
    next.resource_version = meta.resource_version.clone();
    *meta = next;
    Ok(())
}

/// `body.metadata`, or `None` if the body does not touch it.
fn patch_metadata(body: &Value) -> Result<Option<&Map<String, Value>>, ClusterError> {
    let top = body
        .as_object()
        .ok_or_else(|| bad_request(format!("patch body must be a JSON object, got {body}")))?;
    match top.get("metadata") {
        None => Ok(None),
        Some(Value::Object(m)) => Ok(Some(m)),
        Some(other) => Err(bad_request(format!("metadata: expected an object, got {other}"))),
    }
}

fn string_field(key: &str, value: &Value) -> Result<String, ClusterError> {
    match value {
        Value::Null => Ok(String::new()),
        Value::String(s) => Ok(s.clone()),
        other => Err(bad_request(format!("metadata.{key}: expected a string, got {other}"))),
    }
}

fn string_list(key: &str, value: &Value) -> Result<Vec<String>, ClusterError> {
    let items = value
        .as_array()
        .ok_or_else(|| bad_request(format!("metadata.{key}: expected a list, got {value}")))?;
    items
        .iter()
        .map(|item| match item {
            Value::String(s) => Ok(s.clone()),
            other => Err(bad_request(format!("metadata.{key}: expected strings, got {other}"))),
        })
        .collect()
}

/// Strategic merge of a `merge` list of strings: union, first occurrence kept.
fn merge_strings(original: &[String], value: &Value) -> Result<Vec<String>, ClusterError> {
    if value.is_null() {
        return Ok(Vec::new());
    }
    let patch = string_list("finalizers", value)?;
    let mut seen = HashSet::new();
    Ok(original.iter().chain(patch.iter()).filter(|s| seen.insert(s.as_str())).cloned().collect())
}

/// Strategic merge of `ownerReferences` (`patchStrategy=merge`, `patchMergeKey=uid`).
fn merge_owner_references(
    original: &[OwnerReference],
    value: &Value,
) -> Result<Vec<OwnerReference>, ClusterError> {
    let items = match value {
        Value::Null => return Ok(Vec::new()),
        Value::Array(items) => items,
        other => {
            return Err(bad_request(format!(
                "metadata.ownerReferences: expected a list, got {other}"
            )));
        }
    };
    let mut merged: Vec<Map<String, Value>> = original
        .iter()
        .map(|r| match owner_reference_to_json(r) {
            Value::Object(m) => m,
            _ => unreachable!("owner_reference_to_json builds an object"),
        })
        .collect();
    let mut replace = false;
    let mut upserts = Vec::new();
    for item in items {
        let element = item.as_object().ok_or_else(|| {
            bad_request(format!("metadata.ownerReferences: expected objects, got {item}"))
        })?;
        match element.get("$patch").map(|d| d.as_str()) {
            Some(Some("delete")) => {
                let uid = merge_key(element)?;
                merged.retain(|r| r.get("uid").and_then(Value::as_str) != Some(uid));
            }
            Some(Some("replace")) => replace = true,
            None | Some(Some("merge")) => {
                let mut element = element.clone();
                element.shift_remove("$patch");
                upserts.push(element);
            }
            Some(other) => {
                return Err(bad_request(format!("unknown patch type: {}", other.unwrap_or("?"))));
            }
        }
    }
    if replace {
        merged = upserts.into_iter().map(without_nulls).collect();
    } else {
        let patch_order: Vec<String> =
            upserts.iter().map(|e| merge_key(e).map(str::to_owned)).collect::<Result<_, _>>()?;
        for element in upserts {
            let uid = merge_key(&element)?.to_owned();
            match merged.iter_mut().find(|r| r.get("uid").and_then(Value::as_str) == Some(&uid)) {
                Some(existing) => {
                    for (k, v) in element {
                        if v.is_null() {
                            existing.shift_remove(&k);
                        } else {
                            existing.insert(k, v);
                        }
                    }
                }
                None => merged.push(without_nulls(element)),
            }
        }
        merged = apiserver_order(merged, &patch_order, original);
    }
    merged.into_iter().map(|m| owner_reference_from_json(&Value::Object(m))).collect()
}

/// Orders a list merged by UID as the API server's strategic merge does (strategicpatch's
/// `normalizeElementOrder` + `mergeSortedSlice`, without `$setElementOrder`): the patch's items
/// in the patch's order, the others in the object's order, interleaved by the object's order
/// where both were in the object, a patch item first otherwise, so that new owners come before
/// the existing ones (simcluster's fidelity suite pins this against a real server).
fn apiserver_order(
    merged: Vec<Map<String, Value>>,
    patch_order: &[String],
    original: &[OwnerReference],
) -> Vec<Map<String, Value>> {
    let uid =
        |m: &Map<String, Value>| m.get("uid").and_then(Value::as_str).unwrap_or("").to_owned();
    let in_patch = |k: &str| patch_order.iter().position(|p| p == k);
    let in_object = |k: &str| original.iter().position(|r| r.uid == k);
    let (mut from_patch, mut object_only): (Vec<_>, Vec<_>) =
        merged.into_iter().partition(|m| in_patch(&uid(m)).is_some());
    from_patch.sort_by_key(|m| in_patch(&uid(m)));
    object_only.sort_by_key(|m| in_object(&uid(m)));
    let mut out = Vec::with_capacity(from_patch.len() + object_only.len());
    let mut left = object_only.into_iter().peekable();
    let mut right = from_patch.into_iter().peekable();
    loop {
        let take_left = match (left.peek(), right.peek()) {
            (None, None) => break,
            (Some(_), None) => true,
            (None, Some(_)) => false,
            (Some(l), Some(r)) => match (in_object(&uid(l)), in_object(&uid(r))) {
                (Some(li), Some(ri)) => li < ri,
                _ => false,
            },
        };
        out.extend(if take_left { left.next() } else { right.next() });
    }
    out
}

fn merge_key(element: &Map<String, Value>) -> Result<&str, ClusterError> {
    element.get("uid").and_then(Value::as_str).ok_or_else(|| {
        bad_request(format!(
            "map: {} does not contain declared merge key: uid",
            Value::Object(element.clone())
        ))
    })
}

fn without_nulls(mut m: Map<String, Value>) -> Map<String, Value> {
    m.retain(|_, v| !v.is_null());
    m
}

fn bad_request(message: String) -> ClusterError {
    ClusterError::Other { code: 400, message }
}

#[cfg(test)]
mod tests;
