//! Batched, parallel ingestion of informer events into the [`Graph`].
//!
//! Upstream: `graph_builder.go` (`processGraphChanges` and what it calls); GC-SPEC.md §2.
//!
//! Upstream applies every event of every watched resource one at a time, on one goroutine.
//! kube-gc applies a *batch* of events (an informer's list page, a burst of watch events) in
//! parallel phases over the graph's shards:
//!
//! 0. **Parse** (`prepare.rs`), each thread a contiguous chunk of the batch: UIDs parsed,
//!    strings interned, events bucketed by the shard of their UID.
//! 1. **Diff** (`diff.rs`), by the shard of each event's own UID, in sequence order, reading
//!    the graph but not writing it: each event's owner-reference diff, as edge ops addressed to
//!    the owners' shards.
//! 2. **Apply** (`apply.rs`), by shard: the shard's own events and the edge ops addressed to
//!    it, merged by (sequence number, position in upstream's processing of the event).
//!
//! Then, on the calling thread, the records phase two emitted are put in order and resolved:
//! queue keys of nodes in other shards, `OwnerRefInvalidNamespace` warnings, and the
//! "potentially invalid reference" verdict of each addDependentToOwners loop (upstream stops
//! checking at the first invalid reference; the first one in order is the one that counts).
//!
//! # The contract
//!
//! After any batch, the graph equals what [`SequentialGraph`] (upstream's one-at-a-time
//! algorithm) gives for the same events in the same order, and the items queued include every
//! item it queues. The property tests in `tests/batch_equals_sequential.rs` hold both on random
//! event streams and random batch splits, on one thread and on several.
//!
//! Known differences, none of which changes the graph or drops a queue item:
//! - a warning about a dependent is resolved after the batch, so if that dependent was deleted
//!   later in the same batch, the warning is dropped;
//! - `added` references come in event order, not Go's random map order.
//!
//! # Concurrency
//!
//! [`Ingester::ingest`] takes `&mut self`: one batch at a time, one writer. A batch runs on the
//! calling thread and the ingester's other threads (a pool kept across batches), all its
//! phases in one call, the threads waiting for each other between phases at a barrier
//! (`barrier.rs`); each thread owns a disjoint set of shards. Phase one holds read locks, phase
//! two write locks, one shard at a time; workers reading the graph meanwhile see each shard
//! either before or after its part of the batch.

pub(crate) mod apply;
mod barrier;
pub(crate) mod diff;
pub mod event;
pub mod output;
pub(crate) mod prepare;
pub mod rules;
pub mod sequential;

use std::collections::HashSet;

pub use event::{Event, EventType};
pub use output::{Enqueue, IngestOutput, REASON_OWNER_REF_INVALID_NAMESPACE};
pub use sequential::SequentialGraph;

use self::apply::{Out, OutKind, RefFlag, Step};
use self::barrier::PhaseBarrier;
use self::diff::EdgeOp;
use self::output::invalid_namespace_warning;
use self::prepare::{Prepared, PreparedBatch};
use crate::error::IngestError;
use crate::graph::{Graph, NodeKey};
use crate::sync::{Arc, RwLock, RwLockReadGuard};
// Loom has no thread pool: under the cfg the batches run on loom threads instead.
#[cfg(kube_gc_loom)]
use crate::loom_support::run_on_threads;

/// Applies batches of events to a [`Graph`] (see the module docs).
#[derive(Debug)]
pub struct Ingester {
    graph: Arc<Graph>,
    threads: usize,
    /// The batches' threads besides the caller's (`threads - 1`), kept across batches
    /// (spawning threads for every batch costs more than a small batch's work, and fresh
    /// threads start with cold allocator heaps).
    #[cfg(not(kube_gc_loom))]
    pool: Option<rayon_core::ThreadPool>,
}

/// The incarnation given to the key of a node that was gone by the end of its batch; a worker
/// finds no such node and drops the item.
const GONE: u32 = u32::MAX;

