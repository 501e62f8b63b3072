//! The HTTP face of the [`Store`]: the apiserver's URL layout, discovery, content negotiation
//! (full objects or `PartialObjectMetadata`, as JSON or, for lists and watches, protobuf), list,
//! watch streams, and the write verbs.
//!
//! Requests are routed by hand from the path's segments (the apiserver's layout is not a
//! fixed set of patterns: `/api/v1/namespaces/x` is an object, `/api/v1/namespaces/x/pods` a
//! collection).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::{HeaderMap, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{Value, json};
use tokio::sync::broadcast::error::RecvError;

use crate::error::{Error, Result};
use crate::faults::{FaultInjector, FaultKind, RequestClass, WatchFault};
use crate::patch::PatchType;
use crate::resources::ResourceDef;
use crate::store::{
    Change, ChangeKind, DeleteOptions, ListOptions, Resolved, Selector, Store, WatchFrom,
    parse_stored,
};
use crate::table;

mod discovery;
pub(crate) mod protobuf;
mod render;
mod watch;

use discovery::*;
use protobuf::Encoding;
use render::*;
use watch::*;

/// The `Accept` parameter that asks for the metadata-only representation (kube-rs sends
/// `application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1` for get, patch and watch,
/// `…;as=PartialObjectMetadataList;…` for list; client-go's metadata client the same behind
/// `application/vnd.kubernetes.protobuf`, see [`Encoding::negotiate`]).
const PARTIAL_METADATA: &str = "as=PartialObjectMetadata";

/// The annotation of the bookmark that ends a watch's initial events (`sendInitialEvents`).
const INITIAL_EVENTS_END: &str = "k8s.io/initial-events-end";

/// Largest request body accepted (the apiserver's limit is 3 MiB per object).
const MAX_BODY: usize = 3 * 1024 * 1024;

/// What the handlers share.
#[derive(Clone, Debug)]
pub(crate) struct App {
    pub(crate) store: Arc<Store>,
    /// The faults to inject (none by default).
    pub(crate) faults: Arc<FaultInjector>,
    /// `Authorization: Bearer <token>` required when set.
    pub(crate) token: Option<String>,
    /// How often a watch that allows bookmarks gets one.
    pub(crate) bookmark_interval: Duration,
    /// The address clients reach the server at (for `/api`'s `serverAddressByClientCIDRs`).
    pub(crate) address: String,
}

pub(crate) fn router(app: App) -> Router {
    Router::new().fallback(handle).with_state(app)
}

async fn handle(State(app): State<App>, req: Request) -> Response {
    // The audit's actor: the User-Agent (empty if none).
    let agent = req.headers().get(header::USER_AGENT).and_then(|v| v.to_str().ok());
    let actor: Arc<str> = Arc::from(agent.unwrap_or_default());
    match crate::audit::scope(actor, serve(&app, req)).await {
        Ok(resp) => resp,
        Err(e) => error_response(&e),
    }
}

