//! What the engine's integration tests share (`mod support;` in each test file that uses it).

// Each test crate includes this module and uses part of it.
#![allow(dead_code)]

use std::sync::Arc;

use futures::executor::block_on;
use kube_gc_engine::GraphChanges;
use kube_gc_engine::absent_owner_cache::AbsentOwnerCache;
use kube_gc_engine::cluster::{Cluster, Resource};
use kube_gc_engine::collector::{Collector, CollectorOptions};
use kube_gc_engine::{
    Event, EventType, Graph, Ingester, ObjectMeta, ObjectType, RateLimiterConfig, WorkQueue,
};

pub mod faults;

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

/// A collector over a graph fed by an [`Ingester`], as informers would feed it, with queues
/// that requeue at once: the tests decide when events arrive and when items run.
pub struct Env<C: Cluster> {
    pub cluster: Arc<C>,
    pub graph: Arc<Graph>,
    pub ingester: Ingester,
    pub collector: Collector<C>,
    pub changes: Arc<GraphChanges>,
}

impl<C: Cluster> Env<C> {
    pub fn new(cluster: C, options: CollectorOptions) -> Env<C> {
        Env::configured(cluster, options, |c| c)
    }

    /// As [`Env::new`], with `configure` applied to the collector.
    pub fn configured(
        cluster: C,
        options: CollectorOptions,
        configure: impl FnOnce(Collector<C>) -> Collector<C>,
    ) -> Env<C> {
        let cluster = Arc::new(cluster);
        let graph = Arc::new(Graph::new(4).unwrap());
        let (collector, changes) = immediate_collector(&graph, &cluster, options);
        let collector = configure(collector);
        Env { ingester: Ingester::new(graph.clone(), 2), cluster, graph, collector, changes }
    }

    /// The informer shows `m`.
    pub fn observe(&mut self, event_type: EventType, ty: ObjectType, m: ObjectMeta) {
        let out = self.ingester.ingest(&[Event::new(event_type, ty, m)]);
        self.collector.apply_ingest_output(out);
    }

    /// The informer shows `m` added: a Pod if it has owners, else a ReplicaSet.
    pub fn observe_pod_or_replica_set(&mut self, m: ObjectMeta) {
        let ty = if m.owner_references.is_empty() {
            ObjectType::new("apps/v1", "ReplicaSet")
        } else {
            ObjectType::new("v1", "Pod")
        };
        self.observe(EventType::Add, ty, m);
    }

    /// Feeds pending virtual delete events back into the graph.
    pub fn apply_graph_changes(&mut self) {
        let events = self.changes.drain(usize::MAX);
        let out = self.ingester.ingest(&events);
        self.collector.apply_ingest_output(out);
    }

    /// Runs the attemptToDelete worker until its queue is empty (at most `max` items; a
    /// virtual node whose object exists but is not observed is requeued for ever, #56121).
    pub fn run_attempt_to_delete(&mut self, max: usize) {
        for _ in 0..max {
            // The graph builder runs beside the workers: apply what they found first.
            if !self.changes.is_empty() {
                self.apply_graph_changes();
            }
            if self.collector.attempt_to_delete_queue().is_empty() {
                return;
            }
            block_on(self.collector.process_attempt_to_delete_worker());
        }
    }

    /// Runs the attemptToDelete worker until its queue is empty (at most `max` items).
    pub fn drain_attempt_to_delete(&mut self, max: usize) {
        for _ in 0..max {
            if self.collector.attempt_to_delete_queue().is_empty() {
                if self.changes.is_empty() {
                    return;
                }
                self.apply_graph_changes();
                continue;
            }
            block_on(self.collector.process_attempt_to_delete_worker());
        }
        panic!("attemptToDelete did not drain in {max} iterations");
    }
}

/// The test UUID numbered `i`.
/// The Pod resource (`v1`, namespaced).
pub fn pods() -> Resource {
    kube_gc_testkit::resource("v1", "pods", "Pod", true)
}

/// The ReplicaSet resource (`apps/v1`, namespaced).
pub fn replicasets() -> Resource {
    kube_gc_testkit::resource("apps/v1", "replicasets", "ReplicaSet", true)
}