/// What phase zero leaves of one thread's chunk of a batch.
struct Parsed<'e> {
    /// The chunk's events, parsed (`None` where an event did not parse).
    prepared: Vec<Option<Prepared<'e>>>,
    /// The batch positions of the chunk's parsed events, by the shard of their UID.
    own: Vec<Vec<u32>>,
}

impl Parsed<'_> {
    /// No events yet, in a graph of `shards` shards.
    fn empty(shards: usize) -> Self {
        Parsed { prepared: Vec::new(), own: vec![Vec::new(); shards] }
    }

    /// No events yet, with room for `events` of them spread over `shards` shards.
    fn with_capacity(events: usize, shards: usize) -> Self {
        let per_shard = bucket_capacity(events, shards);
        Parsed {
            prepared: Vec::with_capacity(events),
            own: (0..shards).map(|_| Vec::with_capacity(per_shard)).collect(),
        }
    }
}

/// Room for one shard's share of `items` spread over `shards` shards by UID: the mean, a
/// quarter more and a few besides, which a uniform spread rarely exceeds. Grown from empty,
/// the buckets of a warm-up's batches were reallocated four or five times each, which cost
/// more instructions than the events' lookups in the graph (`scripts/bench-instructions`).
/// None while there are fewer items than shards (a watch's trickle): most buckets stay empty.
fn bucket_capacity(items: usize, shards: usize) -> usize {
    match items / shards.max(1) {
        0 => 0,
        mean => mean + mean / 4 + 4,
    }
}

/// What one thread returns from a batch.
#[derive(Default)]
struct ThreadOut {
    /// Events of its chunk that parsed.
    applied: usize,
    /// Why the others did not, in order.
    errors: Vec<IngestError>,
    /// What phase two recorded in its shards.
    records: Vec<Out>,
}

impl Ingester {
    /// Batches smaller than this are applied on the calling thread, whatever the thread count:
    /// waking the pool costs more than the work. (On two cores, `kube-gc-bench warmup --batch
    /// B` of 300k events: at 256 events two threads were 0.92x (owners-first) to 1.0x (random)
    /// the rate of one, at 512 1.07x to 1.2x.)
    pub const SMALL_BATCH: usize = 512;

    /// An ingester for `graph` that uses `threads` threads per phase (at least 1).
    pub fn new(graph: Arc<Graph>, threads: usize) -> Ingester {
        let threads = threads.max(1);
        // The calling thread takes part in every batch, so the pool has one thread fewer.
        #[cfg(not(kube_gc_loom))]
        let pool = (threads > 1)
            .then(|| {
                rayon_core::ThreadPoolBuilder::new()
                    .num_threads(threads - 1)
                    .thread_name(|i| format!("kube-gc-ingest-{i}"))
                    .build()
                    .ok()
            })
            .flatten();
        #[cfg(not(kube_gc_loom))]
        let threads = if pool.is_some() { threads } else { 1 };
        Ingester {
            graph,
            threads,
            #[cfg(not(kube_gc_loom))]
            pool,
        }
    }

    /// The graph this ingester writes.
    pub fn graph(&self) -> &Arc<Graph> {
        &self.graph
    }

    /// Threads used per phase.
    pub fn threads(&self) -> usize {
        self.threads
    }

    /// Applies `events`, in order, as one batch (see the module docs), and returns what
    /// upstream's graph builder would have queued, cached and reported meanwhile.
    ///
    /// Malformed events are skipped and listed in [`IngestOutput::errors`].
    pub fn ingest(&mut self, events: &[Event]) -> IngestOutput {
        // An event whose owner references repeat a UID is applied alone (see `diff.rs`).
        let mut out = IngestOutput::default();
        let mut start = 0;
        for (i, e) in events.iter().enumerate() {
            if repeats_owner_uid(e) {
                if start < i {
                    out.extend(self.ingest_batch(&events[start..i]));
                }
                out.extend(self.ingest_batch(&events[i..=i]));
                start = i + 1;
            }
        }
        if start < events.len() {
            out.extend(self.ingest_batch(&events[start..]));
        }
        out
    }