fn error_response(e: &Error) -> Response {
    let code = StatusCode::from_u16(e.code()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    json_response(code, e.to_status().to_string().into_bytes())
}

fn json_response(code: StatusCode, body: Vec<u8>) -> Response {
    (code, [(header::CONTENT_TYPE, "application/json")], body).into_response()
}

fn ok_json(v: &Value) -> Response {
    json_response(StatusCode::OK, v.to_string().into_bytes())
}

/// Where a request points, once its path is parsed.
enum Target {
    Collection { namespace: Option<String> },
    Object { namespace: Option<String>, name: String, subresource: Option<String> },
}

async fn serve(app: &App, req: Request) -> Result<Response> {
    if let Some(token) = &app.token {
        let sent = req.headers().get(header::AUTHORIZATION).and_then(|v| v.to_str().ok());
        if sent != Some(format!("Bearer {token}").as_str()) {
            return Err(Error::Unauthorized);
        }
    }
    let (parts, body) = req.into_parts();
    let query: HashMap<String, String> =
        parts.uri.query().map(url_decode_pairs).unwrap_or_default();
    let path = parts.uri.path().trim_end_matches('/');
    let segs: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    let method = parts.method.clone();
    let get = method == Method::GET;
    match segs.as_slice() {
        ["version"] if get => return Ok(ok_json(&version())),
        ["openapi", "v2"] if get => return Ok(openapi_v2(&parts.headers)),
        ["healthz" | "readyz" | "livez"] if get => {
            return Ok((StatusCode::OK, "ok").into_response());
        }
        ["api"] if get => return Ok(ok_json(&api_versions(app))),
        ["apis"] if get => return Ok(ok_json(&group_list(&app.store))),
        ["api", v] if get => return resource_list(&app.store, "", v),
        ["apis", g] if get => return api_group(&app.store, g),
        ["apis", g, v] if get => return resource_list(&app.store, g, v),
        _ => {}
    }
    let (group, version, rest) = match segs.as_slice() {
        ["api", v, rest @ ..] => ("", *v, rest),
        ["apis", g, v, rest @ ..] => (*g, *v, rest),
        _ => return Err(not_found_path()),
    };
    // The deprecated `/watch/` path prefix.
    let (rest, watch_path) = match rest {
        ["watch", rest @ ..] => (rest, true),
        _ => (rest, false),
    };
    let store = &app.store;
    let served = |plural: &str| store.resolve(group, version, plural).is_ok();
    let (plural, target) = match rest {
        [p] => (*p, Target::Collection { namespace: None }),
        ["namespaces", ns, p] if served(p) => {
            (*p, Target::Collection { namespace: Some((*ns).to_owned()) })
        }
        ["namespaces", ns, p, name] if served(p) => (
            *p,
            Target::Object {
                namespace: Some((*ns).to_owned()),
                name: (*name).to_owned(),
                subresource: None,
            },
        ),
        ["namespaces", ns, p, name, sub] if served(p) => (
            *p,
            Target::Object {
                namespace: Some((*ns).to_owned()),
                name: (*name).to_owned(),
                subresource: Some((*sub).to_owned()),
            },
        ),
        [p, name] => {
            (*p, Target::Object { namespace: None, name: (*name).to_owned(), subresource: None })
        }
        [p, name, sub] => (
            *p,
            Target::Object {
                namespace: None,
                name: (*name).to_owned(),
                subresource: Some((*sub).to_owned()),
            },
        ),
        _ => return Err(not_found_path()),
    };
    let r = store.resolve(group, version, plural)?;
    let meta_only = parts
        .headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|a| a.contains(PARTIAL_METADATA));
    // Protobuf for metadata lists and watches when asked for first; every other answer is JSON.
    let encoding = Encoding::negotiate(&parts.headers);
    // kubectl get: `as=Table` (answered for get and list; watches answer objects).
    let table = parts
        .headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(table::wanted)
        .then(|| table::Include::from_query(query.get("includeObject").map(String::as_str)));
    if query.get("dryRun").is_some_and(|d| !d.is_empty()) {
        return Err(Error::BadRequest("dryRun is not supported by simcluster".into()));
    }
    let (watch_fault, lose_answer) =
        match inject_faults(app, &r, &target, &method, watch_path, &query).await {
            Ok(planned) => planned,
            Err(rejected) => return Ok(rejected),
        };
    let served = async {
        match target {
            Target::Collection { namespace } => {
                if namespace.is_some() && !r.def.namespaced {
                    return Err(not_found_path());
                }
                let watch = watch_path || query_flag(&query, "watch");
                match method {
                    Method::GET if watch => {
                        watch_response(app, &r, namespace, &query, meta_only, encoding, watch_fault)
                    }
                    Method::GET if encoding == Encoding::MetadataProtobuf => {
                        protobuf::list_response(store, &r, namespace, &query)
                    }
                    Method::GET if table.is_some() => {
                        table_list_response(store, &r, namespace, &query, table)
                    }
                    Method::GET => list_response(store, &r, namespace, &query, meta_only),
                    Method::POST => {
                        let body = read_json(body).await?;
                        let created = store.create(&r, namespace.as_deref(), body)?;
                        Ok(object_response(StatusCode::CREATED, &created, meta_only))
                    }
                    Method::DELETE => {
                        let opts = delete_options(body, &query).await?;
                        let list = list_options(namespace, &query)?;
                        let deleted = store.delete_collection(&r, &list, &opts)?;
                        let items: Vec<Value> =
                            deleted.iter().map(|o| render_value(o, meta_only)).collect();
                        let list = json!({
                            "kind": list_kind(&r.def, meta_only),
                            "apiVersion": list_api_version(&r.def, meta_only),
                            "metadata": {"resourceVersion": store.resource_version().to_string()},
                            "items": items,
                        });
                        Ok(ok_json(&list))
                    }
                    _ => Err(method_not_allowed(&method)),
                }
            }
            Target::Object { namespace, name, subresource } => {
                if namespace.is_some() != r.def.namespaced {
                    return Err(not_found_path());
                }
                match subresource.as_deref() {
                    None => {}
                    Some("status") if method == Method::GET => {}
                    Some(_) => return Err(not_found_path()),
                }
                let ns = namespace.as_deref();
                match method {
                    Method::GET if table.is_some() => {
                        let obj = crate::store::with_type(
                            &r.def,
                            parse_stored(&store.get(&r, ns, &name)?)?,
                        );
                        let include = table.unwrap_or(table::Include::Metadata);
                        Ok(ok_json(&table::render(&[obj], json!({}), include)))
                    }
                    Method::GET => {
                        let bytes = store.get(&r, ns, &name)?;
                        Ok(json_response(StatusCode::OK, render_stored(&r.def, &bytes, meta_only)))
                    }
                    Method::PUT => {
                        let body = read_json(body).await?;
                        let (obj, _) = store.update(&r, ns, &name, body)?;
                        Ok(object_response(StatusCode::OK, &obj, meta_only))
                    }
                    Method::PATCH => {
                        let content_type = parts
                            .headers
                            .get(header::CONTENT_TYPE)
                            .and_then(|v| v.to_str().ok())
                            .unwrap_or_default();
                        let patch_type = PatchType::from_content_type(content_type)?;
                        let body = read_body(body).await?;
                        let (obj, _) = store.patch(&r, ns, &name, patch_type, &body)?;
                        Ok(object_response(StatusCode::OK, &obj, meta_only))
                    }
                    Method::DELETE => {
                        let opts = delete_options(body, &query).await?;
                        let (obj, gone) = store.delete(&r, ns, &name, &opts)?;
                        if gone {
                            // The registry store's finalizeDelete: a `Status` naming what went.
                            return Ok(ok_json(&deleted_status(&r.def, &obj)));
                        }
                        // Kept (finalizers pending): 200, or 202 when the client asked for
                        // `orphanDependents: false` (the apiserver's delete handler; fidelity.rs).
                        let code = if opts.orphan_dependents == Some(false) {
                            StatusCode::ACCEPTED
                        } else {
                            StatusCode::OK
                        };
                        Ok(object_response(code, &obj, meta_only))
                    }
                    _ => Err(method_not_allowed(&method)),
                }
            }
        }
    }
    .await;
    match (served, lose_answer) {
        // The write happened; its answer is lost.
        (Ok(answer), Some(lost)) if answer.status().is_success() => {
            app.faults.count(FaultKind::AnswerLost);
            Ok(lost)
        }
        (served, _) => served,
    }
}

