//! Upstream's unit tests of the garbage collector, carried over to kube-gc.
//!
//! Source: <https://github.com/kubernetes/kubernetes/blob/master/pkg/controller/garbagecollector/garbagecollector_test.go>
//! (v1.30-v1.33; GC-SPEC.md §9.A). One file per Go test, snake-cased, beside
//! `support.rs`; TestConflictingData's scripts are `conflicting_data::case_01_…` to
//! `case_16_…`, each a table of `Step`s as upstream writes them, with upstream's step numbers
//! in the comments. TestGetAlternateOwnerIdentity
//! (graph_builder_test.go) lives beside the function it tests, in `src/ingest/rules.rs`, because
//! that function is crate-private.
//!
//! Where kube-gc's model differs from upstream's, the test says so:
//!
//! - Upstream queues `*node` pointers and clones a virtual node into a new pointer when it
//!   re-identifies it; kube-gc keeps one node per UID and bumps its incarnation instead. A
//!   queued pointer to the clone's predecessor is asserted as [`Queued::Old`] (its UID, and the
//!   fact that its incarnation is older than the node's), where upstream asserts the old
//!   pointer's identity and `virtual: true`.
//! - kube-gc rejects owner references without a kind or apiVersion at ingestion (the API
//!   server never stores one), so TestProcessEvent's UID-only references carry `v1`/`Pod`.
//! - Upstream's fake HTTP server answers a pod without a resourceVersion; [`MemoryCluster`]
//!   assigns one to every object, so deletes carry a resourceVersion precondition (§5.4).

mod support;

mod absent_owner_cache;
mod attempt_to_delete_item;
mod conflicting_data;
mod dependents_race;
mod orphan_dependents_failure;
mod process_event;

#[allow(unused_imports)] // each test file takes what it needs with `use super::*`
use support::*;
