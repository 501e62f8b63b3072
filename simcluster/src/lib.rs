//! simcluster: an in-process Kubernetes API server emulator, served over real HTTP on
//! loopback, for kube-gc's tests, demo and end-to-end benchmarks. It never knows the
//! collector: what runs kube-gc against it (the demo, chaos, the tuning sweep) is `kube-gc-lab`.
//!
//! It speaks enough of the apiserver's API for kube-rs (and kube-gc, which is built on it) to
//! run unchanged against it: legacy discovery, list with `limit`/`continue`, watch from a
//! resourceVersion with bookmarks and `410 Expired`, get, create, update, the three patch types,
//! delete with propagation policies, preconditions and the registry store's finalizer semantics
//! (GC-SPEC §5.6), deletecollection, and the metadata-only (`PartialObjectMetadata`)
//! representation, as JSON or, for lists and watches, protobuf (kube-gc-wire). It does not
//! collect garbage: that is kube-gc's job.
//!
//! # Where to start
//!
//! - [`SimCluster::start`] serves a [`Store`] on `127.0.0.1`; [`SimCluster::kubeconfig`] is what
//!   clients need to reach it.
//! - [`store`] holds the objects and the write semantics; `http` (private) the URL layout
//!   and content negotiation; [`patch`] the patch types; [`resources`] what is served;
//!   [`preload`] puts WORKLOAD.md's objects into a store without HTTP.
//! - [`faults`] injects seeded faults (errors, latency, dropped and expired watches, expired
//!   continue tokens, conflicts; [`SimCluster::set_faults`]); [`audit`] records every write and
//!   flags the collector's wrongful deletions.
//!
//! # Examples
//!
//! ```no_run
//! # async fn demo() -> kube_gc_simcluster::Result<()> {
//! use kube_gc_simcluster::{Config, SimCluster};
//!
//! let sim = SimCluster::start(Config::default()).await?;
//! std::fs::write("/tmp/simcluster.kubeconfig", sim.kubeconfig()).expect("write");
//! // … point kube-rs / kube-gc / kubectl at it …
//! sim.shutdown().await;
//! # Ok(())
//! # }
//! ```
#![forbid(unsafe_code)]
#![warn(missing_docs, missing_debug_implementations)]

pub mod audit;
pub mod error;
pub mod faults;
mod http;
pub mod patch;
pub mod preload;
pub mod resources;
pub mod store;
mod table;
pub mod time;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

pub use error::{Error, Result};
pub use faults::{FaultCounts, FaultInjector, FaultKind, Faults};
/// A stored object's (JSON) metadata as the protobuf `PartialObjectMetadata` simcluster serves.
pub use http::protobuf::partial_object_metadata;
pub use resources::ResourceDef;
pub use store::{Store, StoreConfig};

/// How to run a simcluster.
#[derive(Clone, Debug)]
pub struct Config {
    /// Where to listen (port 0: any free port). Must be a loopback address unless
    /// `listen_any`.
    pub listen: SocketAddr,
    /// Allow a non-loopback `listen` address. simcluster has no TLS and no real
    /// authentication: exposing it exposes every object to anyone who can reach it.
    pub listen_any: bool,
    /// A static bearer token clients must send (test-only: it travels in clear over HTTP).
    pub token: Option<String>,
    /// The resources served (default: [`resources::builtin`]); CRDs add more at run time.
    pub resources: Vec<ResourceDef>,
    /// Storage knobs.
    pub store: StoreConfig,
    /// How often a watch that allows bookmarks gets one (the real server: about a minute).
    pub bookmark_interval: Duration,
    /// Namespace objects created at start (`default`, `kube-system`, `kube-public`,
    /// `kube-node-lease`).
    pub namespaces: Vec<String>,
    /// Faults to inject from the start (default: none); see [`faults`] and
    /// [`SimCluster::set_faults`].
    pub faults: Faults,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            listen: SocketAddr::from(([127, 0, 0, 1], 0)),
            listen_any: false,
            token: None,
            resources: resources::builtin(),
            store: StoreConfig::default(),
            bookmark_interval: Duration::from_secs(1),
            namespaces: ["default", "kube-system", "kube-public", "kube-node-lease"]
                .map(str::to_owned)
                .to_vec(),
            faults: Faults::off(),
        }
    }
}

