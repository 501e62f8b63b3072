//! What kube-gc's tests need of a Kubernetes API server, in memory and without HTTP.
//!
//! # Where to start
//!
//! - [`MemoryCluster`] implements the engine's [`Cluster`](kube_gc_engine::Cluster) trait over a
//!   map of objects' metadata: a restMapper, resourceVersions, PATCH, DELETE with preconditions
//!   and propagation, call recording in the fake client's words ([`calls`]) and fault hooks.
//!   Engine and controller tests drive the collector against it.
//! - [`registry`] holds the generic registry store's deletion rules for the garbage-collection
//!   finalizers, and [`patch`] the server's appliers of the collector's patch bodies; simcluster,
//!   the HTTP emulator, serves its requests with both, and its fidelity suite holds them to a
//!   real kube-apiserver.
//!
//! Nothing here ships in the kube-gc binary: the engine and the controller take this crate as
//! a dev-dependency only.
#![warn(missing_docs, missing_debug_implementations, unreachable_pub)]

pub mod calls;
pub mod memory_cluster;
pub mod patch;
pub mod registry;

pub use calls::{Call, Request, Verb};
pub use memory_cluster::{MemoryCluster, ResourceOptions, resource};
