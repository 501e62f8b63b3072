//! kube-gc's benchmarks: the warm-up workload, the upstream-design baseline, and the harness
//! that times them side by side.
//!
//! # Where to start
//!
//! - [`workload`] generates `WORKLOAD.md`'s warm-up (`deploy-rs-pods`): every benchmark's
//!   input, byte for byte the same on any machine.
//! - [`baseline`] is `upstream_design`: upstream's graph builder (one lock around one map
//!   keyed by string UIDs, per-field node locks, one event at a time through a client-go work
//!   queue) rebuilt in Rust, the denominator of every ratio.
//! - [`dashmap_graph`] is a second baseline: the same adds into one `DashMap`.
//! - [`harness`] times one warm-up of each and measures its memory with the counting allocator
//!   of [`alloc`]; the `kube-gc-bench warmup` command and `benches/` call it.
//!
//! # Allocator
//!
//! Every binary linked with this crate (the harness, the benches, the tests) allocates through
//! [`alloc::CountingAlloc`] around mimalloc, or around the system allocator with the
//! `system-alloc` feature.
#![deny(unsafe_code)] // `forbid` everywhere but `alloc`, which implements `GlobalAlloc`
#![warn(missing_docs, missing_debug_implementations, unreachable_pub)]

pub mod alloc;
pub mod baseline;
pub mod dashmap_graph;
pub mod harness;
pub mod workload;

#[cfg(not(feature = "system-alloc"))]
#[global_allocator]
static GLOBAL: alloc::CountingAlloc<mimalloc::MiMalloc> =
    alloc::CountingAlloc::new(mimalloc::MiMalloc);

#[cfg(feature = "system-alloc")]
#[global_allocator]
static GLOBAL: alloc::CountingAlloc<std::alloc::System> =
    alloc::CountingAlloc::new(std::alloc::System);
