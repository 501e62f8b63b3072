//! client-go's rate-limited work queue (`util/workqueue`), as GC-SPEC §1.5 describes it.
//!
//! A [`WorkQueue`] hands items to workers one at a time, collapses duplicates, and never hands
//! the same item to two workers at once. The garbage collector runs three of them
//! (`graphChanges`, `attemptToDelete`, `attemptToOrphan`); a worker takes an item with
//! [`get`](WorkQueue::get) (threads) or [`get_async`](WorkQueue::get_async) (tasks), and when
//! it is finished calls [`done`](WorkQueue::done), after either [`forget`](WorkQueue::forget)
//! (success) or [`add_rate_limited`](WorkQueue::add_rate_limited) (retry later, with
//! [`RateLimiter`]'s backoff).
//!
//! An item lives in up to four places:
//!
//! - the *dirty* set: it needs processing (it was added and has not been handed out since);
//! - the *FIFO*: it is dirty and waiting for a worker;
//! - the *processing* set: a worker holds it and has not called `done` yet;
//! - the *delay heap*: [`add_after`](WorkQueue::add_after) put it there until its ready time.
//!
//! Item identity is `T`'s [`Eq`] and [`Hash`]. Upstream compares `*node` and `*event`
//! pointers (GC-SPEC §1.5: two node pointers with one UID are two items); give `T` pointer
//! equality (compare with [`Arc::ptr_eq`](std::sync::Arc::ptr_eq)) to get the same behaviour.
//!
//! # Invariants
//!
//! 1. An item is in the FIFO at most once, and only while it is dirty and not processing.
//! 2. An item handed out by `get` stays in the processing set until its `done`; while there it
//!    is never in the FIFO, so it is never handed to a second worker.
//! 3. An item added while processing stays dirty only; its `done` pushes it to the FIFO, so it
//!    is processed again, once, however many times it was added meanwhile.
//! 4. A delayed item has one valid ready time (the earliest asked for); heap entries left behind
//!    by an earlier-wins update are stale and skipped (lazy deletion, identified by a sequence
//!    number).
//! 5. Shutdown is one way. After it, adds are ignored and the delay heap is empty; `get` keeps
//!    handing out what is already in the FIFO (and what `done` requeues) and returns `None`
//!    only once the FIFO is empty.
//!
//! # Concurrency
//!
//! One lock guards all queue state (the dirty and processing sets, the FIFO, the delay heap, the
//! waiter list and the counters); every operation takes it once. Blocking getters sleep on a
//! condition variable; async getters leave a [`Waker`] in a FIFO list. Each push to the FIFO
//! wakes one sleeping thread *and* one async waiter, so no wakeup is lost whichever kind of
//! getter is waiting (at worst one wakes for nothing and waits again); shutdown wakes all.
//! Wakers are invoked after the lock is released. A [`GetFuture`] dropped after it was woken,
//! without taking an item, passes its wakeup on (as tokio's `Notify` does).
//!
//! Delayed items become ready without any caller polling: the first positive
//! [`add_after`](WorkQueue::add_after) spawns one background thread per queue (client-go's
//! `waitingLoop`), which sleeps until the earliest ready time, moves ready items to the FIFO
//! and stops at shutdown; dropping the [`WorkQueue`] shuts it down and joins that thread.
//! Getters also move due items themselves when they find the heap's head ready.
//!
//! The rate limiter has its own lock, taken before (never while) the queue's.
//!
//! The primitives come from `crate::sync`, so `--cfg kube_gc_loom` model-checks this code.
//! Under loom the delay thread is not built (loom does not model time and cannot spawn threads
//! outside a model): items with a positive delay then become ready only when a later `get` finds
//! them due. Loom models exercise `add`, `get`, `get_async`, `done`, `shut_down` and
//! `add_rate_limited` with [`RateLimiterConfig::immediate`], whose delays are all zero.
//!
//! # Upstream
//!
//! `k8s.io/client-go/util/workqueue`: `queue.go` (`Typed`: dirty, processing, FIFO, shutdown
//! and drain), `delaying_queue.go` (`AddAfter`, `waitingLoop`, earlier ready time wins),
//! `rate_limiting_queue.go` (`AddRateLimited`, `Forget`, `NumRequeues`) and
//! `default_rate_limiters.go` (`DefaultTypedControllerRateLimiter`). GC-SPEC §1.5 (semantics)
//! and §8 (metrics).
//!
//! # Examples
//!
//! ```
//! use std::sync::Arc;
//! use std::thread;
//!
//! use kube_gc_engine::WorkQueue;
//!
//! let queue = Arc::new(WorkQueue::new("example"));
//! queue.add("pod-a");
//! queue.add("pod-b");
//! queue.add("pod-a"); // collapsed: "pod-a" is already waiting
//! assert_eq!(queue.len(), 2);
//!
//! let worker = {
//!     let queue = Arc::clone(&queue);
//!     thread::spawn(move || {
//!         let mut processed = Vec::new();
//!         while let Some(item) = queue.get() {
//!             processed.push(item);
//!             queue.forget(&item); // success: reset its backoff
//!             queue.done(&item);
//!         }
//!         processed
//!     })
//! };
//! queue.shut_down(); // the worker still drains what was queued, then sees `None`
//! assert_eq!(worker.join().unwrap(), ["pod-a", "pod-b"]);
//! ```

