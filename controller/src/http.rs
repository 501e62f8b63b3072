//! The debug server: `/healthz`, `/readyz`, `/metrics`, upstream's graph dump at
//! `/debug/controllers/garbagecollector/graph` (GC-SPEC.md §7), and kube-gc's `…/tree` and
//! `…/blast-radius` of one object (`inspect.rs`).

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use axum::Router;
use axum::extract::{RawQuery, State};
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::get;
use kube_gc_engine::{Graph, Uid};
use prometheus_client::registry::Registry;

/// What the debug server reads.
#[derive(Clone, Debug)]
pub struct DebugState {
    /// The collector (the tree and blast-radius endpoints read its graph).
    pub collector: Arc<kube_gc_engine::collector::Collector<crate::kube_cluster::KubeCluster>>,
    /// The dependency graph (the DOT endpoint).
    pub graph: Arc<Graph>,
    /// The cluster for live reads of the debug endpoints (its own budget and counts).
    pub inspection: crate::kube_cluster::KubeCluster,
    /// `--dry-run`'s record of would-be writes (`…/shadow`).
    pub shadow: Option<Arc<crate::shadow::Shadow>>,
    /// Every family `/metrics` serves.
    pub registry: Arc<Registry>,
    /// Set once every watcher has synced (or the sync timeout passed).
    pub ready: Arc<AtomicBool>,
}

/// The longest query string served (a graph request names UIDs; anything longer is hostile).
const MAX_QUERY: usize = 64 * 1024;

const HEALTHZ: &str = "/healthz";
const READYZ: &str = "/readyz";
const LIVEZ: &str = "/livez";
const METRICS: &str = "/metrics";
const GRAPH: &str = "/debug/controllers/garbagecollector/graph";
const TREE: &str = "/debug/controllers/garbagecollector/tree";
const BLAST_RADIUS: &str = "/debug/controllers/garbagecollector/blast-radius";
const EXPLAIN: &str = "/debug/controllers/garbagecollector/explain";
const SHADOW: &str = "/debug/controllers/garbagecollector/shadow";

/// The health checks a kubelet probes: open on the secure port by default.
pub const PROBE_PATHS: [&str; 3] = [HEALTHZ, READYZ, LIVEZ];

/// The metrics and the debug endpoints (the graph and what is asked of it): for authorized
/// callers only on the secure port.
pub const PRIVATE_PATHS: [&str; 6] = [METRICS, GRAPH, TREE, BLAST_RADIUS, EXPLAIN, SHADOW];

/// The router, separate from serving so tests can call it directly.
pub fn router(state: DebugState) -> Router {
    Router::new()
        .route(HEALTHZ, get(|| async { "ok" }))
        .route(LIVEZ, get(|| async { "ok" }))
        .route(READYZ, get(readyz))
        .route(METRICS, get(metrics))
        .route(GRAPH, get(graph))
        .route(TREE, get(crate::inspect::tree_handler))
        .route(BLAST_RADIUS, get(crate::inspect::blast_radius_handler))
        .route(EXPLAIN, get(crate::inspect::explain_handler))
        .route(SHADOW, get(shadow))
        .with_state(state)
}

async fn readyz(State(s): State<DebugState>) -> impl IntoResponse {
    if s.ready.load(Ordering::Acquire) {
        (StatusCode::OK, "ok")
    } else {
        (StatusCode::SERVICE_UNAVAILABLE, "garbage collector not synced")
    }
}

async fn metrics(State(s): State<DebugState>) -> impl IntoResponse {
    ([(header::CONTENT_TYPE, crate::metrics::CONTENT_TYPE)], crate::metrics::encode(&s.registry))
}

async fn shadow(State(s): State<DebugState>) -> axum::response::Response {
    match &s.shadow {
        Some(shadow) => {
            // Judged again first, as after a batch: an idle cluster may send none after the
            // sync, and the deletions seen in warm-up would stay unsettled.
            shadow.settle(&s.graph, !s.collector.is_warming_up());
            ([(header::CONTENT_TYPE, "application/json")], shadow.report(&s.graph).to_string())
                .into_response()
        }
        None => (StatusCode::NOT_FOUND, "not in shadow mode (--dry-run)").into_response(),
    }
}

/// Decodes `uid=` values of a query string (`application/x-www-form-urlencoded`).
fn query_uids(query: &str) -> Vec<String> {
    form_urlencoded::parse(query.as_bytes())
        .filter(|(k, _)| k == "uid")
        .map(|(_, v)| v.into_owned())
        .collect()
}

/// Walks of the graph (the DOT dump, a tree, a blast radius) running at once: each holds a
/// thread of the blocking pool (which ingestion uses too) and memory in proportion to what it
/// walks, so callers of the debug endpoints queue for these, briefly, then get 429.
static GRAPH_WALKS: tokio::sync::Semaphore = tokio::sync::Semaphore::const_new(2);

/// How long a request waits for a walk (or an explanation) before it is answered 429.
const WALK_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

/// Explanations running at once: each reads live objects on the debug endpoints' own budget
/// (5/s), so callers past these would only queue on it without bound; they wait briefly, then
/// get 429.
static EXPLANATIONS: tokio::sync::Semaphore = tokio::sync::Semaphore::const_new(8);

