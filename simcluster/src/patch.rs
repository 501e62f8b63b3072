//! PATCH bodies applied to whole objects: JSON patch (RFC 6902), JSON merge patch (RFC 7386)
//! and strategic merge patch.
//!
//! Strategic merge is emulated for what kube-gc and most clients send: `metadata.ownerReferences`
//! merges by `uid` (with `$patch: delete`) and `metadata.finalizers` is a merge list (with
//! `$deleteFromPrimitiveList/finalizers`), both through testkit's
//! [`kube_gc_testkit::patch::apply_strategic_merge`], which also rejects a `metadata.uid` change
//! (422) and checks a `metadata.resourceVersion` (409). Everything else merges as a JSON merge
//! patch (maps merge, `null` deletes, lists are replaced): lists with merge keys outside
//! metadata (`spec.containers` by `name`, …) are *not* merged by key. Custom resources refuse
//! strategic merge with 415, as the real server does.
//!
//! The resourceVersion and uid checks common to every patch type live in the store's update
//! path ([`crate::store`]), which every patch goes through.

use kube_gc_engine::ClusterError;
use kube_gc_engine::ObjectMeta;
use kube_gc_engine::patch::{owner_reference_from_json, owner_reference_to_json};
use kube_gc_testkit::patch::apply_strategic_merge;
use serde_json::{Map, Value};

use crate::error::{Error, Result};
use crate::resources::ResourceDef;

/// The patch types, by their `Content-Type`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PatchType {
    /// `application/json-patch+json` (RFC 6902, with `test`).
    Json,
    /// `application/merge-patch+json` (RFC 7386).
    Merge,
    /// `application/strategic-merge-patch+json`.
    Strategic,
}

impl PatchType {
    /// The patch type of a request's `Content-Type`; 415 for anything else (server-side apply
    /// included, which simcluster does not implement).
    pub fn from_content_type(content_type: &str) -> Result<PatchType> {
        let media = content_type.split(';').next().unwrap_or_default().trim();
        match media {
            "application/json-patch+json" => Ok(PatchType::Json),
            "application/merge-patch+json" => Ok(PatchType::Merge),
            "application/strategic-merge-patch+json" => Ok(PatchType::Strategic),
            other => Err(Error::UnsupportedMediaType(format!(
                "the body of the request was in an unknown format ({other}) - accepted media types include: application/json-patch+json, application/merge-patch+json, application/strategic-merge-patch+json"
            ))),
        }
    }
}

/// Applies `body` of type `patch_type` to `current` (a whole object), giving the object to
/// store (before the store's update checks).
pub(crate) fn apply(
    def: &ResourceDef,
    patch_type: PatchType,
    current: &Value,
    body: &[u8],
) -> Result<Value> {
    match patch_type {
        PatchType::Json => {
            let ops: json_patch::Patch = serde_json::from_slice(body)
                .map_err(|e| Error::BadRequest(format!("invalid JSON patch: {e}")))?;
            let mut doc = current.clone();
            // The apiserver answers a failed `test` (or any inapplicable operation) with 422.
            json_patch::patch(&mut doc, &ops).map_err(|e| {
                Error::Invalid(format!(
                    "the server rejected our request due to an error in our request: {e}"
                ))
            })?;
            Ok(doc)
        }
        PatchType::Merge => {
            let patch: Value = parse_object(body)?;
            let mut doc = current.clone();
            json_patch::merge(&mut doc, &patch);
            Ok(doc)
        }
        PatchType::Strategic => {
            if def.custom {
                return Err(Error::UnsupportedMediaType(
                    "the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml".into(),
                ));
            }
            let patch = parse_object(body)?;
            strategic(current, &patch)
        }
    }
}

fn parse_object(body: &[u8]) -> Result<Value> {
    let v: Value = serde_json::from_slice(body)
        .map_err(|e| Error::BadRequest(format!("invalid patch body: {e}")))?;
    if !v.is_object() {
        return Err(Error::BadRequest(format!("patch body must be a JSON object, got {v}")));
    }
    Ok(v)
}

