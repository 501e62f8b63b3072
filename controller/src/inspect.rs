//! The debug server's questions about one object, answered from the graph as JSON:
//! `/debug/controllers/garbagecollector/tree?uid=U[&depth=N]` (its owners up to the roots and its
//! dependents down to the leaves) and `…/blast-radius?uid=U[&policy=background|foreground|orphan]`
//! (what deleting it would remove, keep and orphan), and `…/explain?uid=U` (its owners as the
//! collector classifies them, its next step, and what each finalizer of an object being
//! deleted waits for). See `kube_gc_engine::inspect`.

use axum::extract::{RawQuery, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use kube_gc_engine::cluster::PropagationPolicy;
use kube_gc_engine::collector::HeldDecision;
use kube_gc_engine::inspect::{
    BlastRadius, Decision, Evidence, Explanation, OwnerState, TreeNode, Waiting, blast_radius,
    explain, tree,
};
use kube_gc_engine::{ObjectReference, Uid};
use serde_json::{Value, json};

use crate::http::DebugState;

/// The deepest tree served (deeper chains are cut, and say so by having no children).
pub(crate) const MAX_DEPTH: usize = 64;

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

/// An object as the JSON answers name it.
pub fn reference(o: &ObjectReference) -> Value {
    json!({
        "apiVersion": o.ty.api_version(),
        "kind": o.ty.kind(),
        "namespace": o.namespace.as_str(),
        "name": o.name,
        "uid": o.uid.to_string(),
    })
}

/// A tree as `…/tree` answers it.
pub fn tree_json(node: &TreeNode) -> Value {
    let mut v = reference(&node.identity);
    v["virtual"] = json!(node.is_virtual);
    v["beingDeleted"] = json!(node.being_deleted);
    if node.repeated {
        v["repeated"] = json!(true);
    }
    v["children"] = node.children.iter().map(tree_json).collect();
    v
}

/// A blast radius as `…/blast-radius` answers it.
pub fn radius_json(r: &BlastRadius, policy: &str) -> Value {
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
    match crate::http::walk_graph(move || tree(&graph, uid, depth)).await {
        Ok(Some((up, down))) => {
            json_response(json!({"up": tree_json(&up), "down": tree_json(&down)}))
        }
        Ok(None) => (StatusCode::NOT_FOUND, "no object with this UID in the graph").into_response(),
        Err(response) => response,
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
    match crate::http::walk_graph(move || blast_radius(&graph, uid, policy)).await {
        Ok(Some(r)) => json_response(radius_json(&r, &name)),
        Ok(None) => {
            (StatusCode::NOT_FOUND, "no observed object with this UID in the graph").into_response()
        }
        Err(response) => response,
    }
}

/// A dependent a finalizer waits for, with its own blocking dependents down the chain.
fn waiting_json(w: &Waiting) -> Value {
    let mut v = reference(&w.object);
    v["beingDeleted"] = json!(w.being_deleted);
    v["finalizers"] = json!(w.finalizers);
    v["blockingDependents"] = w.blocking.iter().map(waiting_json).collect();
    v["blockingDependentsTotal"] = json!(w.blocking_total);
    v
}

/// An explanation as `…/explain` answers it.
pub fn explanation_json(e: &Explanation) -> Value {
    let refs = |os: &[ObjectReference]| os.iter().map(reference).collect::<Vec<_>>();
    let (action, detail) = match &e.decision {
        Decision::Nothing(why) => ("none", json!(why)),
        Decision::Keep(solid) => ("keep", json!({"solidOwners": refs(solid)})),
        Decision::Verify(owners) => (
            "verify",
            json!({
                "owners": refs(owners),
                "why": "never observed: a live read (GET or proof LIST) decides whether each exists",
            }),
        ),
        Decision::RemoveReferences(owners) => ("removeReferences", json!({"owners": refs(owners)})),
        Decision::Delete { foreground } => (
            "delete",
            json!({
                "propagationPolicy": if *foreground { "Foreground" } else { "its own orphan/foregroundDeletion finalizer's, else Background" },
                "why": "every owner is absent or being deleted in the foreground",
            }),
        ),
        Decision::WaitForBlockingDependents(n) => {
            ("waitForBlockingDependents", json!({"blockingDependents": n}))
        }
        Decision::RemoveForegroundFinalizer => {
            ("removeForegroundFinalizer", json!({"why": "no blocking dependent is left"}))
        }
        Decision::OrphanDependents(n) => ("orphanDependents", json!({"dependents": n})),
        Decision::WaitForWatchers { decision, behind } => (
            "waitForWatchers",
            json!({
                "then": match decision {
                    HeldDecision::Orphaning => "orphanDependents",
                    HeldDecision::ForegroundDeletion if e.being_deleted => "removeForegroundFinalizer",
                    // A dependent of a foreground deletion, to delete once its own are known.
                    HeldDecision::ForegroundDeletion => "delete",
                },
                "watchers": behind
                    .iter()
                    .map(|(resource, behind)| json!({"resource": resource, "behindSeconds": behind.as_secs_f64()}))
                    .collect::<Vec<_>>(),
                "why": "these watchers are behind the API server: the dependents they have not delivered would be missed (waits at most --watcher-catch-up-timeout)",
            }),
        ),
        Decision::DeferredUntilSynced => (
            "deferredUntilSynced",
            json!({
                "why": "the decision reads the dependents set, complete only once every resource has synced",
            }),
        ),
    };
    let owners: Vec<Value> = e
        .owners
        .iter()
        .map(|o| {
            let mut v = reference(&o.owner);
            v["blockOwnerDeletion"] = json!(o.block_owner_deletion);
            v["state"] = json!(match o.state {
                OwnerState::Solid => "solid",
                OwnerState::WaitingForDependentsDeletion => "waitingForDependentsDeletion",
                OwnerState::Dangling => "dangling",
                OwnerState::Unverified => "unverified",
            });
            v["evidence"] = json!(match o.evidence {
                Evidence::Observed => "observed by its watch or list",
                Evidence::CoordinatesDiffer => "its UID was observed under another kind or name",
                Evidence::ProvenAbsent => "proven absent by a live read (absent-owner cache)",
                Evidence::RemovedAfterRead =>
                    "proven absent by a live read, and removed from the graph",
                Evidence::Virtual => "only named by dependents: not observed, not read yet",
                Evidence::Unmappable =>
                    "its type names no served resource: the collector cannot map it",
            });
            v
        })
        .collect();
    let finalizers: Vec<Value> = e
        .finalizers
        .iter()
        .map(|f| {
            json!({
                "name": f.name,
                "removedBy": if f.garbage_collectors { "the garbage collector" } else { "not the garbage collector: the controller that added it" },
                "waitingForTotal": f.waiting_for_total,
                "waitingFor": f.waiting_for.iter().map(waiting_json).collect::<Vec<_>>(),
            })
        })
        .collect();
    let mut out = json!({
        "object": reference(&e.object),
        "observed": e.observed,
        "beingDeleted": e.being_deleted,
        "owners": owners,
        "next": {"action": action, "detail": detail},
        "retries": e.retries,
        "lastError": e.last_error,
        "warmingUp": e.warming_up,
        "finalizers": finalizers,
    });
    if let Some(err) = &e.live_read_error {
        out["liveReadError"] = json!(err);
    }
    out
}

/// `GET …/explain?uid=U`: why the object is where it is (see the module docs).
pub async fn explain_handler(State(s): State<DebugState>, RawQuery(q): RawQuery) -> Response {
    let q = q.unwrap_or_default();
    let uid = match uid_of(&q) {
        Ok(uid) => uid,
        Err(e) => return e.into_response(),
    };
    match crate::http::bounded_explanation(explain(&s.collector, &s.inspection, uid)).await {
        Ok(Some(e)) => json_response(explanation_json(&e)),
        Ok(None) => (StatusCode::NOT_FOUND, "no object with this UID in the graph").into_response(),
        Err(busy) => busy,
    }
}
