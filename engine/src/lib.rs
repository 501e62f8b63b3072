//! The engine of kube-gc: the Kubernetes garbage collector's dependency graph, its batched
//! ingestion, its work queues and its decisions, without any Kubernetes client.
//!
//! kube-gc rebuilds kube-controller-manager's `garbage-collector-controller` around a
//! lock-sharded graph that ingests informer events in parallel batches. The behaviour is
//! upstream's (see `GC-SPEC.md`); the structure is ours.
//!
//! # Where to start
//!
//! - [`Graph`] holds the nodes (objects and virtual owners) and their owner/dependent edges;
//!   [`Ingester`] applies batches of [`Event`]s to it in two parallel phases, and
//!   [`SequentialGraph`] is the one-event-at-a-time reference it is held equal to.
//! - [`WorkQueue`] is client-go's rate-limited work queue; the collector runs
//!   `attemptToDelete` and `attemptToOrphan` over two of them.
//! - [`collector`] holds the decisions (`attempt_to_delete`, `attempt_to_orphan`), which reach
//!   the cluster only through the [`Cluster`] trait; `kube_gc_testkit::MemoryCluster`
//!   implements it in memory for tests.
//! - [`dot`] exports the graph in upstream's DOT format.
//!
//! # Data path
//!
//! ```text
//! informer events ──► Ingester::ingest (diff ║ apply, by shard) ──► Graph
//!                                 │
//!                     attemptToDelete / attemptToOrphan queues ──► collector ──► Cluster
//! ```
#![warn(missing_docs, missing_debug_implementations, unreachable_pub)]

pub(crate) mod sync;

// What `loom-tests/` needs from inside the engine (the phases' loom thread runner, the seeded
// defects); exists only under `--cfg kube_gc_loom`.
#[cfg(kube_gc_loom)]
#[doc(hidden)]
pub mod loom_support;

pub mod absent_owner_cache;
pub mod cluster;
pub mod collector;
pub mod dot;
pub mod error;
pub mod graph;
pub mod identity;
pub mod ingest;
pub mod patch;
pub mod queue;

pub use absent_owner_cache::AbsentOwnerCache;
pub use cluster::{Cluster, ClusterError};
pub use error::{Error, IngestError, Result};
pub use graph::Graph;
pub use identity::{Coordinates, Namespace, ObjectReference, ObjectType, OwnerRef, Uid};
pub use ingest::{Event, EventType, Ingester, ObjectMeta, OwnerReference, SequentialGraph};
pub use queue::{GetFuture, QueueStats, RateLimiter, RateLimiterConfig, WorkQueue};