mod durations;
mod get_future;
mod rate_limiter;
mod state;
#[cfg(all(test, not(kube_gc_loom)))]
mod tests;

use std::cmp::Ordering as CmpOrdering;
use std::collections::{BinaryHeap, VecDeque};
use std::fmt;
use std::hash::Hash;
use std::task::Waker;
use std::time::{Duration, Instant};

use hashbrown::{HashMap, HashSet};

use crate::sync::{Arc, Condvar, Mutex};

pub use durations::QueueDurations;
pub use get_future::GetFuture;
pub use rate_limiter::{RateLimiter, RateLimiterConfig};
use state::{Wakeups, wake_all};

/// A snapshot of a queue's counters and sizes, for the `workqueue_*` metrics (GC-SPEC §8),
/// labelled with [`WorkQueue::name`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct QueueStats {
    /// Items waiting in the FIFO (`workqueue_depth`); equals [`WorkQueue::len`].
    pub depth: usize,
    /// Of `depth`, the items in the urgent lane ([`WorkQueue::add_urgent`]).
    pub urgent: usize,
    /// Items handed out and not yet `done`.
    pub processing: usize,
    /// Items in the delay heap.
    pub waiting: usize,
    /// Adds that made an item dirty (`workqueue_adds_total`); collapsed duplicates and adds
    /// after shutdown are not counted, as upstream.
    pub adds_total: u64,
    /// Calls to `add_after` (and so `add_rate_limited`) before shutdown, whatever their delay
    /// (`workqueue_retries_total`).
    pub retries_total: u64,
    /// How long the items being processed have been held, summed
    /// (`workqueue_unfinished_work_seconds`); zero until [`WorkQueue::set_durations`].
    pub unfinished_work: Duration,
    /// The longest of those (`workqueue_longest_running_processor_seconds`).
    pub longest_running: Duration,
}

/// client-go's `TypedRateLimitingInterface`: a deduplicating FIFO of items with a processing
/// set, delayed adds and per-item rate-limited retries. See the [module docs](self) for the
/// contract.
///
/// Share it between workers behind an [`std::sync::Arc`]. Dropping it shuts it down.
pub struct WorkQueue<T> {
    core: Arc<Core<T>>,
    limiter: RateLimiter<T>,
}

/// What the delay thread shares with the queue handle.
struct Core<T> {
    name: String,
    state: Mutex<State<T>>,
    /// Blocking getters sleep here.
    get_cv: Condvar,
    /// The delay thread sleeps here, until the heap's head is due or the head changes.
    delay_cv: Condvar,
    /// `shut_down_with_drain` sleeps here until the processing set is empty.
    drain_cv: Condvar,
}