    fn ingest_batch(&self, events: &[Event]) -> IngestOutput {
        let graph = &*self.graph;
        let shards = graph.shard_count();
        // Under loom every batch uses every thread: the models' batches are small, and the
        // hand-off between threads is what they check.
        let small = !cfg!(kube_gc_loom) && events.len() < Self::SMALL_BATCH;
        let threads = if small { 1 } else { self.threads };
        // Thread t parses the t-th contiguous chunk of the batch, and owns shards t, t +
        // threads, ... in the phases after it.
        let chunk = events.len().div_ceil(threads).max(1);
        let owned_by = |t: usize| (t..shards).step_by(threads);

        // What a thread hands the others between phases: written by its thread before the
        // barrier, read by all after it.
        let barrier = PhaseBarrier::new(threads);
        // (Empty until then: a thread that read too early would miss events, not crash.)
        let parsed: Vec<RwLock<Parsed<'_>>> =
            (0..threads).map(|_| RwLock::new(Parsed::empty(shards))).collect();
        let edge_ops: Vec<RwLock<Vec<Vec<EdgeOp>>>> =
            (0..threads).map(|_| RwLock::new(vec![Vec::new(); shards])).collect();

        let run = |t: usize| -> ThreadOut {
            let _poison = barrier.poison_on_unwind();
            let mut done = ThreadOut::default();

            // Phase 0: parse this thread's chunk and bucket it by shard, in sequence order.
            let start = (t * chunk).min(events.len());
            let end = ((t + 1) * chunk).min(events.len());
            let mut mine = Parsed::with_capacity(end - start, shards);
            for (seq, e) in events.iter().enumerate().take(end).skip(start) {
                match Prepared::parse(e) {
                    Ok(p) => {
                        mine.own[graph.shard_of(p.uid)].push(seq as u32);
                        mine.prepared.push(Some(p));
                        done.applied += 1;
                    }
                    Err(err) => {
                        done.errors.push(err);
                        mine.prepared.push(None);
                    }
                }
            }
            *parsed[t].write() = mine;
            barrier.wait();

            let parsed: Vec<RwLockReadGuard<'_, Parsed<'_>>> =
                parsed.iter().map(RwLock::read).collect();
            let runs: Vec<&[Option<Prepared<'_>>]> =
                parsed.iter().map(|p| &p.prepared[..]).collect();
            let prepared = PreparedBatch::new(&runs, chunk);
            // The events of each of this thread's shards, in sequence order (the chunks are).
            let own: Vec<(usize, Vec<u32>)> = owned_by(t)
                .map(|s| {
                    let mut own = Vec::with_capacity(parsed.iter().map(|p| p.own[s].len()).sum());
                    for p in &parsed {
                        own.extend_from_slice(&p.own[s]);
                    }
                    (s, own)
                })
                .collect();

            // Phase 1: diff, by the shard of each event's UID. (Most events add one edge, in
            // its owner's shard.)
            let mine: usize = own.iter().map(|(_, own)| own.len()).sum();
            let mut ops: Vec<Vec<EdgeOp>> =
                (0..shards).map(|_| Vec::with_capacity(bucket_capacity(mine, shards))).collect();
            for (s, own) in &own {
                if !own.is_empty() {
                    let shard = graph.read_shard(*s);
                    diff::diff_shard(graph, &shard, prepared, own, &mut ops);
                }
            }
            *edge_ops[t].write() = ops;
            barrier.wait();

            // Phase 2: apply, by shard, merged in sequence order.
            let ops: Vec<RwLockReadGuard<'_, Vec<Vec<EdgeOp>>>> =
                edge_ops.iter().map(RwLock::read).collect();
            // Reused from shard to shard: the edges, and the steps merged.
            let mut edges: Vec<(u64, &EdgeOp)> = Vec::new();
            let mut steps: Vec<Step<'_>> = Vec::new();
            for (s, own) in &own {
                let s = *s;
                // The shard's own steps, in order as its events are: each event's Main, and
                // its End only if processTransitions has something to do (reads and writes
                // nothing unless the event starts a deletion: most events need no step for it).
                let own_steps = own.iter().flat_map(|&seq| {
                    let ev = prepared.get(seq).expect("bucketed events parsed");
                    let end = ev.event_type != EventType::Delete
                        && rules::transition(ev.old_state, ev.state) != rules::Transition::None;
                    std::iter::once(Step::Main(seq)).chain(end.then_some(Step::End(seq)))
                });
                // Each thread's ops are a run in order per shard it diffed (about one op each
                // in a large batch). Sort the edges alone, by an order kept beside each, then
                // merge them with the own steps.
                edges.clear();
                edges.reserve(ops.iter().map(|from| from[s].len()).sum());
                for from in &ops {
                    edges.extend(from[s].iter().map(|op| (op.order(), op)));
                }
                edges.sort_by_key(|&(order, _)| order);
                steps.clear();
                steps.reserve(own.len() + edges.len());
                apply::merge_steps(own_steps, &edges, &mut steps);
                if steps.is_empty() {
                    continue;
                }
                // Seeded defect for loom-tests; never enabled in real builds: each step under a
                // write lock of its own, so readers can see the shard half-way through.
                #[cfg(all(kube_gc_loom, feature = "loom-defects"))]
                if crate::loom_support::defect_active(
                    crate::loom_support::Defect::IngestStepwiseApply,
                ) {
                    for step in &steps {
                        let mut shard = graph.write_shard(s);
                        apply::apply_shard(&mut shard, prepared, &[*step], &mut done.records);
                    }
                    continue;
                }
                let mut shard = graph.write_shard(s);
                // Seeded defect for loom-tests; never enabled in real builds: look into the next
                // shard while holding this one's write lock (two locks at once).
                #[cfg(all(kube_gc_loom, feature = "loom-defects"))]
                let _next = crate::loom_support::defect_active(
                    crate::loom_support::Defect::IngestNestedShardLocks,
                )
                .then(|| graph.read_shard((s + 1) % shards));
                apply::apply_shard(&mut shard, prepared, &steps, &mut done.records);
            }
            done
        };

        let mut out = IngestOutput::default();
        let mut records = Vec::new();
        // In thread order, so that the errors stay in sequence order.
        for done in self.run_on_threads(threads, run) {
            out.applied += done.applied;
            out.errors.extend(done.errors);
            records.extend(done.records);
        }
        self.resolve(records, &mut out);
        out
    }

    /// Puts phase two's records in upstream's order and turns them into the output.
    fn resolve(&self, mut records: Vec<Out>, out: &mut IngestOutput) {
        records.sort_by_key(|r| (r.order, r.index));
        // The first potentially invalid reference of each addDependentToOwners loop decides:
        // report it if it names an observed owner in another namespace; queue the dependent.
        let mut verdicts = Vec::new();
        let mut decided: HashSet<u32> = HashSet::new();
        for r in &records {
            if let OutKind::RefCheck { seq, post_sub, dependent, owner, flag } = r.kind
                && decided.insert(seq)
            {
                let order = (u64::from(seq) << 32) | u64::from(post_sub);
                if flag == (RefFlag::Namespace { observed: true }) {
                    verdicts.push(Out {
                        order,
                        index: 0,
                        kind: OutKind::InvalidNamespace { dependent, owner },
                    });
                }
                verdicts.push(Out { order, index: 1, kind: OutKind::EnqueueUid(dependent) });
            }
        }
        if !verdicts.is_empty() {
            records.retain(|r| !matches!(r.kind, OutKind::RefCheck { .. }));
            records.extend(verdicts);
            records.sort_by_key(|r| (r.order, r.index));
        }
        for r in records {
            match r.kind {
                OutKind::Enqueue(e) => out.enqueued.push(e),
                OutKind::EnqueueUid(uid) => {
                    let key = self.graph.key_of(uid).unwrap_or(NodeKey { uid, incarnation: GONE });
                    out.enqueued.push(Enqueue::AttemptToDelete(key));
                }
                OutKind::EnqueueUidLikelyGarbage(uid) => {
                    let key = self.graph.key_of(uid).unwrap_or(NodeKey { uid, incarnation: GONE });
                    out.enqueued.push(Enqueue::LikelyGarbage(key));
                }
                OutKind::AbsentOwner(id) => out.absent_owners.push(id),
                OutKind::InvalidNamespace { dependent, owner } => {
                    let warning = self.graph.with_node(dependent, |d, names| {
                        let r = d.owners.iter().find(|o| o.uid == owner)?;
                        let r = r.to_owner_ref(d, names);
                        Some(invalid_namespace_warning(&d.identity(names), &r))
                    });
                    if let Some(Some(w)) = warning {
                        out.warnings.push(w);
                    }
                }
                OutKind::RefCheck { .. } => {}
            }
        }
    }
}

fn repeats_owner_uid(e: &Event) -> bool {
    let refs = &e.object.owner_references;
    (1..refs.len()).any(|i| refs[..i].iter().any(|p| p.uid == refs[i].uid))
}

impl Ingester {
    /// Runs `job` on a thread of the pool without waiting for it, or on the calling thread if
    /// there is no pool. For work off the graph builder's path, such as freeing a batch: the
    /// pool's threads are idle while the builder turns the next notifications into events.
    /// The job must not panic (the pool would abort the process).
    pub(crate) fn spawn(&self, job: impl FnOnce() + Send + 'static) {
        #[cfg(not(kube_gc_loom))]
        if let Some(pool) = &self.pool {
            pool.spawn(job);
            return;
        }
        job()
    }

