//! Checks and small helpers of the write path: scope, names, owner references, stored bytes,
//! and the errors the apiserver answers with.

use super::*;

/// The namespace an object goes to: the URL's for namespaced resources (the body's must agree),
/// none for cluster-scoped ones.
pub(super) fn scope(r: &Resolved, url: Option<&str>, body: Option<&str>) -> Result<Option<String>> {
    if !r.def.namespaced {
        return Ok(None);
    }
    let body = body.filter(|b| !b.is_empty());
    match (url, body) {
        (Some(u), Some(b)) if u != b => Err(Error::BadRequest(
            "the namespace of the provided object does not match the namespace sent on the request"
                .into(),
        )),
        (Some(u), _) => Ok(Some(u.to_owned())),
        (None, Some(b)) => Ok(Some(b.to_owned())),
        (None, None) => Err(Error::BadRequest(format!(
            "an empty namespace may not be set when a resource name is provided for {}",
            r.def.group_resource()
        ))),
    }
}

pub(super) fn validate_name(name: &str) -> Result<()> {
    if name.contains('/') || name.contains('%') || name == "." || name == ".." {
        return Err(Error::Invalid(format!(
            "metadata.name: Invalid value: {name:?}: may not contain '/' or '%'"
        )));
    }
    Ok(())
}

/// The checks `ValidateOwnerReferences` makes that matter to a collector: every reference has
/// apiVersion, kind, name and uid; at most one is the controller.
pub(super) fn validate_owner_references(meta: &Map<String, Value>) -> Result<()> {
    let Some(refs) = meta.get("ownerReferences").filter(|v| !v.is_null()) else { return Ok(()) };
    let refs = refs
        .as_array()
        .ok_or_else(|| Error::BadRequest("metadata.ownerReferences: expected a list".into()))?;
    let mut controllers = 0;
    for (i, r) in refs.iter().enumerate() {
        for field in ["apiVersion", "kind", "name", "uid"] {
            if r.get(field).and_then(Value::as_str).is_none_or(str::is_empty) {
                return Err(Error::Invalid(format!(
                    "metadata.ownerReferences[{i}].{field}: Invalid value: \"\": {field} must not be empty"
                )));
            }
        }
        if r.get("controller") == Some(&Value::Bool(true)) {
            controllers += 1;
        }
    }
    if controllers > 1 {
        return Err(Error::Invalid(
            "metadata.ownerReferences: Invalid value: Only one reference can have Controller set to true".into(),
        ));
    }
    Ok(())
}

pub(super) fn metadata_mut(obj: &mut Value) -> Result<&mut Map<String, Value>> {
    let o = obj
        .as_object_mut()
        .ok_or_else(|| Error::BadRequest("the object must be a JSON object".into()))?;
    let meta = o.entry("metadata").or_insert_with(|| Value::Object(Map::new()));
    meta.as_object_mut().ok_or_else(|| Error::BadRequest("metadata must be an object".into()))
}

pub(crate) fn parse_stored(bytes: &[u8]) -> Result<Value> {
    serde_json::from_slice(bytes)
        .map_err(|e| Error::Internal(format!("corrupt stored object: {e}")))
}

/// `obj` with `apiVersion` and `kind` of `def` first.
pub(crate) fn with_type(def: &ResourceDef, obj: Value) -> Value {
    let mut out = Map::new();
    out.insert("apiVersion".into(), def.api_version().into());
    out.insert("kind".into(), def.kind.clone().into());
    if let Value::Object(m) = obj {
        out.extend(m);
    }
    Value::Object(out)
}

pub(super) fn not_found(r: &Resolved, name: &str) -> Error {
    Error::NotFound { resource: r.def.group_resource(), name: name.to_owned() }
}

pub(super) fn gone_resource(r: &Resolved) -> Error {
    Error::NotFound { resource: r.def.group_resource(), name: String::new() }
}

pub(super) fn conflict(r: &Resolved, name: &str, message: String) -> Error {
    Error::Conflict { resource: r.def.group_resource(), name: name.to_owned(), message }
}

/// The preconditions a written body carries (`metadata.uid`, `metadata.resourceVersion`), as
/// the audit records them.
pub(super) fn metadata_preconditions(body: &Value) -> Option<String> {
    audit::preconditions(
        body.pointer("/metadata/uid").and_then(Value::as_str),
        body.pointer("/metadata/resourceVersion").and_then(Value::as_str),
    )
}