struct State<T> {
    /// Items waiting for a worker, each dirty and not processing (invariant 1): the normal
    /// lane.
    queue: VecDeque<T>,
    /// The urgent lane's part filled by [`WorkQueue::add_urgent_first`], newest at the front
    /// (handed out first), each item with its entry number; same invariant as `queue`, and no
    /// item is in two lanes.
    urgent_first: VecDeque<(u64, T)>,
    /// The urgent lane's part filled by [`WorkQueue::add_urgent`], oldest at the front, each
    /// item with its entry number; handed out after `urgent_first`.
    urgent: VecDeque<(u64, T)>,
    /// The next entry number for the urgent lane: lower is older.
    urgent_entries: u64,
    /// Items whose next entry into a lane goes to the urgent one: to `urgent_first` if the
    /// value is true ([`WorkQueue::add_urgent_first`]), else to `urgent`.
    urgent_marks: HashMap<T, bool>,
    /// Urgent items handed out since the last normal one (fairness, [`URGENT_BURST`]).
    urgent_streak: u32,
    /// Urgent items handed out in all (aging, [`URGENT_OLDEST_EVERY`]).
    urgent_handed_out: u32,
    /// Items that need processing: in `queue`, or processing and re-added.
    dirty: HashSet<T>,
    /// Items handed out and not yet `done`.
    processing: HashSet<T>,
    /// Delayed items by ready time; may hold stale entries (invariant 4).
    waiting: BinaryHeap<Delayed<T>>,
    /// The valid `(ready time, sequence number)` of each delayed item.
    waiting_ready_at: HashMap<T, (Instant, u64)>,
    /// Next sequence number for `waiting`, so that equal ready times keep add order.
    next_seq: u64,
    /// Set by `shut_down*`, never cleared.
    shutting_down: bool,
    /// Set by `shut_down_with_drain`, cleared by a later `shut_down` (which stops the wait).
    drain: bool,
    /// Threads counted in `get` around their condvar wait.
    sleeping_getters: usize,
    /// Pending `GetFuture`s in registration order.
    async_waiters: VecDeque<AsyncWaiter>,
    /// Next id for an `AsyncWaiter`.
    next_waiter_id: u64,
    adds_total: u64,
    retries_total: u64,
    /// Wait and work timestamps, once [`WorkQueue::set_durations`] asks for them.
    timings: Option<durations::Timings<T>>,
    /// The delay thread, spawned by the first positive `add_after`, joined on drop.
    #[cfg(not(kube_gc_loom))]
    delay_thread: Option<std::thread::JoinHandle<()>>,
}

struct AsyncWaiter {
    id: u64,
    waker: Waker,
}

/// A delay-heap entry; ordered so that [`BinaryHeap`] pops the earliest ready time first.
struct Delayed<T> {
    ready_at: Instant,
    seq: u64,
    item: T,
}

impl<T> PartialEq for Delayed<T> {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == CmpOrdering::Equal
    }
}

impl<T> Eq for Delayed<T> {}

impl<T> PartialOrd for Delayed<T> {
    fn partial_cmp(&self, other: &Self) -> Option<CmpOrdering> {
        Some(self.cmp(other))
    }
}

impl<T> Ord for Delayed<T> {
    fn cmp(&self, other: &Self) -> CmpOrdering {
        // Reversed: the max-heap's top is the earliest (then first added) entry.
        (other.ready_at, other.seq).cmp(&(self.ready_at, self.seq))
    }
}

/// After this many urgent items in a row, one normal item is handed out (if any waits), so
/// that the normal lane never starves.
pub const URGENT_BURST: u32 = 8;

/// Every this many urgent items handed out, the next is the urgent lane's oldest, whichever
/// part it waits in. [`WorkQueue::add_urgent_first`] hands out the newest first, so without
/// this an item could wait for as long as newer ones keep coming (a steady flood of garbage);
/// with it, an urgent item with `k` older ones waiting is handed out within `(k + 1) *
/// URGENT_OLDEST_EVERY` urgent items, as upstream's FIFO bounds a wait by the queue ahead.
pub const URGENT_OLDEST_EVERY: u32 = 8;