fn strategic(current: &Value, patch: &Value) -> Result<Value> {
    // 1. ownerReferences, finalizers, uid and resourceVersion through the engine's applier.
    let mut meta = object_meta(current)?;
    apply_strategic_merge(&mut meta, patch).map_err(|e| match e {
        ClusterError::Conflict(m) => {
            Error::Conflict { resource: String::new(), name: meta_name(current), message: m }
        }
        ClusterError::Invalid(m) => Error::Invalid(m),
        other => Error::BadRequest(other.to_string()),
    })?;
    // 2. Everything else as a merge, `$` directives dropped.
    let mut generic = patch.clone();
    if let Some(Value::Object(m)) = generic.get_mut("metadata") {
        for key in ["ownerReferences", "finalizers", "uid", "resourceVersion"] {
            m.remove(key);
        }
    }
    let mut doc = current.clone();
    merge_without_directives(&mut doc, &generic);
    // 3. The engine's lists back into the object.
    let m = doc
        .as_object_mut()
        .and_then(|o| o.get_mut("metadata"))
        .and_then(Value::as_object_mut)
        .ok_or_else(|| Error::Internal("stored object without metadata".into()))?;
    set_list(
        m,
        "ownerReferences",
        meta.owner_references.iter().map(owner_reference_to_json).collect(),
    );
    set_list(m, "finalizers", meta.finalizers.into_iter().map(Value::String).collect());
    Ok(doc)
}

fn set_list(m: &mut Map<String, Value>, key: &str, items: Vec<Value>) {
    if items.is_empty() {
        m.remove(key);
    } else {
        m.insert(key.to_owned(), Value::Array(items));
    }
}

/// RFC 7386 merge that skips strategic-merge directives (`$patch`, `$setElementOrder/…`,
/// `$retainKeys`, `$deleteFromPrimitiveList/…`).
fn merge_without_directives(doc: &mut Value, patch: &Value) {
    let Value::Object(patch) = patch else {
        *doc = patch.clone();
        return;
    };
    if !doc.is_object() {
        *doc = Value::Object(Map::new());
    }
    let target = doc.as_object_mut().expect("made an object above");
    for (key, value) in patch {
        if key.starts_with('$') {
            continue;
        }
        if value.is_null() {
            target.remove(key);
        } else {
            merge_without_directives(target.entry(key.clone()).or_insert(Value::Null), value);
        }
    }
}

fn meta_name(obj: &Value) -> String {
    obj.pointer("/metadata/name").and_then(Value::as_str).unwrap_or_default().to_owned()
}

/// The engine's view of an object's metadata.
pub(crate) fn object_meta(obj: &Value) -> Result<ObjectMeta> {
    let meta = obj.get("metadata").and_then(Value::as_object);
    let text = |key: &str| {
        meta.and_then(|m| m.get(key)).and_then(Value::as_str).unwrap_or_default().to_owned()
    };
    let time = |key: &str| {
        meta.and_then(|m| m.get(key)).and_then(Value::as_str).and_then(crate::time::parse_rfc3339)
    };
    let owner_references = match meta.and_then(|m| m.get("ownerReferences")) {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(items)) => items
            .iter()
            .map(owner_reference_from_json)
            .collect::<Result<_, _>>()
            .map_err(|e| Error::BadRequest(e.to_string()))?,
        Some(other) => {
            return Err(Error::BadRequest(format!(
                "metadata.ownerReferences: expected a list, got {other}"
            )));
        }
    };
    Ok(ObjectMeta {
        uid: text("uid"),
        name: text("name"),
        namespace: text("namespace"),
        resource_version: text("resourceVersion"),
        owner_references,
        finalizers: string_list(meta.and_then(|m| m.get("finalizers")))?,
        deletion_timestamp: meta
            .and_then(|m| m.get("deletionTimestamp"))
            .is_some_and(|v| !v.is_null()),
        creation_time: time("creationTimestamp"),
        deletion_time: time("deletionTimestamp"),
    })
}

