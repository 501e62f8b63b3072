//! Shared by the integration tests: a simcluster and a kube-rs client for it.
#![allow(dead_code)] // each test file uses a different part

use std::time::Duration;

use kube::Client;
use kube_gc_simcluster::{Config, SimCluster};

/// Every wait in these tests is bounded by this.
pub const DEADLINE: Duration = Duration::from_secs(30);

/// A simcluster with the builtin resources and fast bookmarks.
pub async fn start() -> SimCluster {
    start_with(Config { bookmark_interval: Duration::from_millis(100), ..Config::default() }).await
}

/// A simcluster with `config`.
pub async fn start_with(config: Config) -> SimCluster {
    SimCluster::start(config).await.expect("simcluster starts")
}

/// A kube-rs client for `sim`, built from the kubeconfig it writes.
pub async fn client(sim: &SimCluster) -> Client {
    let kubeconfig =
        kube::config::Kubeconfig::from_yaml(&sim.kubeconfig()).expect("kubeconfig parses");
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
        .await
        .expect("kubeconfig loads");
    Client::try_from(config).expect("client builds")
}

/// The HTTP status of a kube-rs error (0 if not an API error).
pub fn code(e: &kube::Error) -> u16 {
    match e {
        kube::Error::Api(s) => s.code,
        _ => 0,
    }
}

/// Polls `f` every 20 ms until it returns true, at most [`DEADLINE`].
pub async fn eventually<F, Fut>(what: &str, mut f: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = tokio::time::Instant::now() + DEADLINE;
    loop {
        if f().await {
            return;
        }
        assert!(tokio::time::Instant::now() < deadline, "timed out waiting for: {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