/// Plans the faults of a request on a served resource (see [`crate::faults`]) and waits its
/// latency: a watch's fault and a write's lost answer; `Err`: the response to answer instead.
async fn inject_faults(
    app: &App,
    r: &Resolved,
    target: &Target,
    method: &Method,
    watch_path: bool,
    query: &HashMap<String, String>,
) -> Result<(Option<WatchFault>, Option<Response>), Response> {
    let has = |k: &str| query.get(k).is_some_and(|v| !v.is_empty());
    let (class, name) = match target {
        Target::Collection { .. } => {
            let watch =
                watch_path || matches!(query.get("watch").map(String::as_str), Some("true" | "1"));
            let class = match *method {
                Method::GET if watch => RequestClass::Watch {
                    from_version: has("resourceVersion")
                        && query.get("resourceVersion").is_some_and(|v| v != "0"),
                },
                Method::GET => RequestClass::List { continued: has("continue") },
                _ => RequestClass::Write,
            };
            (class, "")
        }
        Target::Object { name, .. } => {
            let class = match *method {
                Method::PUT | Method::PATCH | Method::DELETE => RequestClass::ObjectWrite,
                _ => RequestClass::Read,
            };
            (class, name.as_str())
        }
    };
    let plan = app.faults.plan(class, &r.def.group_resource(), name);
    if let Some(latency) = plan.latency {
        tokio::time::sleep(latency).await;
    }
    match plan.reject {
        Some(rejected) => Err(rejected),
        None => Ok((plan.watch, plan.lose_answer)),
    }
}

