//! kube-gc, the binary's library: the thin layer that wires [`kube_gc_engine`] to a cluster
//! through kube-rs.
//!
//! The data path, file by file (one watch event crosses these, and the engine's builder,
//! ingester, queue and collector; the README's "Layout" lists every file):
//!
//! ```text
//! discovery.rs ──► watchers.rs (one metadata watcher per deletable resource: list + watch,
//!      │                 protobuf decoded by kube_gc_wire, JSON by lean_meta.rs and,
//!      │                 for lists, json_list.rs)
//!      │                 │ WatchBatch (notifications)
//!      │                 ▼
//!      │           batcher.rs (coalesces all watchers' chunks and wakes for virtual deletes;
//!      │                 │        its ingest loop hands each batch to the graph builder)
//!      │                 ▼
//!      │           engine::GraphBuilder::ingest ──► Graph, queues
//!      ▼                                                 │
//! kube_cluster.rs ◄── engine::Collector ◄── workers.rs (--concurrent-gc-syncs) ◄┘
//! ```
//!
//! Decisions live in the engine; this crate only moves data and talks HTTP.
//!
//! Around that path: [`serving`] (the secure port: TLS, TokenReview and SubjectAccessReview),
//! [`http`] (the endpoints: health, `/metrics`, the graph dump, and [`inspect`]'s tree, blast
//! radius and explain), [`metrics`] (prometheus-client; upstream's families), [`logging`]
//! (text or klog's JSON), [`leader`] (the Lease), [`shadow`] (`--dry-run`). The second
//! binary, `kubectl-gc`, is [`plugin`] over [`standalone`] (one list of the cluster into the
//! graph, no collector running).
#![warn(missing_docs)]
#![forbid(unsafe_code)]

pub mod batcher;
pub mod discovery;
pub mod error;
pub mod events;
pub mod flags;
pub mod http;
pub mod inspect;
mod json_list;
pub mod kube_cluster;
pub mod kubeconfig;
pub mod leader;
pub mod lean_meta;
pub mod logging;
pub mod metrics;
pub mod plugin;
pub mod run;
pub mod serving;
pub mod shadow;
pub mod standalone;
#[cfg(test)]
mod test_server;
pub mod watchers;
pub mod workers;

pub use error::{Error, Result};
pub use flags::Flags;
pub use run::Controller;

/// Builds a kube-rs client from `--kubeconfig`, the files `$KUBECONFIG` lists, `~/.kube/config`
/// or the in-cluster service account ([`kubeconfig::client_config`]).
pub async fn client(flags: &Flags) -> Result<kube::Client> {
    let mut config = kubeconfig::client_config(flags).await?;
    // kube-client retries 429/503/504 itself, up to 15 times with backoff: one unavailable
    // aggregated API group then stalls discovery for minutes. Every caller here retries on
    // its own terms (the work queues' per-item backoff, the watchers' backoff, the resync
    // loop), so requests fail fast instead.
    config.default_retry = false;
    // kube-rs sends no User-Agent; name the collector, as kube-controller-manager's
    // `…/generic-garbage-collector` does, so API server audit logs (and simcluster's
    // wrongful-deletion oracle) can tell its writes apart.
    config
        .headers
        .push((axum::http::header::USER_AGENT, axum::http::HeaderValue::from_static(USER_AGENT)));
    // client-go's rest_client_* metrics, for every request.
    tracing::info!(server = %config.cluster_url, "API server");
    let host = config.cluster_url.authority().map(|a| a.to_string()).unwrap_or_default();
    Ok(kube::client::ClientBuilder::try_from(config)?
        .with_layer(&metrics::rest_client::MetricsLayer::new(host))
        .build())
}

/// The `User-Agent` of [`client`]'s requests: `kube-gc/<version>`.
pub const USER_AGENT: &str = concat!("kube-gc/", env!("CARGO_PKG_VERSION"));