/// A running simcluster; dropping it stops the server.
#[derive(Debug)]
pub struct SimCluster {
    addr: SocketAddr,
    store: Arc<Store>,
    faults: Arc<FaultInjector>,
    token: Option<String>,
    shutdown: Option<oneshot::Sender<()>>,
    server: Option<JoinHandle<()>>,
}

impl SimCluster {
    /// Builds the store from `config` and serves it.
    pub async fn start(config: Config) -> Result<SimCluster> {
        let store = Arc::new(Store::new(config.store.clone(), config.resources.clone()));
        let ns = store.resolve("", "v1", "namespaces");
        if let Ok(ns) = ns {
            for name in &config.namespaces {
                store.create(&ns, None, json!({"metadata": {"name": name}}))?;
            }
        }
        SimCluster::serve(config, store).await
    }

    /// Serves an existing `store` (e.g. one filled by [`preload::preload`]).
    pub async fn serve(config: Config, store: Arc<Store>) -> Result<SimCluster> {
        if !config.listen.ip().is_loopback() && !config.listen_any {
            return Err(Error::Config(format!(
                "refusing to listen on {}: not a loopback address (pass --listen-any to allow it; simcluster has no TLS nor real authentication)",
                config.listen
            )));
        }
        let listener = tokio::net::TcpListener::bind(config.listen)
            .await
            .map_err(|e| Error::Config(format!("cannot listen on {}: {e}", config.listen)))?;
        let addr = listener
            .local_addr()
            .map_err(|e| Error::Config(format!("cannot read the bound address: {e}")))?;
        let faults = Arc::new(FaultInjector::new(config.faults.clone()));
        let app = http::App {
            store: store.clone(),
            faults: faults.clone(),
            token: config.token.clone(),
            bookmark_interval: config.bookmark_interval,
            address: addr.to_string(),
        };
        let (tx, rx) = oneshot::channel::<()>();
        let server = tokio::spawn(async move {
            let serve =
                axum::serve(listener, http::router(app)).with_graceful_shutdown(async move {
                    let _ = rx.await;
                });
            if let Err(e) = serve.await {
                tracing::error!(error = %e, "simcluster server failed");
            }
        });
        Ok(SimCluster {
            addr,
            store,
            faults,
            token: config.token,
            shutdown: Some(tx),
            server: Some(server),
        })
    }

    /// The address it listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://<addr>`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The store it serves (to inspect or change objects without HTTP).
    pub fn store(&self) -> &Arc<Store> {
        &self.store
    }

    /// Replaces the faults injected from now on (and reseeds their PRNG with `faults.seed`).
    pub fn set_faults(&self, faults: Faults) {
        self.faults.set(faults);
    }

    /// Stops injecting faults (watches already planned to drop still drop).
    pub fn faults_off(&self) {
        self.faults.set(Faults::off());
    }

    /// The faults injected so far, by kind.
    pub fn fault_counts(&self) -> FaultCounts {
        self.faults.counts()
    }

    /// The audit of the store's writes (shorthand for `store().audit()`).
    pub fn audit(&self) -> &audit::Audit {
        self.store.audit()
    }

    /// A kubeconfig (YAML) for clients: plain HTTP, and the static token if one is set.
    pub fn kubeconfig(&self) -> String {
        kubeconfig(&self.url(), self.token.as_deref())
    }

    /// Stops serving; open watches end.
    pub async fn shutdown(mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        if let Some(server) = self.server.take() {
            // Watches are long requests: don't wait for them beyond a moment.
            if tokio::time::timeout(Duration::from_secs(2), server).await.is_err() {
                tracing::debug!("simcluster: open requests outlived shutdown");
            }
        }
    }
}

impl Drop for SimCluster {
    fn drop(&mut self) {
        if let Some(server) = self.server.take() {
            server.abort();
        }
    }
}

/// A kubeconfig with one cluster, user and context, all named `simcluster`.
pub fn kubeconfig(server: &str, token: Option<&str>) -> String {
    let user = match token {
        // Test-only: a static token, sent in clear over plain HTTP.
        Some(t) => format!("  user:\n    token: {t}\n"),
        None => "  user: {}\n".to_owned(),
    };
    format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: simcluster\n  cluster:\n    server: {server}\ncontexts:\n- name: simcluster\n  context:\n    cluster: simcluster\n    user: simcluster\ncurrent-context: simcluster\nusers:\n- name: simcluster\n{user}"
    )
}
