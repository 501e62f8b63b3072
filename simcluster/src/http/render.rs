//! Rendering: objects and lists as JSON (whole, or `PartialObjectMetadata` sliced from the
//! stored bytes), as kubectl's tables, and the OpenAPI stub.

use super::*;

pub(super) fn list_kind(def: &ResourceDef, meta_only: bool) -> String {
    if meta_only { "PartialObjectMetadataList".into() } else { format!("{}List", def.kind) }
}

pub(super) fn list_api_version(def: &ResourceDef, meta_only: bool) -> String {
    if meta_only { "meta.k8s.io/v1".into() } else { def.api_version() }
}

#[derive(Deserialize)]
pub(super) struct MetadataOnly<'a> {
    #[serde(borrow)]
    metadata: &'a RawValue,
}

/// A stored object as the client asked for it: the whole object (its stored bytes behind
/// `apiVersion` and `kind`, no re-encoding) or its `PartialObjectMetadata`.
pub(super) fn render_stored(def: &ResourceDef, bytes: &[u8], meta_only: bool) -> Vec<u8> {
    let mut out = Vec::with_capacity(bytes.len() + 64);
    push_stored(&mut out, def, bytes, meta_only);
    out
}

pub(super) fn push_stored(out: &mut Vec<u8>, def: &ResourceDef, bytes: &[u8], meta_only: bool) {
    if meta_only {
        out.extend_from_slice(
            br#"{"kind":"PartialObjectMetadata","apiVersion":"meta.k8s.io/v1","metadata":"#,
        );
        match serde_json::from_slice::<MetadataOnly<'_>>(bytes) {
            Ok(m) => out.extend_from_slice(m.metadata.get().as_bytes()),
            Err(_) => out.extend_from_slice(b"{}"),
        }
        out.push(b'}');
    } else {
        out.extend_from_slice(br#"{"apiVersion":"#);
        out.extend_from_slice(Value::from(def.api_version()).to_string().as_bytes());
        out.extend_from_slice(br#","kind":"#);
        out.extend_from_slice(Value::from(def.kind.as_str()).to_string().as_bytes());
        match bytes.get(1..) {
            Some(rest) if rest != b"}" => {
                out.push(b',');
                out.extend_from_slice(rest);
            }
            _ => out.push(b'}'),
        }
    }
}

pub(super) fn render_value(obj: &Value, meta_only: bool) -> Value {
    if meta_only {
        json!({
            "kind": "PartialObjectMetadata",
            "apiVersion": "meta.k8s.io/v1",
            "metadata": obj.get("metadata").cloned().unwrap_or_else(|| json!({})),
        })
    } else {
        obj.clone()
    }
}

pub(super) fn object_response(code: StatusCode, obj: &Value, meta_only: bool) -> Response {
    json_response(code, render_value(obj, meta_only).to_string().into_bytes())
}

/// A list as a `Table` (see [`table`]).
pub(super) fn table_list_response(
    store: &Store,
    r: &Resolved,
    namespace: Option<String>,
    query: &HashMap<String, String>,
    include: Option<table::Include>,
) -> Result<Response> {
    let page = store.list(r, &list_options(namespace, query)?)?;
    let mut meta = json!({"resourceVersion": page.resource_version.to_string()});
    if let Some(c) = &page.continue_token {
        meta["continue"] = c.clone().into();
    }
    let objects = page
        .items
        .iter()
        .map(|b| Ok(crate::store::with_type(&r.def, parse_stored(b)?)))
        .collect::<Result<Vec<_>>>()?;
    Ok(ok_json(&table::render(&objects, meta, include.unwrap_or(table::Include::Metadata))))
}

/// `/openapi/v2`: an empty document, no schemas (simcluster validates no fields). kubectl asks
/// for it (as protobuf) to validate what `kubectl create -f` sends, and skips client-side
/// validation of kinds the document lacks; an empty protobuf message is a valid empty
/// `openapi_v2.Document`.
pub(super) fn openapi_v2(headers: &HeaderMap) -> Response {
    let accept = headers.get(header::ACCEPT).and_then(|v| v.to_str().ok()).unwrap_or_default();
    if accept.contains("protobuf") {
        // The real server's Content-Type for it (the `@` of the requested one is no valid MIME).
        let content_type = "application/octet-stream";
        return (StatusCode::OK, [(header::CONTENT_TYPE, content_type)], Vec::new())
            .into_response();
    }
    ok_json(&json!({
        "swagger": "2.0",
        "info": {"title": "Kubernetes (simcluster)", "version": version()["gitVersion"]},
        "paths": {},
        "definitions": {},
    }))
}

pub(super) fn list_response(
    store: &Store,
    r: &Resolved,
    namespace: Option<String>,
    query: &HashMap<String, String>,
    meta_only: bool,
) -> Result<Response> {
    let opts = list_options(namespace, query)?;
    let page = store.list(r, &opts)?;
    let mut meta = json!({"resourceVersion": page.resource_version.to_string()});
    if let Some(c) = &page.continue_token {
        meta["continue"] = c.clone().into();
    }
    let head = json!({
        "kind": list_kind(&r.def, meta_only),
        "apiVersion": list_api_version(&r.def, meta_only),
        "metadata": meta,
    })
    .to_string();
    let size: usize = page.items.iter().map(|i| i.len() + 48).sum();
    let mut out = Vec::with_capacity(head.len() + size + 16);
    out.extend_from_slice(&head.as_bytes()[..head.len() - 1]);
    out.extend_from_slice(br#","items":["#);
    for (i, item) in page.items.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        push_stored(&mut out, &r.def, item, meta_only);
    }
    out.extend_from_slice(b"]}");
    Ok(json_response(StatusCode::OK, out))
}
