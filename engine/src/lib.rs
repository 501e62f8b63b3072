//! The engine of kube-gc: the Kubernetes garbage collector's dependency graph, its batched
//! ingestion, its work queues and its decisions, without any Kubernetes client.
//!
//! kube-gc rebuilds kube-controller-manager's `garbage-collector-controller` around a
//! lock-sharded graph that ingests informer events in parallel batches. The behaviour is
//! upstream's (see `GC-SPEC.md`); the structure is ours.
//!
//! # Where to start
//!
//! Follow one watch event: the controller's watcher hands what it saw to
//! [`GraphBuilder::ingest`] as [`Notification`]s ([`builder`]); the builder turns them into
//! [`Event`]s through the resource's store, applies them to the [`Graph`] with the
//! [`Ingester`] ([`ingest`]), and queues what they call for on the collector's two
//! [`WorkQueue`]s ([`queue`]); a worker runs [`collector`]'s decisions
//! (`attempt_to_delete.rs`, `attempt_to_orphan.rs`), which reach the API through the
//! [`Cluster`] trait (`collector/operations.rs`). From the builder to the call the event
//! crosses twelve files of this crate: `builder/` (`mod.rs`, `store.rs`), `ingest/` (`mod.rs`
//! and its phases `prepare.rs`, `diff.rs`, `apply.rs`), `collector/mod.rs` (which queues what
//! a batch found, and runs the workers' loop), `queue/` (`mod.rs`, `state.rs`,
//! `get_future.rs`), `collector/attempt_to_delete.rs` and `collector/operations.rs`; the
//! README's "Layout" has the whole path.
//!
//! - [`Graph`] holds the nodes (objects and virtual owners) and their owner/dependent edges;
//!   [`Ingester`] applies batches of [`Event`]s to it in parallel phases, and
//!   [`SequentialGraph`] is the one-event-at-a-time reference it is held equal to.
//! - [`WorkQueue`] is client-go's rate-limited work queue; the collector runs
//!   `attemptToDelete` and `attemptToOrphan` over two of them.
//! - [`collector`] holds the decisions, which reach the cluster only through the [`Cluster`]
//!   trait; `kube_gc_testkit::MemoryCluster` implements it in memory for tests.
//! - [`meta`] defines what the collector reads of an object ([`ObjectMeta`],
//!   [`OwnerReference`]) and the two garbage-collection finalizers.
//! - [`dot`] exports the graph in upstream's DOT format.
//!
//! # Data path
//!
//! ```text
//! watchers' notifications ──► GraphBuilder::ingest ──► Ingester (diff ║ apply, by shard) ──► Graph
//!        GraphChanges (virtual deletes) ──┘   │
//!                     attemptToDelete / attemptToOrphan queues ──► collector ──► Cluster
//! ```
#![warn(missing_docs, missing_debug_implementations, unreachable_pub)]
// Two exceptions, each allowed where it is and argued there: `graph::prefetch` (a CPU hint)
// and, under loom only, the lifetime of `loom_support`'s borrowed jobs.
#![deny(unsafe_code)]

pub(crate) mod sync;

// What `loom-tests/` needs from inside the engine (the phases' loom thread runner, the seeded
// defects); exists only under `--cfg kube_gc_loom`.
#[cfg(kube_gc_loom)]
#[doc(hidden)]
pub mod loom_support;

pub mod absent_owner_cache;
pub mod builder;
pub mod cluster;
pub mod collector;
pub mod dot;
pub mod error;
pub mod graph;
pub mod identity;
pub mod ingest;
pub mod inspect;
pub mod meta;
pub mod patch;
pub mod queue;

pub use absent_owner_cache::AbsentOwnerCache;
pub use builder::{GraphBuilder, GraphChanges, Notification, WatchBatch, WatchSource};
pub use cluster::{Cluster, ClusterError};
pub use error::{Error, IngestError, Result};
pub use graph::Graph;
pub use identity::{Coordinates, Namespace, ObjectReference, ObjectType, OwnerRef, Uid};
pub use ingest::{Event, EventType, Ingester, SequentialGraph};
pub use meta::{ObjectMeta, OwnerReference};
pub use queue::{GetFuture, QueueStats, RateLimiter, RateLimiterConfig, WorkQueue};