    /// Runs `f(0..threads)`, `f(0)` on the calling thread and each other on its own thread of
    /// the pool, and collects the results in thread order. The calls run at the same time, so
    /// that they can wait for each other at a barrier: `threads` is 1 or [`Ingester::threads`].
    ///
    /// The caller works rather than waits: handing the whole batch to the pool and sleeping
    /// until it was done cost a wake-up of the caller per batch (about 50 µs on two cores, a
    /// twentieth of a 4096-event batch), and a thread that only waited.
    fn run_on_threads<R: Send + Sync>(
        &self,
        threads: usize,
        f: impl Fn(usize) -> R + Sync,
    ) -> Vec<R> {
        #[cfg(kube_gc_loom)]
        return run_on_threads(threads, f);
        #[cfg(not(kube_gc_loom))]
        match &self.pool {
            Some(pool) if threads > 1 => {
                debug_assert_eq!(threads, pool.current_num_threads() + 1);
                // Called from one of the pool's own threads, the parts would need one thread
                // more than the pool has, and the first barrier would wait forever.
                debug_assert!(
                    pool.current_thread_index().is_none(),
                    "Ingester::ingest called from its own pool"
                );
                let others: Vec<std::sync::OnceLock<R>> =
                    (1..threads).map(|_| std::sync::OnceLock::new()).collect();
                let first = pool.in_place_scope(|scope| {
                    for (i, slot) in others.iter().enumerate() {
                        let f = &f;
                        scope.spawn(move |_| {
                            // Each part fills its own slot, once.
                            let _ = slot.set(f(i + 1));
                        });
                    }
                    let first = f(0);
                    // The others are usually microseconds behind: spin for them, so that the
                    // scope's end (which sleeps until they are done) rarely has to.
                    barrier::spin_until(|| others.iter().all(|slot| slot.get().is_some()));
                    first
                });
                // The scope returned: every spawned part ran and filled its slot, or its panic
                // was raised here.
                std::iter::once(first)
                    .chain(
                        others
                            .into_iter()
                            .map(|slot| slot.into_inner().expect("the scope waits for every part")),
                    )
                    .collect()
            }
            _ => vec![f(0)],
        }
    }
}