impl<T: Clone + Eq + Hash + Send + 'static> WorkQueue<T> {
    /// Creates a queue with client-go's default controller rate limiter. `name` labels its
    /// metrics (e.g. `garbage_collector_attempt_to_delete`, GC-SPEC §1.5).
    #[must_use]
    pub fn new(name: impl Into<String>) -> Self {
        Self::with_rate_limiter(name, RateLimiterConfig::default())
    }

    /// Creates a queue whose [`add_rate_limited`](Self::add_rate_limited) uses `config`.
    ///
    /// # Panics
    ///
    /// If `config` is invalid; see [`RateLimiter::new`].
    #[must_use]
    pub fn with_rate_limiter(name: impl Into<String>, config: RateLimiterConfig) -> Self {
        let state = State {
            queue: VecDeque::new(),
            urgent_first: VecDeque::new(),
            urgent: VecDeque::new(),
            urgent_entries: 0,
            urgent_marks: HashMap::new(),
            urgent_streak: 0,
            urgent_handed_out: 0,
            dirty: HashSet::new(),
            processing: HashSet::new(),
            waiting: BinaryHeap::new(),
            waiting_ready_at: HashMap::new(),
            next_seq: 0,
            shutting_down: false,
            drain: false,
            sleeping_getters: 0,
            async_waiters: VecDeque::new(),
            next_waiter_id: 0,
            adds_total: 0,
            retries_total: 0,
            timings: None,
            #[cfg(not(kube_gc_loom))]
            delay_thread: None,
        };
        let core = Core {
            name: name.into(),
            state: Mutex::new(state),
            get_cv: Condvar::new(),
            delay_cv: Condvar::new(),
            drain_cv: Condvar::new(),
        };
        Self { core: Arc::new(core), limiter: RateLimiter::new(config) }
    }

    /// Reports every item's wait and work durations to `sink` from now on (client-go's
    /// `MetricsProvider`); items already queued or processing are measured from now.
    pub fn set_durations(&self, sink: std::sync::Arc<dyn QueueDurations>) {
        let mut state = self.core.state.lock();
        let mut timings = durations::Timings::new(sink);
        for item in state.pending_order() {
            timings.added(item);
        }
        for item in state.processing.iter() {
            timings.taken(item);
        }
        state.timings = Some(timings);
    }

    /// Marks `item` as needing processing (client-go `Add`).
    ///
    /// Ignored after shutdown, and when `item` is already dirty (duplicates collapse). If a
    /// worker is processing `item`, it is queued again only at its [`done`](Self::done).
    pub fn add(&self, item: T) {
        let mut wakeups = Wakeups::new();
        let mut state = self.core.state.lock();
        self.core.add_locked(&mut state, item, &mut wakeups);
        drop(state);
        wake_all(wakeups);
    }

    /// Like [`add`](Self::add), into the urgent lane: handed out before items added with
    /// `add`, except that after [`URGENT_BURST`] urgent items in a row one normal item goes
    /// first, so nothing starves. Dedup and the processing rules are `add`'s: an item already
    /// waiting in the normal lane stays there; one being processed re-enters urgent at
    /// [`done`](Self::done).
    ///
    /// Not in client-go: kube-gc uses it to process likely garbage before re-checks.
    pub fn add_urgent(&self, item: T) {
        self.add_urgent_at(item, false);
    }

    /// Like [`add_urgent`](Self::add_urgent), to the front of the urgent lane: the next item
    /// handed out (within the same fairness bound). Items added this way come out last in,
    /// first out, before those added with `add_urgent`, except that every
    /// [`URGENT_OLDEST_EVERY`]th urgent item handed out is the lane's oldest, so that none
    /// waits for ever behind newer ones.
    ///
    /// Not in client-go: kube-gc queues the dependents of an owner just found absent this way,
    /// so that each verification's garbage is collected before the next verification runs.
    pub fn add_urgent_first(&self, item: T) {
        self.add_urgent_at(item, true);
    }

    fn add_urgent_at(&self, item: T, front: bool) {
        let mut wakeups = Wakeups::new();
        let mut state = self.core.state.lock();
        if state.shutting_down {
            return;
        }
        let waiting_in_a_lane = state.dirty.contains(&item) && !state.processing.contains(&item);
        if !waiting_in_a_lane {
            state.urgent_marks.insert(item.clone(), front);
        }
        self.core.add_locked(&mut state, item, &mut wakeups);
        drop(state);
        wake_all(wakeups);
    }

    /// Adds `item` once `delay` has passed (client-go `AddAfter`); a zero delay adds now.
    ///
    /// If `item` is already waiting, the earlier ready time wins. Waiting items are not dirty:
    /// an [`add`](Self::add) meanwhile queues the item at once and does not cancel the delayed
    /// add, as upstream. Ignored after shutdown; shutdown drops the waiting items. A delay so
    /// long that its deadline is not representable is dropped (it could never become ready).
    pub fn add_after(&self, item: T, delay: Duration) {
        let now = if delay.is_zero() { None } else { Some(Instant::now()) };
        let mut wakeups = Wakeups::new();
        let mut state = self.core.state.lock();
        if state.shutting_down {
            return;
        }
        state.retries_total += 1;
        match now {
            None => self.core.add_locked(&mut state, item, &mut wakeups),
            Some(now) => {
                let Some(ready_at) = now.checked_add(delay) else { return };
                if self.core.insert_delayed(&mut state, item, ready_at) {
                    self.core.delay_cv.notify_one();
                }
                #[cfg(not(kube_gc_loom))]
                self.ensure_delay_thread(&mut state);
            }
        }
        drop(state);
        wake_all(wakeups);
    }

    /// Adds `item` after the delay its rate limiter gives (client-go `AddRateLimited`), which
    /// counts one more requeue of `item`.
    pub fn add_rate_limited(&self, item: T) {
        let delay = self.limiter.when(&item);
        self.add_after(item, delay);
    }

    /// Resets `item`'s backoff, after it was processed successfully (client-go `Forget`). It
    /// does not remove `item` from the queue.
    pub fn forget(&self, item: &T) {
        self.limiter.forget(item);
    }

    /// How many times `item` was [`add_rate_limited`](Self::add_rate_limited) since it was last
    /// forgotten (client-go `NumRequeues`).
    #[must_use]
    pub fn num_requeues(&self, item: &T) -> u32 {
        self.limiter.num_requeues(item)
    }

    /// Takes the next item, blocking the thread until there is one (client-go `Get`).
    ///
    /// The item moves from dirty to processing: no other getter receives it before
    /// [`done`](Self::done). After shutdown, items still queued are handed out; `None` means
    /// the queue is shut down and empty. From async code, use [`get_async`](Self::get_async).
    #[must_use = "an item taken must be marked done"]
    pub fn get(&self) -> Option<T> {
        let core = &*self.core;
        let mut wakeups = Wakeups::new();
        let mut state = core.state.lock();
        let item = loop {
            core.promote_due(&mut state, &mut wakeups);
            if let Some(item) = core.take_next(&mut state) {
                break Some(item);
            }
            if state.shutting_down {
                break None;
            }
            state.sleeping_getters += 1;
            state = core.get_cv.wait(state);
            state.sleeping_getters -= 1;
        };
        drop(state);
        wake_all(wakeups);
        item
    }

    /// Takes the next item without blocking the thread: the future resolves as
    /// [`get`](Self::get) returns. It needs no particular runtime.
    ///
    /// Dropping the future before it resolves takes nothing from the queue.
    pub fn get_async(&self) -> GetFuture<'_, T> {
        GetFuture { queue: self, waiter: None, finished: false }
    }

    /// Marks the processing of `item` finished (client-go `Done`); if it was added meanwhile,
    /// it is queued again.
    pub fn done(&self, item: &T) {
        let core = &*self.core;
        let mut wakeups = Wakeups::new();
        let mut state = core.state.lock();
        state.processing.remove(item);
        if let Some(timings) = &mut state.timings {
            timings.done(item);
        }
        // Seeded defect for loom-tests; never enabled in real builds: an item added while it
        // was processing is forgotten instead of requeued.
        #[cfg(all(kube_gc_loom, feature = "loom-defects"))]
        if crate::loom_support::defect_active(crate::loom_support::Defect::QueueDoneDropsReAdd) {
            state.dirty.remove(item);
        }
        if state.dirty.contains(item) {
            state.push_back(item.clone());
            core.notify_one_getter(&mut state, &mut wakeups);
        } else if state.drain && state.processing.is_empty() {
            core.drain_cv.notify_all();
        }
        drop(state);
        wake_all(wakeups);
    }

    #[cfg(not(kube_gc_loom))]
    fn ensure_delay_thread(&self, state: &mut State<T>) {
        if state.delay_thread.is_some() {
            return;
        }
        let core = Arc::clone(&self.core);
        let spawned = std::thread::Builder::new()
            .name(format!("workqueue-{}", self.core.name))
            .spawn(move || core.run_delay_loop());
        match spawned {
            Ok(handle) => state.delay_thread = Some(handle),
            Err(error) => {
                panic!("work queue {:?}: cannot spawn its delay thread: {error}", self.core.name)
            }
        }
    }
}

