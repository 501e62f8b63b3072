//! What the engine's integration tests share (`mod support;` in each test file that uses it).

use std::sync::Arc;

use kube_gc_engine::GraphChanges;
use kube_gc_engine::absent_owner_cache::AbsentOwnerCache;
use kube_gc_engine::cluster::Cluster;
use kube_gc_engine::collector::{Collector, CollectorOptions};
use kube_gc_engine::{Graph, RateLimiterConfig, WorkQueue};

/// A collector over `graph` and `cluster` with `options`, whose queues requeue at once (no
/// backoff: tests decide when items run), and the inbox of the virtual delete events its
/// workers generate (upstream's graphChanges, as far as workers use it).
pub fn immediate_collector<C: Cluster>(
    graph: &Arc<Graph>,
    cluster: &Arc<C>,
    options: CollectorOptions,
) -> (Collector<C>, Arc<GraphChanges>) {
    let changes = Arc::new(GraphChanges::new());
    let queue = |n: &str| Arc::new(WorkQueue::with_rate_limiter(n, RateLimiterConfig::immediate()));
    let collector = Collector::new(
        graph.clone(),
        cluster.clone(),
        Arc::new(AbsentOwnerCache::new(100)),
        queue("garbage_collector_attempt_to_delete"),
        queue("garbage_collector_attempt_to_orphan"),
        changes.clone(),
    )
    .with_options(options);
    (collector, changes)
}
