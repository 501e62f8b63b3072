//! The debug server's questions about one object, answered from the graph as JSON:
//! `/debug/controllers/garbagecollector/tree?uid=U[&depth=N]` (its owners up to the roots and its
//! dependents down to the leaves) and `…/blast-radius?uid=U[&policy=background|foreground|orphan]`
//! (what deleting it would remove, keep and orphan). See `kube_gc_engine::inspect`.

use axum::extract::{RawQuery, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use kube_gc_engine::cluster::PropagationPolicy;
use kube_gc_engine::inspect::{BlastRadius, TreeNode, blast_radius, tree};
use kube_gc_engine::{ObjectReference, Uid};
use serde_json::{Value, json};

use crate::http::DebugState;

/// The deepest tree served (deeper chains are cut, and say so by having no children).
const MAX_DEPTH: usize = 64;

/// The query's value of `key`, if given once or more (the first).
fn param(query: &str, key: &str) -> Option<String> {
    form_urlencoded::parse(query.as_bytes()).find(|(k, _)| k == key).map(|(_, v)| v.into_owned())
}

/// The object `uid=` names, if the graph can know it (an unknown non-UUID UID is never
/// interned from a client's query).
fn uid_of(query: &str) -> Result<Uid, (StatusCode, &'static str)> {
    let uid = param(query, "uid").ok_or((StatusCode::BAD_REQUEST, "uid= is required"))?;
    Uid::lookup(&uid).ok_or((StatusCode::NOT_FOUND, "no object with this UID in the graph"))
}

fn reference(o: &ObjectReference) -> Value {
    json!({
        "apiVersion": o.ty.api_version(),
        "kind": o.ty.kind(),
        "namespace": o.namespace.as_str(),
        "name": o.name,
        "uid": o.uid.to_string(),
    })
}

fn tree_json(node: &TreeNode) -> Value {
    let mut v = reference(&node.identity);
    v["virtual"] = json!(node.is_virtual);
    v["beingDeleted"] = json!(node.being_deleted);
    if node.repeated {
        v["repeated"] = json!(true);
    }
    v["children"] = node.children.iter().map(tree_json).collect();
    v
}

fn radius_json(r: &BlastRadius, policy: &str) -> Value {
    json!({
        "policy": policy,
        "deleted": r.deleted.iter().map(reference).collect::<Vec<_>>(),
        "deletedByKind": r.deleted_by_kind(),
        "kept": r.kept.iter().map(|(o, by)| {
            let mut v = reference(o);
            v["keptBy"] = by.iter().map(reference).collect();
            v
        }).collect::<Vec<_>>(),
        "orphaned": r.orphaned.iter().map(reference).collect::<Vec<_>>(),
        "ownPolicy": r.own_policy.iter().map(reference).collect::<Vec<_>>(),
    })
}

fn json_response(v: Value) -> Response {
    ([(header::CONTENT_TYPE, "application/json")], v.to_string()).into_response()
}

/// `GET …/tree?uid=U[&depth=N]`: `{"up": …, "down": …}`.
pub async fn tree_handler(State(s): State<DebugState>, RawQuery(q): RawQuery) -> Response {
    let q = q.unwrap_or_default();
    let uid = match uid_of(&q) {
        Ok(uid) => uid,
        Err(e) => return e.into_response(),
    };
    let depth = match param(&q, "depth").map(|d| d.parse::<usize>()) {
        None => MAX_DEPTH,
        Some(Ok(d)) => d.min(MAX_DEPTH),
        Some(Err(_)) => {
            return (StatusCode::BAD_REQUEST, "depth= must be a number").into_response();
        }
    };
    let graph = s.graph.clone();
    match tokio::task::spawn_blocking(move || tree(&graph, uid, depth)).await {
        Ok(Some((up, down))) => {
            json_response(json!({"up": tree_json(&up), "down": tree_json(&down)}))
        }
        Ok(None) => (StatusCode::NOT_FOUND, "no object with this UID in the graph").into_response(),
        Err(e) => (StatusCode::INTERNAL_SERVER_ERROR, e.to_string()).into_response(),
    }
}

/// `GET …/blast-radius?uid=U[&policy=background|foreground|orphan]` (default background).
pub async fn blast_radius_handler(State(s): State<DebugState>, RawQuery(q): RawQuery) -> Response {
    let q = q.unwrap_or_default();
    let uid = match uid_of(&q) {
        Ok(uid) => uid,
        Err(e) => return e.into_response(),
    };
    let name = param(&q, "policy").unwrap_or_else(|| "background".into()).to_ascii_lowercase();
    let policy = match name.as_str() {
        "background" => PropagationPolicy::Background,
        "foreground" => PropagationPolicy::Foreground,
        "orphan" => PropagationPolicy::Orphan,
        _ => {
            return (StatusCode::BAD_REQUEST, "policy= must be background, foreground or orphan")
                .into_response();
        }
    };
    let graph = s.graph.clone();
    match tokio::task::spawn_blocking(move || blast_radius(&graph, uid, policy)).await {
        Ok(Some(r)) => json_response(radius_json(&r, &name)),
        Ok(None) => {
            (StatusCode::NOT_FOUND, "no observed object with this UID in the graph").into_response()
        }
        Err(e) => (StatusCode::INTERNAL_SERVER_ERROR, e.to_string()).into_response(),
    }
}
