//! What the loom models of `loom-tests/` need from inside the engine. Built only under
//! `--cfg kube_gc_loom`; not part of the API, never part of a real build.
//!
//! - The loom twin of the ingester's thread runner ([`run_on_threads`]): loom has no thread
//!   pool, so under the cfg the threads of each batch of
//!   [`Ingester::ingest`](crate::Ingester::ingest) are `loom::thread`s started by this function
//!   instead of the pool's. What they run, the phases and the barrier between them
//!   (`ingest/mod.rs`, `ingest/barrier.rs`), is the shipping code, unchanged.
//! - [`dependents_are_hashed`], an observer for the dependents model.
//! - With the `loom-defects` feature, the seeded defects: [`Defect`] names each, and
//!   [`with_defect`] turns one on for the duration of a closure (a loom model). One build hosts
//!   them all; each is inert unless switched on, so the real models pass on that build too.

use std::panic::{self, AssertUnwindSafe};

use crate::sync::Mutex;

/// Runs `f(0..threads)` on loom threads (`f(0)` on the caller's) and collects the results in
/// thread order: `std::thread::scope` for the engine's loom build.
///
/// Every thread is joined before this returns or unwinds, as `scope` guarantees; a panic in
/// `f(0)` is caught, the other threads are joined, and the panic is resumed.
pub(crate) fn run_on_threads<R: Send>(threads: usize, f: impl Fn(usize) -> R + Sync) -> Vec<R> {
    if threads == 1 {
        return vec![f(0)];
    }
    // Written by each thread, read after its join. A loom lock (through the facade), so that
    // loom sees the hand-off: a read not ordered after the write is a race it explores.
    let slots: Vec<Mutex<Option<R>>> = (0..threads).map(|_| Mutex::new(None)).collect();
    let (f, slots_ref) = (&f, &slots);
    let handles: Vec<loom::thread::JoinHandle<()>> = (1..threads)
        .map(|t| {
            let job: Box<dyn FnOnce() + '_> = Box::new(move || {
                let result = f(t);
                *slots_ref[t].lock() = Some(result);
            });
            // SAFETY: `job` borrows `f` and `slots`, which live until this function returns.
            // Every thread spawned here is joined below before it returns, including when
            // `f(0)` panics (caught, then resumed after the joins). If a spawned thread panics,
            // or loom itself fails the execution (a deadlock, a join that panics), loom ends
            // that execution and never resumes any of its threads again, so no thread can run
            // after the borrowed data is gone. Only the lifetime changes.
            #[allow(unsafe_code)]
            let job: Box<dyn FnOnce() + 'static> = unsafe { std::mem::transmute(job) };
            loom::thread::spawn(job)
        })
        .collect();
    let own = panic::catch_unwind(AssertUnwindSafe(|| f(0)));
    for handle in handles {
        // A panicking loom thread ends the execution; it never reaches this join.
        handle.join().expect("ingest thread panicked");
    }
    let own = own.unwrap_or_else(|payload| panic::resume_unwind(payload));

    let mut results = Vec::with_capacity(threads);
    results.push(own);
    for slot in &slots[1..] {
        let result = slot.lock().take();
        results.push(result.expect("joined thread wrote its result"));
    }
    results
}

/// Whether the dependents of the node with `uid` are kept hashed (`None` if it is absent): lets
/// a model check that it really crossed the inline limit, which the API does not show.
pub fn dependents_are_hashed(graph: &crate::Graph, uid: crate::Uid) -> Option<bool> {
    graph.with_node(uid, |n, _| n.dependents.is_hashed())
}

/// A seeded defect: a few lines at the exact place in the engine, each commented "seeded
/// defect for loom-tests; never enabled in real builds", compiled only with `--cfg kube_gc_loom`
/// and the `loom-defects` feature, and active only inside [`with_defect`].
#[cfg(feature = "loom-defects")]
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Defect {
    /// `Graph::node` copies a node's owners under one read lock and the rest under a second
    /// one, so a reader can see a half-updated node.
    ShardTornRead,
    /// `Graph::dependents` counts the dependents under one read lock and copies that many
    /// under a second one, so a reader can see a set that never existed.
    DependentsTornSnapshot,
    /// The barrier between the phases of a batch lets every thread through at once, so a
    /// thread can read another's phase output before it is written.
    IngestBarrierSkipped,
    /// Phase two applies a shard's steps each under its own write lock, so a reader can see a
    /// shard, and an event's node, half-way through its part of the batch.
    IngestStepwiseApply,
    /// Phase two takes the next shard's read lock while it holds its own shard's write lock,
    /// breaking the rule that no code path holds two shard locks at once: two phase threads
    /// can deadlock.
    IngestNestedShardLocks,
    /// `WorkQueue::get` does not put the item it hands out into the processing set.
    QueueNoProcessingSet,
    /// `WorkQueue::done` drops an item that was added while it was processing.
    QueueDoneDropsReAdd,
    /// `AbsentOwnerCache::add` inserts and evicts in two locked sections.
    AbsentOwnerCacheSplitAdd,
    /// `LaggingWatchers::admit` decides to hold an owner under one lock and records it under a
    /// second one, so a watcher catching up in between releases the others without it.
    LaggingWatchersSplitHold,
}

#[cfg(feature = "loom-defects")]
thread_local! {
    /// The active defect. Thread-local on purpose: loom runs all threads of a model on the
    /// OS thread that called `loom::model`, so the switch reaches every thread of that model
    /// and no model the test harness runs in parallel.
    static ACTIVE: std::cell::Cell<Option<Defect>> = const { std::cell::Cell::new(None) };
}

/// Runs `f` (a loom model) with `defect` switched on.
#[cfg(feature = "loom-defects")]
pub fn with_defect<R>(defect: Defect, f: impl FnOnce() -> R) -> R {
    struct Reset(Option<Defect>);
    impl Drop for Reset {
        fn drop(&mut self) {
            ACTIVE.with(|active| active.set(self.0));
        }
    }
    let _reset = Reset(ACTIVE.with(|active| active.replace(Some(defect))));
    f()
}

/// Whether `defect` is switched on (see [`with_defect`]).
#[cfg(feature = "loom-defects")]
pub(crate) fn defect_active(defect: Defect) -> bool {
    ACTIVE.with(|active| active.get() == Some(defect))
}