/// A list of strings (`finalizers`); absent or `null` is empty.
pub(crate) fn string_list(value: Option<&Value>) -> Result<Vec<String>> {
    match value {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::Array(items)) => items
            .iter()
            .map(|i| {
                i.as_str().map(str::to_owned).ok_or_else(|| {
                    Error::BadRequest(format!("expected a list of strings, got {i}"))
                })
            })
            .collect(),
        Some(other) => Err(Error::BadRequest(format!("expected a list of strings, got {other}"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod() -> Value {
        json!({"metadata": {"name": "p", "namespace": "ns", "uid": "u1", "resourceVersion": "7",
            "labels": {"a": "1"},
            "finalizers": ["x/y"],
            "ownerReferences": [
                {"apiVersion": "v1", "kind": "A", "name": "a", "uid": "o1"},
                {"apiVersion": "v1", "kind": "B", "name": "b", "uid": "o2", "controller": true}]},
            "spec": {"containers": [{"name": "c"}]}})
    }

    fn builtin() -> ResourceDef {
        ResourceDef::new("v1", "pods", "Pod", true)
    }

    #[test]
    fn strategic_merge_should_delete_owner_references_by_uid() {
        let body = br#"{"metadata":{"uid":"u1","ownerReferences":[{"$patch":"delete","uid":"o1"}],"labels":{"b":"2"}}}"#;
        let out = apply(&builtin(), PatchType::Strategic, &pod(), body).unwrap();
        assert_eq!(out["metadata"]["ownerReferences"].as_array().unwrap().len(), 1);
        assert_eq!(out["metadata"]["ownerReferences"][0]["uid"], "o2");
        assert_eq!(out["metadata"]["labels"], json!({"a": "1", "b": "2"}));
        assert_eq!(out["metadata"]["finalizers"], json!(["x/y"]));
    }

    #[test]
    fn strategic_merge_should_put_new_owner_references_first() {
        let body = br#"{"metadata":{"ownerReferences":[{"apiVersion":"v1","kind":"C","name":"c","uid":"o3"}]}}"#;
        let out = apply(&builtin(), PatchType::Strategic, &pod(), body).unwrap();
        let uids: Vec<&str> = out["metadata"]["ownerReferences"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["uid"].as_str().unwrap())
            .collect();
        assert_eq!(uids, ["o3", "o1", "o2"]);
        // A patch naming every reference orders them as it lists them.
        let body = br#"{"metadata":{"ownerReferences":[{"apiVersion":"v1","kind":"B","name":"b","uid":"o2"},{"apiVersion":"v1","kind":"A","name":"a","uid":"o1"}]}}"#;
        let out = apply(&builtin(), PatchType::Strategic, &pod(), body).unwrap();
        assert_eq!(out["metadata"]["ownerReferences"][0]["uid"], "o2");
    }

    #[test]
    fn strategic_merge_should_union_finalizers_and_refuse_a_uid_change() {
        let body = br#"{"metadata":{"finalizers":["z"]}}"#;
        let out = apply(&builtin(), PatchType::Strategic, &pod(), body).unwrap();
        assert_eq!(out["metadata"]["finalizers"], json!(["x/y", "z"]));
        let body = br#"{"metadata":{"uid":"other"}}"#;
        let err = apply(&builtin(), PatchType::Strategic, &pod(), body).unwrap_err();
        assert_eq!(err.code(), 422);
    }

    #[test]
    fn strategic_merge_on_a_custom_resource_should_be_415() {
        let def = ResourceDef::new("example.com/v1", "widgets", "Widget", true).custom();
        let err = apply(&def, PatchType::Strategic, &pod(), b"{}").unwrap_err();
        assert_eq!(err.code(), 415);
    }

    #[test]
    fn json_merge_should_replace_lists_and_null_should_delete() {
        let body = br#"{"metadata":{"finalizers":null,"ownerReferences":[{"apiVersion":"v1","kind":"C","name":"c","uid":"o3"}]}}"#;
        let out = apply(&builtin(), PatchType::Merge, &pod(), body).unwrap();
        assert!(out["metadata"].get("finalizers").is_none());
        assert_eq!(out["metadata"]["ownerReferences"][0]["uid"], "o3");
    }

    #[test]
    fn json_patch_test_failure_should_be_422() {
        let ok = br#"[{"op":"test","path":"/metadata/uid","value":"u1"},{"op":"remove","path":"/metadata/finalizers"}]"#;
        let out = apply(&builtin(), PatchType::Json, &pod(), ok).unwrap();
        assert!(out["metadata"].get("finalizers").is_none());
        let bad = br#"[{"op":"test","path":"/metadata/uid","value":"nope"}]"#;
        assert_eq!(apply(&builtin(), PatchType::Json, &pod(), bad).unwrap_err().code(), 422);
    }

    #[test]
    fn content_types_should_map_to_patch_types() {
        assert_eq!(
            PatchType::from_content_type("application/merge-patch+json; charset=utf-8").unwrap(),
            PatchType::Merge
        );
        assert_eq!(
            PatchType::from_content_type("application/apply-patch+yaml").unwrap_err().code(),
            415
        );
    }
}
