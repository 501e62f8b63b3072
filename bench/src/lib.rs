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
//! A library does not choose the allocator; each binary that measures memory does, with
//! [`counting_allocator!`] (the harness, the benches, the allocation tests): it allocates
//! through [`alloc::CountingAlloc`] around mimalloc, or around the system allocator with the
//! `system-alloc` feature. Measuring without it is an error ([`alloc::is_counting`]).
#![deny(unsafe_code)] // `forbid` everywhere but `alloc`, which implements `GlobalAlloc`
#![warn(missing_docs, missing_debug_implementations, unreachable_pub)]

pub mod alloc;
pub mod baseline;
pub mod dashmap_graph;
pub mod harness;
pub mod workload;

/// Declares this binary's global allocator: [`alloc::CountingAlloc`] around mimalloc, or around
/// the system allocator with the `system-alloc` feature. Invoke once, at a binary's root.
#[macro_export]
macro_rules! counting_allocator {
    () => {
        #[global_allocator]
        static GLOBAL: $crate::alloc::CountingAlloc<$crate::alloc::Inner> =
            $crate::alloc::CountingAlloc::new($crate::alloc::INNER);
    };
}
