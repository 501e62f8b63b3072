//! A counting global allocator: live bytes and allocation calls, measured, never estimated.
//!
//! [`CountingAlloc`] wraps mimalloc (or, with the `system-alloc` feature, the system allocator)
//! and keeps, per thread stripe, the bytes requested and not yet freed and the number of
//! allocation calls. The harness reads [`live_bytes`] before building a graph and after, with
//! the graph alive, and divides the difference by N: the graph's bytes per object.
//!
//! Counters are striped (one cache line each, a stripe per thread, handed out round-robin at a
//! thread's first allocation) so that two ingest threads do not bounce one counter's cache line
//! on every allocation; a reading sums the stripes. Counts are of *requested* sizes
//! (`Layout::size`); what the allocator rounds up to is not included, which is why the harness
//! also reports peak RSS.
//!
//! # Concurrency
//!
//! Relaxed atomics: a sum taken while other threads allocate is approximate; the harness reads
//! only while the measured structure is quiescent (after the run has joined its threads).
#![allow(unsafe_code)] // a `GlobalAlloc` impl is unsafe by definition; each block argued below

use std::alloc::{GlobalAlloc, Layout};
use std::cell::Cell;
use std::sync::atomic::{AtomicIsize, AtomicUsize, Ordering};

use crossbeam_utils::CachePadded;

/// Number of counter stripes (threads beyond this share stripes, still correctly).
const STRIPES: usize = 32;

#[derive(Default)]
struct Stripe {
    live: AtomicIsize,
    allocs: AtomicUsize,
}

static COUNTERS: [CachePadded<Stripe>; STRIPES] =
    [const { CachePadded::new(Stripe { live: AtomicIsize::new(0), allocs: AtomicUsize::new(0) }) };
        STRIPES];
static NEXT_STRIPE: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    // `const`-initialized and without a destructor: reading it never allocates and never
    // registers a destructor, so it is usable from inside the allocator.
    static STRIPE: Cell<usize> = const { Cell::new(usize::MAX) };
}

#[inline]
fn stripe() -> &'static Stripe {
    let i = STRIPE
        .try_with(|s| {
            let mut i = s.get();
            if i == usize::MAX {
                i = NEXT_STRIPE.fetch_add(1, Ordering::Relaxed) % STRIPES;
                s.set(i);
            }
            i
        })
        .unwrap_or(0); // during thread teardown
    &COUNTERS[i]
}

#[inline]
fn record(delta: isize, calls: usize) {
    let s = stripe();
    s.live.fetch_add(delta, Ordering::Relaxed);
    if calls != 0 {
        s.allocs.fetch_add(calls, Ordering::Relaxed);
    }
}

/// Bytes requested from the global allocator and not yet freed, by every thread.
pub fn live_bytes() -> isize {
    COUNTERS.iter().map(|s| s.live.load(Ordering::Relaxed)).sum()
}

/// Allocation calls (alloc, alloc_zeroed, realloc) so far, by every thread.
pub fn allocation_calls() -> usize {
    COUNTERS.iter().map(|s| s.allocs.load(Ordering::Relaxed)).sum()
}

/// A reading of both counters, to subtract from a later one.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct AllocSnapshot {
    /// [`live_bytes`] at the time.
    pub live_bytes: isize,
    /// [`allocation_calls`] at the time.
    pub calls: usize,
}

impl AllocSnapshot {
    /// Reads both counters now.
    pub fn now() -> AllocSnapshot {
        AllocSnapshot { live_bytes: live_bytes(), calls: allocation_calls() }
    }

    /// Live bytes and calls since `self`.
    pub fn since(self) -> AllocSnapshot {
        let now = AllocSnapshot::now();
        AllocSnapshot {
            live_bytes: now.live_bytes - self.live_bytes,
            calls: now.calls - self.calls,
        }
    }
}

/// Whether this binary allocates through a [`CountingAlloc`] (declared with
/// [`counting_allocator!`](crate::counting_allocator)): an allocation moves the counters.
pub fn is_counting() -> bool {
    let before = allocation_calls();
    let probe = std::hint::black_box(Box::new(0u64));
    let counted = allocation_calls() != before;
    drop(probe);
    counted
}

/// The allocator under the counter: mimalloc, or the system's with the `system-alloc` feature.
#[cfg(not(feature = "system-alloc"))]
pub type Inner = mimalloc::MiMalloc;
/// The allocator under the counter: mimalloc, or the system's with the `system-alloc` feature.
#[cfg(feature = "system-alloc")]
pub type Inner = std::alloc::System;

/// The [`Inner`] allocator [`counting_allocator!`](crate::counting_allocator) wraps.
#[cfg(not(feature = "system-alloc"))]
pub const INNER: Inner = mimalloc::MiMalloc;
/// The [`Inner`] allocator [`counting_allocator!`](crate::counting_allocator) wraps.
#[cfg(feature = "system-alloc")]
pub const INNER: Inner = std::alloc::System;

/// The name of the allocator under the counter (`mimalloc` or `system`).
pub const fn allocator_name() -> &'static str {
    if cfg!(feature = "system-alloc") { "system" } else { "mimalloc" }
}

/// A global allocator that counts what it forwards to `A` (see the module docs).
#[derive(Debug)]
pub struct CountingAlloc<A> {
    inner: A,
}

impl<A> CountingAlloc<A> {
    /// Counts what goes through `inner`.
    pub const fn new(inner: A) -> CountingAlloc<A> {
        CountingAlloc { inner }
    }
}

// SAFETY: every method forwards to `A`'s implementation with the caller's arguments unchanged,
// so `A`'s guarantees (a valid, suitably aligned block of `layout.size()` bytes, or null) are
// the caller's; the counting around it touches only atomics and a const thread-local, never
// allocates and never unwinds.
unsafe impl<A: GlobalAlloc> GlobalAlloc for CountingAlloc<A> {
    #[inline]
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded with the caller's `layout`, which meets `alloc`'s contract.
        let p = unsafe { self.inner.alloc(layout) };
        if !p.is_null() {
            record(layout.size() as isize, 1);
        }
        p
    }

    #[inline]
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: as `alloc`.
        let p = unsafe { self.inner.alloc_zeroed(layout) };
        if !p.is_null() {
            record(layout.size() as isize, 1);
        }
        p
    }

    #[inline]
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: the caller guarantees `ptr` came from this allocator (hence from `A`, as
        // every block we hand out is `A`'s) with this `layout`.
        unsafe { self.inner.dealloc(ptr, layout) };
        record(-(layout.size() as isize), 0);
    }

    #[inline]
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: the caller guarantees `ptr` is `A`'s block of `layout` and that `new_size`
        // is valid for `layout.align()`; forwarded unchanged.
        let p = unsafe { self.inner.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            record(new_size as isize - layout.size() as isize, 1);
        }
        p
    }
}
