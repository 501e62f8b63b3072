//! Loom models of every concurrent structure of `kube-gc-engine`, one module per structure
//! (tokio's `loom_*.rs` habit); each `#[test]` is one small named interleaving scenario.
//!
//! Built only with `RUSTFLAGS="--cfg kube_gc_loom"` (the engine's private loom cfg); a normal
//! `cargo test --workspace` compiles this file to nothing. Run the suite with `loom-tests/run`;
//! see `loom-tests/README.md` for what each model proves and what it leaves out.
#![cfg(kube_gc_loom)]

mod fixtures;

mod absent_owner_cache;
mod dependents;
mod ingest_batch;
mod lagging_watchers;
mod queue;
mod shard;

/// The same models on the engine's seeded defects (feature `defects`), each required to fail.
#[cfg(feature = "defects")]
mod defects;