impl<T> WorkQueue<T> {
    /// The name given at creation, which labels the queue's metrics.
    #[must_use]
    pub fn name(&self) -> &str {
        &self.core.name
    }

    /// Number of items waiting in the FIFO (client-go `Len`): neither the processing nor the
    /// delayed ones.
    #[must_use]
    pub fn len(&self) -> usize {
        self.core.state.lock().queued()
    }

    /// Whether the FIFO is empty.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether [`shut_down`](Self::shut_down) was called (client-go `ShuttingDown`).
    #[must_use]
    pub fn is_shutting_down(&self) -> bool {
        self.core.state.lock().shutting_down
    }

    /// A snapshot of the queue's sizes and counters.
    #[must_use]
    pub fn stats(&self) -> QueueStats {
        let state = self.core.state.lock();
        let (unfinished_work, longest_running) =
            state.timings.as_ref().map_or((Duration::ZERO, Duration::ZERO), |t| t.in_flight());
        QueueStats {
            depth: state.queued(),
            urgent: state.urgent_first.len() + state.urgent.len(),
            processing: state.processing.len(),
            waiting: state.waiting_ready_at.len(),
            adds_total: state.adds_total,
            retries_total: state.retries_total,
            unfinished_work,
            longest_running,
        }
    }

    /// The items queued and not yet handed out, in the order `get` will hand them out (what
    /// upstream's tests observe through their tracking queue). Delayed items are not included.
    #[must_use]
    pub fn pending(&self) -> Vec<T>
    where
        T: Clone,
    {
        let state = self.core.state.lock();
        state.pending_order().cloned().collect()
    }