/// Runs `explain` as one of the [`EXPLANATIONS`]: its result, or 429 when none is free in
/// time.
pub(crate) async fn bounded_explanation<T>(
    explain: impl std::future::Future<Output = T>,
) -> Result<T, axum::response::Response> {
    let Ok(Ok(_turn)) = tokio::time::timeout(WALK_WAIT, EXPLANATIONS.acquire()).await else {
        return Err((StatusCode::TOO_MANY_REQUESTS, "busy: other explanations are running\n")
            .into_response());
    };
    Ok(explain.await)
}

/// Runs `walk` on the blocking pool, as one of the [`GRAPH_WALKS`]: its result, or the
/// response to send instead (429 when none is free in time; 500, without the panic's text, if
/// it panicked).
pub(crate) async fn walk_graph<T: Send + 'static>(
    walk: impl FnOnce() -> T + Send + 'static,
) -> Result<T, axum::response::Response> {
    let Ok(Ok(_walk)) = tokio::time::timeout(WALK_WAIT, GRAPH_WALKS.acquire()).await else {
        return Err((StatusCode::TOO_MANY_REQUESTS, "busy: other graph walks are running\n")
            .into_response());
    };
    tokio::task::spawn_blocking(walk).await.map_err(|e| {
        tracing::error!(error = %e, "a debug endpoint's graph walk failed");
        (StatusCode::INTERNAL_SERVER_ERROR, "internal error\n").into_response()
    })
}

async fn graph(State(s): State<DebugState>, RawQuery(query): RawQuery) -> axum::response::Response {
    let query = query.unwrap_or_default();
    if query.len() > MAX_QUERY {
        return (StatusCode::URI_TOO_LONG, "query too long").into_response();
    }
    let uids = query_uids(&query);
    let graph = s.graph.clone();
    let body = walk_graph(move || {
        if uids.is_empty() {
            kube_gc_engine::dot::to_dot(&graph)
        } else {
            // Never intern what a client sends: an unknown non-UUID UID names no node.
            let uids: Vec<Uid> = uids.iter().filter_map(|u| Uid::lookup(u)).collect();
            if uids.is_empty() {
                return kube_gc_engine::dot::to_dot_for_uids(&graph, &[]);
            }
            kube_gc_engine::dot::to_dot_for_uids(&graph, &uids)
        }
    })
    .await;
    match body {
        Ok(dot) => (
            StatusCode::OK,
            [
                (header::CONTENT_TYPE, "text/vnd.graphviz"),
                (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
            ],
            dot,
        )
            .into_response(),
        Err(response) => response,
    }
}

/// Serves the debug endpoints on `addr` until the task is dropped.
pub async fn serve(addr: SocketAddr, state: DebugState) -> std::io::Result<()> {
    let listener = tokio::net::TcpListener::bind(addr).await?;
    tracing::info!(%addr, "serving /healthz, /readyz, /metrics and the debug graph");
    axum::serve(listener, router(state)).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn query_uids_decodes_hostile_values_without_panicking() {
        assert_eq!(query_uids("uid=a&uid=b&x=c"), ["a", "b"]);
        assert_eq!(query_uids("uid=%22q%22%5C%0A"), ["\"q\"\\\n"]);
        assert_eq!(query_uids("uid=%"), ["%"]);
        assert_eq!(query_uids("uid=%4"), ["%4"]);
        assert_eq!(query_uids("uid=%zz"), ["%zz"]);
        assert_eq!(query_uids("uid=%ff%fe"), ["\u{fffd}\u{fffd}"]);
        assert_eq!(query_uids(&format!("uid={}", "a".repeat(10_000)))[0].len(), 10_000);
    }

    /// Explanations run eight at a time: a ninth waits, then is answered 429.
    #[tokio::test(start_paused = true)]
    async fn explanations_are_bounded() {
        let held = EXPLANATIONS.acquire_many(8).await.expect("open");
        let busy = bounded_explanation(async { 1 }).await.expect_err("none free");
        assert_eq!(busy.status(), StatusCode::TOO_MANY_REQUESTS);
        drop(held);
        assert_eq!(bounded_explanation(async { 1 }).await.ok(), Some(1));
    }

    /// Graph walks run two at a time: a third waits, then is answered 429; a walk that panics
    /// is a 500 without the panic's text.
    #[tokio::test(start_paused = true)]
    async fn graph_walks_are_bounded_and_their_panics_unsaid() {
        let held = GRAPH_WALKS.acquire_many(2).await.expect("open");
        let busy = walk_graph(|| 1).await.expect_err("no walk free");
        assert_eq!(busy.status(), StatusCode::TOO_MANY_REQUESTS);
        drop(held);
        assert_eq!(walk_graph(|| 1).await.ok(), Some(1));
        let panicked = walk_graph(|| -> u8 { panic!("secret detail") }).await.expect_err("panic");
        assert_eq!(panicked.status(), StatusCode::INTERNAL_SERVER_ERROR);
        let body = axum::body::to_bytes(panicked.into_body(), 1024).await.unwrap();
        assert!(!String::from_utf8_lossy(&body).contains("secret"));
    }
}