/// Waits, polling (waking itself at once), until `ready` holds: for a test's cluster that
/// holds an answer back until the test lets it go.
pub async fn until(ready: impl Fn() -> bool) {
    std::future::poll_fn(|cx| {
        if ready() {
            std::task::Poll::Ready(())
        } else {
            cx.waker().wake_by_ref();
            std::task::Poll::Pending
        }
    })
    .await
}

pub fn uid(i: u32) -> String {
    format!("00000000-0000-4000-8000-{i:012}")
}

/// A blocking owner reference to the object numbered `i` (see [`uid`]).
pub fn blocking_owner(
    api_version: &str,
    kind: &str,
    name: &str,
    i: u32,
) -> kube_gc_engine::OwnerReference {
    kube_gc_engine::OwnerReference {
        api_version: api_version.into(),
        kind: kind.into(),
        name: name.into(),
        uid: uid(i),
        controller: None,
        block_owner_deletion: Some(true),
    }
}

/// Inside an `impl Cluster for Wrapper`, the methods the wrapper leaves alone, each passed on to
/// the field `$inner`: `forward_to!(inner: resource_for, consistent_lists, patch);`. A test's
/// wrapper then spells out only the calls it changes.
#[allow(unused_macros)] // each test crate includes this module; some have no wrapper
macro_rules! forward_to {
    ($inner:tt: $($method:ident),* $(,)?) => { $( $crate::support::forward_to!(@ $inner $method); )* };
    (@ $inner:tt resource_for) => {
        fn resource_for(
            &self,
            ty: kube_gc_engine::ObjectType,
        ) -> Result<kube_gc_engine::cluster::Resource, kube_gc_engine::cluster::ClusterError> {
            self.$inner.resource_for(ty)
        }
    };
    (@ $inner:tt consistent_lists) => {
        fn consistent_lists(&self, r: &kube_gc_engine::cluster::Resource) -> bool {
            self.$inner.consistent_lists(r)
        }
    };
    (@ $inner:tt get) => {
        async fn get(
            &self,
            r: &kube_gc_engine::cluster::Resource,
            ns: &str,
            name: &str,
        ) -> Result<kube_gc_engine::ObjectMeta, kube_gc_engine::cluster::ClusterError> {
            self.$inner.get(r, ns, name).await
        }
    };
    (@ $inner:tt list_page) => {
        async fn list_page(
            &self,
            r: &kube_gc_engine::cluster::Resource,
            token: Option<&str>,
            limit: u32,
        ) -> Result<kube_gc_engine::cluster::ListPage, kube_gc_engine::cluster::ClusterError> {
            self.$inner.list_page(r, token, limit).await
        }
    };
    (@ $inner:tt patch) => {
        async fn patch(
            &self,
            r: &kube_gc_engine::cluster::Resource,
            ns: &str,
            name: &str,
            p: &kube_gc_engine::cluster::Patch,
        ) -> Result<kube_gc_engine::ObjectMeta, kube_gc_engine::cluster::ClusterError> {
            self.$inner.patch(r, ns, name, p).await
        }
    };
    (@ $inner:tt delete) => {
        async fn delete(
            &self,
            r: &kube_gc_engine::cluster::Resource,
            ns: &str,
            name: &str,
            o: &kube_gc_engine::cluster::DeleteOptions,
        ) -> Result<(), kube_gc_engine::cluster::ClusterError> {
            self.$inner.delete(r, ns, name, o).await
        }
    };
    (@ $inner:tt record_event) => {
        fn record_event(&self, e: kube_gc_engine::cluster::WarningEvent) {
            self.$inner.record_event(e)
        }
    };
}
#[allow(unused_imports)]
pub(crate) use forward_to;

/// Whether an object created at `created` came after an owner deleted at `deleted` (Unix
/// seconds): past the memory of orphaned owners' margin, both known. The stale-view oracles'
/// own statement of what that memory leaves to upstream.
#[allow(dead_code)] // each test crate includes this module; only the stale-view ones use it
pub fn created_after(created: Option<i64>, deleted: Option<i64>) -> bool {
    let margin = kube_gc_engine::collector::CREATED_AFTER_MARGIN_SECS;
    matches!((created, deleted), (Some(c), Some(d)) if c > d + margin)
}