/// What the apiserver answers for a delete that removed the object at once: `Status` Success
/// with the object's name, group, resource (in `kind`, as upstream does) and uid.
fn deleted_status(def: &ResourceDef, obj: &Value) -> Value {
    let meta = &obj["metadata"];
    let mut details = json!({"name": meta["name"], "kind": def.plural, "uid": meta["uid"]});
    if !def.group.is_empty() {
        details["group"] = def.group.clone().into();
    }
    json!({
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Success",
        "details": details,
    })
}

fn url_decode_pairs(q: &str) -> HashMap<String, String> {
    form_urlencoded::parse(q.as_bytes()).map(|(k, v)| (k.into_owned(), v.into_owned())).collect()
}

/// A boolean query parameter as the apiserver reads it (Go's `strconv.ParseBool`: Python's
/// client sends `watch=True`).
fn parse_bool(value: &str) -> bool {
    matches!(value, "1" | "t" | "T" | "true" | "TRUE" | "True")
}

fn query_flag(query: &HashMap<String, String>, key: &str) -> bool {
    query.get(key).is_some_and(|v| parse_bool(v))
}

fn not_found_path() -> Error {
    Error::NotFound { resource: String::new(), name: String::new() }
}

fn method_not_allowed(method: &Method) -> Error {
    Error::MethodNotAllowed(format!(
        "the server does not allow this method on the requested resource ({method})"
    ))
}

async fn read_body(body: Body) -> Result<Bytes> {
    axum::body::to_bytes(body, MAX_BODY)
        .await
        .map_err(|e| Error::BadRequest(format!("cannot read the request body: {e}")))
}

async fn read_json(body: Body) -> Result<Value> {
    let bytes = read_body(body).await?;
    serde_json::from_slice(&bytes).map_err(|e| Error::BadRequest(format!("invalid JSON body: {e}")))
}

async fn delete_options(body: Body, query: &HashMap<String, String>) -> Result<DeleteOptions> {
    let bytes = read_body(body).await?;
    let mut opts: DeleteOptions = if bytes.iter().all(u8::is_ascii_whitespace) {
        DeleteOptions::default()
    } else {
        serde_json::from_slice(&bytes)
            .map_err(|e| Error::BadRequest(format!("invalid DeleteOptions: {e}")))?
    };
    if let Some(p) = query.get("propagationPolicy") {
        opts.propagation_policy = Some(p.clone());
    }
    if let Some(o) = query.get("orphanDependents") {
        opts.orphan_dependents = Some(parse_bool(o));
    }
    if !opts.dry_run.is_empty() {
        return Err(Error::BadRequest("dryRun is not supported by simcluster".into()));
    }
    Ok(opts)
}

fn list_options(namespace: Option<String>, query: &HashMap<String, String>) -> Result<ListOptions> {
    let limit = match query.get("limit") {
        Some(l) => l.parse().map_err(|_| Error::BadRequest(format!("invalid limit {l:?}")))?,
        None => 0,
    };
    Ok(ListOptions {
        namespace,
        limit,
        continue_token: query.get("continue").filter(|c| !c.is_empty()).cloned(),
        labels: Selector::parse(query.get("labelSelector").map_or("", String::as_str))?,
        fields: Selector::parse(query.get("fieldSelector").map_or("", String::as_str))?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn query_pairs_should_decode_form_encoding() {
        let decoded = url_decode_pairs("x=a%3Db+c&y=100%&z=%zz");
        assert_eq!(decoded["x"], "a=b c");
        assert_eq!(decoded["y"], "100%");
        assert_eq!(decoded["z"], "%zz");
    }

    #[test]
    fn render_stored_should_splice_type_or_cut_metadata() {
        let def = ResourceDef::new("apps/v1", "deployments", "Deployment", true);
        let stored = br#"{"metadata":{"name":"a"},"spec":{}}"#;
        assert_eq!(
            String::from_utf8(render_stored(&def, stored, false)).unwrap(),
            r#"{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"a"},"spec":{}}"#
        );
        assert_eq!(
            String::from_utf8(render_stored(&def, stored, true)).unwrap(),
            r#"{"kind":"PartialObjectMetadata","apiVersion":"meta.k8s.io/v1","metadata":{"name":"a"}}"#
        );
    }
}