    /// Stops the queue (client-go `ShutDown`): later adds are ignored, delayed items are
    /// dropped, the delay thread stops, and every blocked getter wakes. Getters still receive
    /// the items already queued, then `None`. Also cancels a pending
    /// [`shut_down_with_drain`](Self::shut_down_with_drain).
    pub fn shut_down(&self) {
        self.core.shut_down(false);
    }

    /// Shuts down as [`shut_down`](Self::shut_down), then blocks until every item handed out
    /// has been marked done (client-go `ShutDownWithDrain`). Items handed out after the
    /// shutdown count too; a concurrent `shut_down` stops the wait.
    pub fn shut_down_with_drain(&self) {
        self.core.shut_down(true);
    }
}

impl<T> Drop for WorkQueue<T> {
    fn drop(&mut self) {
        self.core.shut_down(false);
        #[cfg(not(kube_gc_loom))]
        {
            let delay_thread = self.core.state.lock().delay_thread.take();
            if let Some(handle) = delay_thread {
                // The loop returns once it sees the shutdown; a panic there (from `T`'s `Hash`,
                // `Eq` or `Clone`) has nothing left to report to.
                let _ = handle.join();
            }
        }
    }
}

impl<T> fmt::Debug for WorkQueue<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WorkQueue")
            .field("name", &self.core.name)
            .field("stats", &self.stats())
            .field("shutting_down", &self.is_shutting_down())
            .field("limiter", &self.limiter)
            .finish()
    }
}
