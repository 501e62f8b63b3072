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

use std::cmp::Ordering as CmpOrdering;
use std::collections::{BinaryHeap, VecDeque};
use std::fmt;
use std::future::Future;
use std::hash::Hash;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use hashbrown::hash_set::Entry;
use hashbrown::{HashMap, HashSet};

use crate::sync::{Arc, Condvar, Mutex};

const NANOS_PER_SEC: u128 = 1_000_000_000;

/// Settings of a [`RateLimiter`]: the maximum of a per-item exponential backoff and an overall
/// token bucket.
///
/// [`Default`] is client-go's `DefaultTypedControllerRateLimiter`, which the garbage collector's
/// three queues use (GC-SPEC §1.5): `5ms * 2^failures` capped at 1000 s, and 10 qps with a
/// burst of 100.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RateLimiterConfig {
    /// Delay of an item's first retry; each further retry doubles it. Default 5 ms.
    pub base_delay: Duration,
    /// Cap on the per-item delay. Default 1000 s.
    pub max_delay: Duration,
    /// Refill rate of the token bucket shared by all items, in tokens per second. Must be
    /// positive; [`f64::INFINITY`] disables the bucket. Default 10.
    pub qps: f64,
    /// Capacity of the token bucket, which starts full. Must be at least 1 unless `qps` is
    /// infinite. Default 100.
    pub burst: u32,
}

impl Default for RateLimiterConfig {
    /// client-go's `DefaultTypedControllerRateLimiter`:
    /// `NewTypedItemExponentialFailureRateLimiter(5*time.Millisecond, 1000*time.Second)` and
    /// `TypedBucketRateLimiter{Limiter: rate.NewLimiter(rate.Limit(10), 100)}`.
    fn default() -> Self {
        Self {
            base_delay: Duration::from_millis(5),
            max_delay: Duration::from_secs(1000),
            qps: 10.0,
            burst: 100,
        }
    }
}

impl RateLimiterConfig {
    /// A limiter that never delays (zero base delay, no token bucket) but still counts
    /// requeues: for tests and loom models, where `add_rate_limited` must add at once.
    #[must_use]
    pub const fn immediate() -> Self {
        Self { base_delay: Duration::ZERO, max_delay: Duration::ZERO, qps: f64::INFINITY, burst: 1 }
    }

    /// Sets [`base_delay`](Self::base_delay).
    #[must_use]
    pub const fn with_base_delay(mut self, base_delay: Duration) -> Self {
        self.base_delay = base_delay;
        self
    }

    /// Sets [`max_delay`](Self::max_delay).
    #[must_use]
    pub const fn with_max_delay(mut self, max_delay: Duration) -> Self {
        self.max_delay = max_delay;
        self
    }

    /// Sets [`qps`](Self::qps) and [`burst`](Self::burst).
    #[must_use]
    pub const fn with_bucket(mut self, qps: f64, burst: u32) -> Self {
        self.qps = qps;
        self.burst = burst;
        self
    }
}

/// client-go's default controller rate limiter: how long an item must wait before its next
/// retry.
///
/// [`when`](Self::when) returns the maximum of
///
/// - a per-item exponential backoff, `base_delay * 2^failures` capped at `max_delay`, where
///   `failures` counts the previous `when` calls for that item since its last
///   [`forget`](Self::forget) (`ItemExponentialFailureRateLimiter`); and
/// - the delay of a token reserved from a bucket shared by all items: `burst` tokens at first,
///   refilled at `qps` (`BucketRateLimiter` over `golang.org/x/time/rate`). Both are consulted
///   on every call, so every `when` takes a token, as upstream's `MaxOfRateLimiter` does.
///
/// The clock is an argument of [`when_at`](Self::when_at), so the limiter can be driven with
/// made-up instants.
pub struct RateLimiter<T> {
    config: RateLimiterConfig,
    state: Mutex<LimiterState<T>>,
}

struct LimiterState<T> {
    /// Per-item failure counts; an item is absent once forgotten (or never limited).
    failures: HashMap<T, u32>,
    /// Tokens in the bucket as of `last`; negative when reservations are outstanding.
    tokens: f64,
    /// Instant of the last reservation; `None` before the first, when the bucket is full.
    last: Option<Instant>,
}

impl<T> fmt::Debug for RateLimiter<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = self.state.lock();
        f.debug_struct("RateLimiter")
            .field("config", &self.config)
            .field("items", &state.failures.len())
            .field("tokens", &state.tokens)
            .finish()
    }
}

impl<T: Clone + Eq + Hash> RateLimiter<T> {
    /// Creates a limiter; the bucket starts full.
    ///
    /// # Panics
    ///
    /// If `config.qps` is not positive (or is NaN), or if `config.burst` is 0 with a finite
    /// `qps` (upstream's limiter would then never grant a token).
    #[must_use]
    pub fn new(config: RateLimiterConfig) -> Self {
        assert!(config.qps > 0.0, "rate limiter qps must be positive, got {}", config.qps);
        assert!(
            config.burst > 0 || config.qps.is_infinite(),
            "rate limiter burst must be at least 1 with a finite qps"
        );
        let state = LimiterState { failures: HashMap::new(), tokens: 0.0, last: None };
        Self { config, state: Mutex::new(state) }
    }

    /// The settings this limiter was created with.
    #[must_use]
    pub fn config(&self) -> &RateLimiterConfig {
        &self.config
    }

    /// How long `item` must wait before its next retry, as of now; counts one failure of
    /// `item` and reserves a token. See [`when_at`](Self::when_at).
    pub fn when(&self, item: &T) -> Duration {
        self.when_at(item, Instant::now())
    }

    /// How long `item` must wait before its next retry, as of `now`; counts one failure of
    /// `item` and reserves a token.
    ///
    /// `now` earlier than a previous call's counts as no time passed (as `x/time/rate` does).
    pub fn when_at(&self, item: &T, now: Instant) -> Duration {
        let mut state = self.state.lock();
        let failures = match state.failures.get_mut(item) {
            Some(count) => {
                let previous = *count;
                *count = count.saturating_add(1);
                previous
            }
            None => {
                state.failures.insert(item.clone(), 1);
                0
            }
        };
        let backoff = exponential_backoff(&self.config, failures);
        let bucket = state.reserve_token(&self.config, now);
        backoff.max(bucket)
    }

    /// Resets `item`'s failure count (the bucket is shared and keeps its state).
    pub fn forget(&self, item: &T) {
        self.state.lock().failures.remove(item);
    }

    /// How many times `item` has been limited since it was last forgotten.
    #[must_use]
    pub fn num_requeues(&self, item: &T) -> u32 {
        self.state.lock().failures.get(item).copied().unwrap_or(0)
    }
}

impl<T> LimiterState<T> {
    /// `rate.Limiter.Reserve().Delay()`: refill for the time elapsed since the last
    /// reservation (up to `burst`), take one token, and return how long until the debt is paid.
    fn reserve_token(&mut self, config: &RateLimiterConfig, now: Instant) -> Duration {
        if config.qps.is_infinite() {
            return Duration::ZERO;
        }
        let burst = f64::from(config.burst);
        let available = match self.last {
            None => burst,
            Some(last) => {
                let refill = now.saturating_duration_since(last).as_secs_f64() * config.qps;
                (self.tokens + refill).min(burst)
            }
        };
        let remaining = available - 1.0;
        self.tokens = remaining;
        self.last = Some(now);
        if remaining >= 0.0 {
            Duration::ZERO
        } else {
            Duration::try_from_secs_f64(-remaining / config.qps).unwrap_or(Duration::MAX)
        }
    }
}

/// `base_delay * 2^failures`, capped at `max_delay` (overflow counts as over the cap).
fn exponential_backoff(config: &RateLimiterConfig, failures: u32) -> Duration {
    let calculated = 2u128
        .checked_pow(failures)
        .and_then(|factor| config.base_delay.as_nanos().checked_mul(factor))
        .unwrap_or(u128::MAX);
    if calculated >= config.max_delay.as_nanos() {
        return config.max_delay;
    }
    // `calculated < max_delay.as_nanos()`, so its whole seconds fit `max_delay`'s u64 seconds.
    Duration::new((calculated / NANOS_PER_SEC) as u64, (calculated % NANOS_PER_SEC) as u32)
}

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
    /// The urgent lane (see [`WorkQueue::add_urgent`]); same invariant as `queue`, and no item
    /// is in both.
    urgent: VecDeque<T>,
    /// Items whose next entry into a lane goes to the urgent one: to its front if the value
    /// is true ([`WorkQueue::add_urgent_first`]), else to its back.
    urgent_marks: HashMap<T, bool>,
    /// Urgent items handed out since the last normal one (fairness, [`URGENT_BURST`]).
    urgent_streak: u32,
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

impl<T: Clone + Eq + Hash> State<T> {
    /// Puts an item that just became ready into its lane (the front of the urgent lane for
    /// [`WorkQueue::add_urgent_first`]).
    fn push_back(&mut self, item: T) {
        match self.urgent_marks.remove(&item) {
            Some(true) => self.urgent.push_front(item),
            Some(false) => self.urgent.push_back(item),
            None => self.queue.push_back(item),
        }
    }

    /// Takes the next item: urgent first, but never more than [`URGENT_BURST`] in a row while
    /// normal items wait.
    fn pop_front(&mut self) -> Option<T> {
        let take_urgent =
            !self.urgent.is_empty() && (self.urgent_streak < URGENT_BURST || self.queue.is_empty());
        if take_urgent {
            self.urgent_streak += 1;
            self.urgent.pop_front()
        } else {
            self.urgent_streak = 0;
            self.queue.pop_front()
        }
    }
}

impl<T> State<T> {
    /// Items waiting in either lane.
    fn queued(&self) -> usize {
        self.queue.len() + self.urgent.len()
    }

    /// The waiting items, urgent lane first (the order `get` hands them out, ignoring the
    /// fairness interleave).
    fn pending_order(&self) -> impl Iterator<Item = &T> {
        self.urgent.iter().chain(self.queue.iter())
    }

    /// Removes the waiter `id` if it is still registered; `false` means a notifier took it.
    fn remove_waiter(&mut self, id: u64) -> bool {
        match self.async_waiters.iter().position(|waiter| waiter.id == id) {
            Some(index) => {
                self.async_waiters.remove(index);
                true
            }
            None => false,
        }
    }
}

/// Wakers to invoke once the state lock is released.
type Wakeups = Vec<Waker>;

fn wake_all(wakeups: Wakeups) {
    for waker in wakeups {
        waker.wake();
    }
}

impl<T> Core<T> {
    /// Wakes one sleeping thread and one async waiter for an item just pushed to the FIFO.
    fn notify_one_getter(&self, state: &mut State<T>, wakeups: &mut Wakeups) {
        if state.sleeping_getters > 0 {
            self.get_cv.notify_one();
        }
        if let Some(waiter) = state.async_waiters.pop_front() {
            wakeups.push(waiter.waker);
        }
    }

    /// Marks the queue shut down, drops the delayed items and wakes everybody; with `drain`,
    /// then waits until no item is processing (or a plain shutdown cancels the drain).
    fn shut_down(&self, drain: bool) {
        let mut state = self.state.lock();
        state.shutting_down = true;
        state.drain = drain;
        state.waiting.clear();
        state.waiting_ready_at.clear();
        let wakeups: Wakeups = state.async_waiters.drain(..).map(|waiter| waiter.waker).collect();
        self.get_cv.notify_all();
        self.delay_cv.notify_all();
        self.drain_cv.notify_all();
        drop(state);
        wake_all(wakeups);

        if drain {
            let mut state = self.state.lock();
            while state.drain && !state.processing.is_empty() {
                state = self.drain_cv.wait(state);
            }
        }
    }
}

impl<T: Clone + Eq + Hash> Core<T> {
    /// `Add` with the lock held.
    fn add_locked(&self, state: &mut State<T>, item: T, wakeups: &mut Wakeups) {
        if state.shutting_down {
            return;
        }
        let item = match state.dirty.entry(item) {
            Entry::Occupied(_) => return,
            Entry::Vacant(slot) => slot.insert().get().clone(),
        };
        state.adds_total += 1;
        if state.processing.contains(&item) {
            return;
        }
        state.push_back(item);
        self.notify_one_getter(state, wakeups);
    }

    /// Pops the FIFO head and moves it from dirty to processing.
    fn take_next(&self, state: &mut State<T>) -> Option<T> {
        let item = state.pop_front()?;
        state.dirty.remove(&item);
        // Seeded defect for loom-tests; never enabled in real builds: the item handed out is
        // not recorded as processing, so a re-add queues it for a second worker at once.
        #[cfg(all(kube_gc_loom, feature = "loom-defects"))]
        if crate::loom_support::defect_active(crate::loom_support::Defect::QueueNoProcessingSet) {
            return Some(item);
        }
        state.processing.insert(item.clone());
        Some(item)
    }

    /// Puts `item` in the delay heap, unless it already waits with an earlier or equal ready
    /// time. Returns whether the heap's head changed (the delay thread must re-arm).
    fn insert_delayed(&self, state: &mut State<T>, item: T, ready_at: Instant) -> bool {
        let seq = state.next_seq;
        match state.waiting_ready_at.get_mut(&item) {
            Some((existing, _)) if *existing <= ready_at => return false,
            Some(valid) => *valid = (ready_at, seq),
            None => {
                state.waiting_ready_at.insert(item.clone(), (ready_at, seq));
            }
        }
        state.next_seq += 1;
        let new_head = state.waiting.peek().is_none_or(|head| ready_at < head.ready_at);
        state.waiting.push(Delayed { ready_at, seq, item });
        new_head
    }

    /// Moves every delayed item due at `now` to the FIFO (via `add`); returns the ready time
    /// of the next entry still waiting.
    fn promote_ready(
        &self,
        state: &mut State<T>,
        now: Instant,
        wakeups: &mut Wakeups,
    ) -> Option<Instant> {
        while let Some(head) = state.waiting.peek() {
            if head.ready_at > now {
                return Some(head.ready_at);
            }
            let Some(Delayed { seq, item, .. }) = state.waiting.pop() else { break };
            if state.waiting_ready_at.get(&item).is_some_and(|&(_, valid)| valid == seq) {
                state.waiting_ready_at.remove(&item);
                self.add_locked(state, item, wakeups);
            }
        }
        None
    }

    /// Lets a getter move due items itself when the heap's head is ready.
    fn promote_due(&self, state: &mut State<T>, wakeups: &mut Wakeups) {
        if !state.waiting.is_empty() {
            self.promote_ready(state, Instant::now(), wakeups);
        }
    }

    /// client-go's `waitingLoop`: sleeps until the heap's head is due, moves due items to the
    /// FIFO, and returns at shutdown.
    #[cfg(not(kube_gc_loom))]
    fn run_delay_loop(&self) {
        let mut state = self.state.lock();
        while !state.shutting_down {
            let mut wakeups = Wakeups::new();
            let next = self.promote_ready(&mut state, Instant::now(), &mut wakeups);
            if !wakeups.is_empty() {
                drop(state);
                wake_all(wakeups);
                state = self.state.lock();
                continue;
            }
            state = match next {
                Some(deadline) => self.delay_cv.wait_until(state, deadline),
                None => self.delay_cv.wait(state),
            };
        }
    }
}

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
            urgent: VecDeque::new(),
            urgent_marks: HashMap::new(),
            urgent_streak: 0,
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
    /// first out, before those added with `add_urgent`.
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
        QueueStats {
            depth: state.queued(),
            urgent: state.urgent.len(),
            processing: state.processing.len(),
            waiting: state.waiting_ready_at.len(),
            adds_total: state.adds_total,
            retries_total: state.retries_total,
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

/// The future of [`WorkQueue::get_async`]: resolves to the next item, or `None` once the queue
/// is shut down and empty.
///
/// It registers its [`Waker`] with the queue while pending. Dropped after being woken but
/// before taking an item, it passes the wakeup on to another getter.
#[must_use = "futures do nothing unless polled"]
pub struct GetFuture<'a, T> {
    queue: &'a WorkQueue<T>,
    /// Our registration in `State::async_waiters`, once we have returned `Pending`.
    waiter: Option<u64>,
    /// Set once we returned `Ready`.
    finished: bool,
}

impl<T: Clone + Eq + Hash + Send + 'static> Future for GetFuture<'_, T> {
    type Output = Option<T>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        assert!(!this.finished, "GetFuture polled after completion");
        let core = &*this.queue.core;
        let mut wakeups = Wakeups::new();
        let mut state = core.state.lock();
        core.promote_due(&mut state, &mut wakeups);
        let poll = match core.take_next(&mut state) {
            Some(item) => Poll::Ready(Some(item)),
            None if state.shutting_down => Poll::Ready(None),
            None => {
                register(&mut state, &mut this.waiter, cx.waker());
                Poll::Pending
            }
        };
        if poll.is_ready() {
            this.finished = true;
            if let Some(id) = this.waiter.take() {
                state.remove_waiter(id);
            }
        }
        drop(state);
        wake_all(wakeups);
        poll
    }
}

/// Registers (or refreshes) a pending future's waker; one woken earlier registers again at
/// the back.
fn register<T>(state: &mut State<T>, waiter: &mut Option<u64>, waker: &Waker) {
    let id = *waiter.get_or_insert_with(|| {
        let id = state.next_waiter_id;
        state.next_waiter_id += 1;
        id
    });
    match state.async_waiters.iter_mut().find(|registered| registered.id == id) {
        Some(registered) => registered.waker.clone_from(waker),
        None => state.async_waiters.push_back(AsyncWaiter { id, waker: waker.clone() }),
    }
}

impl<T> Drop for GetFuture<'_, T> {
    fn drop(&mut self) {
        let Some(id) = self.waiter.take() else { return };
        let core = &*self.queue.core;
        let mut wakeups = Wakeups::new();
        let mut state = core.state.lock();
        if !state.remove_waiter(id) && state.queued() > 0 {
            // A notifier took our registration for an item we will now never take.
            core.notify_one_getter(&mut state, &mut wakeups);
        }
        drop(state);
        wake_all(wakeups);
    }
}

impl<T> fmt::Debug for GetFuture<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GetFuture")
            .field("queue", &self.queue.core.name)
            .field("waiter", &self.waiter)
            .field("finished", &self.finished)
            .finish()
    }
}

#[cfg(all(test, not(kube_gc_loom)))]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::{Arc, Mutex, mpsc};
    use std::task::Wake;
    use std::thread;

    use super::*;

    /// Generous bound for "eventually": only a hang reaches it, never a slow machine.
    const EVENTUALLY: Duration = Duration::from_secs(10);

    /// Runs `f` on a thread and returns its result, failing the test if it takes longer than
    /// [`EVENTUALLY`] (instead of hanging the test binary).
    fn within<R: Send + 'static>(what: &str, f: impl FnOnce() -> R + Send + 'static) -> R {
        let (tx, rx) = mpsc::channel();
        thread::spawn(move || {
            let _ = tx.send(f());
        });
        rx.recv_timeout(EVENTUALLY).unwrap_or_else(|_| panic!("{what}: did not finish"))
    }

    /// Spins until `condition` holds, failing the test after [`EVENTUALLY`].
    fn wait_for(what: &str, condition: impl Fn() -> bool) {
        let start = Instant::now();
        while !condition() {
            assert!(start.elapsed() < EVENTUALLY, "{what}: never happened");
            thread::yield_now();
        }
    }

    /// A waker that counts its wakes.
    #[derive(Default)]
    struct CountingWaker(AtomicUsize);

    impl Wake for CountingWaker {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    impl CountingWaker {
        fn wakes(&self) -> usize {
            self.0.load(Ordering::SeqCst)
        }
    }

    fn poll_once<F: Future + Unpin>(future: &mut F, waker: &Arc<CountingWaker>) -> Poll<F::Output> {
        let waker = Waker::from(Arc::clone(waker));
        Pin::new(future).poll(&mut Context::from_waker(&waker))
    }

    fn drain<T: Clone + Eq + Hash + Send + 'static>(queue: &WorkQueue<T>) -> Vec<T> {
        let mut items = Vec::new();
        while !queue.is_empty() {
            let item = queue.get().expect("queue is not empty");
            queue.done(&item);
            items.push(item);
        }
        items
    }

    #[test]
    fn queue_should_collapse_duplicates() {
        let queue = WorkQueue::new("test");
        queue.add(1);
        queue.add(2);
        queue.add(1);
        queue.add(1);
        assert_eq!(queue.len(), 2);
        assert_eq!(drain(&queue), [1, 2]);
        assert_eq!(queue.stats().adds_total, 2);
    }

    #[test]
    fn queue_should_hand_out_items_in_fifo_order() {
        let queue = WorkQueue::new("test");
        for i in 0..10 {
            queue.add(i);
        }
        assert_eq!(drain(&queue), (0..10).collect::<Vec<_>>());
    }

    #[test]
    fn queue_should_not_requeue_a_processing_item_until_done() {
        let queue = WorkQueue::new("test");
        queue.add("x");
        assert_eq!(queue.get(), Some("x"));
        queue.add("x");
        queue.add("x");
        assert_eq!(queue.len(), 0, "x is processing: its re-add waits for done");
        assert_eq!(queue.stats().processing, 1);
        queue.done(&"x");
        assert_eq!(queue.len(), 1, "x was re-added while processing: done queues it once");
        assert_eq!(queue.get(), Some("x"));
        queue.done(&"x");
        assert!(queue.is_empty(), "x was not re-added the second time");
    }

    #[test]
    fn queue_should_never_hand_an_item_to_two_getters_at_once() {
        const ITEMS: usize = 8;
        const ADDS_PER_PRODUCER: usize = 2_000;
        let queue = Arc::new(WorkQueue::new("test"));
        let in_flight = Arc::new(Mutex::new(HashSet::new()));
        let violations = Arc::new(AtomicUsize::new(0));
        let processed = Arc::new(AtomicUsize::new(0));

        let workers: Vec<_> = (0..4)
            .map(|_| {
                let (queue, in_flight) = (Arc::clone(&queue), Arc::clone(&in_flight));
                let (violations, processed) = (Arc::clone(&violations), Arc::clone(&processed));
                thread::spawn(move || {
                    while let Some(item) = queue.get() {
                        if !in_flight.lock().unwrap().insert(item) {
                            violations.fetch_add(1, Ordering::SeqCst);
                        }
                        thread::yield_now();
                        in_flight.lock().unwrap().remove(&item);
                        processed.fetch_add(1, Ordering::SeqCst);
                        queue.done(&item);
                    }
                })
            })
            .collect();
        let producers: Vec<_> = (0..2)
            .map(|_| {
                let queue = Arc::clone(&queue);
                thread::spawn(move || {
                    for i in 0..ADDS_PER_PRODUCER {
                        queue.add(i % ITEMS);
                    }
                })
            })
            .collect();
        within("producers", move || producers.into_iter().for_each(|p| p.join().unwrap()));
        queue.shut_down();
        within("workers", move || workers.into_iter().for_each(|w| w.join().unwrap()));

        assert_eq!(violations.load(Ordering::SeqCst), 0, "an item was handed out twice at once");
        assert!(processed.load(Ordering::SeqCst) >= ITEMS, "every item was processed");
        let stats = queue.stats();
        assert_eq!((stats.depth, stats.processing), (0, 0), "all drained and done");
    }

    #[test]
    fn shut_down_should_wake_blocked_getters() {
        let queue = Arc::new(WorkQueue::<u32>::new("test"));
        let getters: Vec<_> = (0..3)
            .map(|_| {
                let queue = Arc::clone(&queue);
                thread::spawn(move || queue.get())
            })
            .collect();
        wait_for("getters block", || queue.core.state.lock().sleeping_getters == 3);
        queue.shut_down();
        let results = within("getters", move || {
            getters.into_iter().map(|g| g.join().unwrap()).collect::<Vec<_>>()
        });
        assert_eq!(results, [None, None, None]);
    }

    #[test]
    fn add_should_wake_a_blocked_getter() {
        let queue = Arc::new(WorkQueue::new("test"));
        let getter = {
            let queue = Arc::clone(&queue);
            thread::spawn(move || queue.get())
        };
        wait_for("getter blocks", || queue.core.state.lock().sleeping_getters == 1);
        queue.add(7);
        assert_eq!(within("getter", move || getter.join().unwrap()), Some(7));
    }

    #[test]
    fn shut_down_should_drain_queued_items_then_report_shutdown() {
        let queue = WorkQueue::new("test");
        queue.add("a");
        queue.add("b");
        queue.shut_down();
        assert!(queue.is_shutting_down());
        queue.add("c");
        assert_eq!(queue.len(), 2, "adds after shutdown are ignored");
        assert_eq!(queue.get(), Some("a"));
        assert_eq!(queue.get(), Some("b"));
        assert_eq!(queue.get(), None);
    }

    #[test]
    fn done_after_shut_down_should_still_requeue_an_item_re_added_before_it() {
        let queue = WorkQueue::new("test");
        queue.add("x");
        assert_eq!(queue.get(), Some("x"));
        queue.add("x");
        queue.shut_down();
        queue.done(&"x");
        assert_eq!(queue.get(), Some("x"));
        queue.done(&"x");
        assert_eq!(queue.get(), None);
    }

    #[test]
    fn shut_down_should_drop_delayed_items() {
        let queue = WorkQueue::new("test");
        queue.add_after("later", Duration::from_secs(3600));
        assert_eq!(queue.stats().waiting, 1);
        queue.shut_down();
        assert_eq!(queue.stats().waiting, 0);
        queue.add_after("after", Duration::ZERO);
        assert_eq!(queue.get(), None);
    }

    #[test]
    fn shut_down_with_drain_should_wait_until_processing_items_are_done() {
        let queue = Arc::new(WorkQueue::new("test"));
        queue.add("x");
        assert_eq!(queue.get(), Some("x"));
        let (tx, rx) = mpsc::channel();
        let drainer = {
            let queue = Arc::clone(&queue);
            thread::spawn(move || {
                queue.shut_down_with_drain();
                tx.send(()).unwrap();
            })
        };
        wait_for("shutdown starts", || queue.is_shutting_down());
        // Cannot fail falsely: a correct drain never returns while x is processing.
        assert!(rx.recv_timeout(Duration::from_millis(20)).is_err(), "drain returned early");
        queue.done(&"x");
        rx.recv_timeout(EVENTUALLY).expect("drain returns once x is done");
        drainer.join().unwrap();
    }

    #[test]
    fn add_after_with_zero_delay_should_add_at_once() {
        let queue = WorkQueue::new("test");
        queue.add_after("now", Duration::ZERO);
        assert_eq!(queue.len(), 1);
        assert_eq!(queue.stats().retries_total, 1);
    }

    #[test]
    fn add_after_should_keep_the_earlier_ready_time() {
        let base = Instant::now();
        for (i, first_later) in [true, false].into_iter().enumerate() {
            let queue = WorkQueue::new("test");
            let core = &queue.core;
            let mut state = core.state.lock();
            let (early, late) =
                (base + Duration::from_millis(10), base + Duration::from_secs(3600));
            let (first, second) = if first_later { (late, early) } else { (early, late) };
            core.insert_delayed(&mut state, "x", first);
            core.insert_delayed(&mut state, "x", second);
            assert_eq!(state.waiting_ready_at.len(), 1, "#{i}: one valid ready time");

            let mut wakeups = Wakeups::new();
            let next =
                core.promote_ready(&mut state, base + Duration::from_millis(20), &mut wakeups);
            assert_eq!(state.queue, ["x"], "#{i}: x is due at the earlier time");
            assert!(state.waiting_ready_at.is_empty(), "#{i}: x no longer waits");

            let _ = core.take_next(&mut state);
            state.processing.clear();
            core.promote_ready(&mut state, base + Duration::from_secs(7200), &mut wakeups);
            assert!(state.queue.is_empty(), "#{i}: the later entry was stale, got {next:?}");
        }
    }

    #[test]
    fn delayed_items_should_become_ready_in_ready_time_order() {
        let base = Instant::now();
        let queue = WorkQueue::new("test");
        let core = &queue.core;
        let mut state = core.state.lock();
        for (item, ms) in [("c", 30), ("a", 10), ("b", 20), ("d", 20)] {
            core.insert_delayed(&mut state, item, base + Duration::from_millis(ms));
        }
        let mut wakeups = Wakeups::new();
        let next = core.promote_ready(&mut state, base + Duration::from_millis(25), &mut wakeups);
        assert_eq!(state.queue, ["a", "b", "d"], "equal ready times keep add order");
        assert_eq!(next, Some(base + Duration::from_millis(30)));
    }

    #[test]
    fn add_after_should_make_an_item_ready_without_polling() {
        let queue = Arc::new(WorkQueue::new("test"));
        let getter = {
            let queue = Arc::clone(&queue);
            thread::spawn(move || queue.get())
        };
        wait_for("getter blocks", || queue.core.state.lock().sleeping_getters == 1);
        queue.add_after("soon", Duration::from_millis(5));
        assert_eq!(within("delayed get", move || getter.join().unwrap()), Some("soon"));
    }

    #[test]
    fn dropping_the_queue_should_stop_its_delay_thread() {
        let queue = WorkQueue::new("test");
        queue.add_after("never", Duration::from_secs(3600));
        let core = Arc::clone(&queue.core);
        assert_eq!(Arc::strong_count(&core), 3, "handle, delay thread, test");
        within("drop", move || drop(queue));
        assert_eq!(Arc::strong_count(&core), 1, "the delay thread has exited");
    }

    #[test]
    fn rate_limiter_should_back_off_exponentially_per_item_up_to_the_cap() {
        let limiter = RateLimiter::new(RateLimiterConfig::default());
        let now = Instant::now();
        for i in 0..18 {
            let want = Duration::from_millis(5) * 2u32.pow(i);
            let got = limiter.when_at(&"x", now + Duration::from_secs(u64::from(i)));
            assert_eq!(got, want, "#{i}: got {got:?}, want {want:?}");
        }
        // 5ms * 2^18 = 1310.72 s > 1000 s.
        for i in 18u32..200 {
            let got = limiter.when_at(&"x", now + Duration::from_secs(u64::from(i)));
            assert_eq!(got, Duration::from_secs(1000), "#{i}: got {got:?}, want the cap");
        }
        assert_eq!(limiter.num_requeues(&"x"), 200);
        assert_eq!(limiter.when_at(&"y", now), Duration::from_millis(5), "y has its own count");
    }

    #[test]
    fn forget_should_reset_the_backoff() {
        let limiter = RateLimiter::new(RateLimiterConfig::default());
        let now = Instant::now();
        for _ in 0..3 {
            limiter.when_at(&"x", now);
        }
        assert_eq!(limiter.when_at(&"x", now), Duration::from_millis(40));
        limiter.forget(&"x");
        assert_eq!(limiter.num_requeues(&"x"), 0);
        assert_eq!(limiter.when_at(&"x", now), Duration::from_millis(5));
    }

    #[test]
    fn token_bucket_should_allow_a_burst_then_space_requests_at_its_rate() {
        let limiter =
            RateLimiter::new(RateLimiterConfig::default().with_base_delay(Duration::ZERO));
        let t0 = Instant::now();
        for i in 0..100 {
            assert_eq!(limiter.when_at(&i, t0), Duration::ZERO, "#{i}: within the burst");
        }
        for (i, want_ms) in [(100, 100), (101, 200), (102, 300)] {
            let got = limiter.when_at(&i, t0);
            assert_eq!(got, Duration::from_millis(want_ms), "#{i}: got {got:?}");
        }
        // One second refills 10 tokens: 3 pay the debt, 7 are free, then 100 ms spacing again.
        let t1 = t0 + Duration::from_secs(1);
        for i in 0..7 {
            assert_eq!(limiter.when_at(&(1000 + i), t1), Duration::ZERO, "#{i}: refilled");
        }
        assert_eq!(limiter.when_at(&2000, t1), Duration::from_millis(100));
    }

    #[test]
    fn rate_limiter_should_return_the_larger_of_backoff_and_bucket_delay() {
        let limiter = RateLimiter::new(RateLimiterConfig::default().with_bucket(10.0, 1));
        let t0 = Instant::now();
        assert_eq!(limiter.when_at(&"x", t0), Duration::from_millis(5), "backoff > free token");
        assert_eq!(limiter.when_at(&"y", t0), Duration::from_millis(100), "bucket > 5 ms");
    }

    #[test]
    fn rate_limiter_should_not_overflow_on_huge_settings() {
        let config = RateLimiterConfig::default()
            .with_base_delay(Duration::MAX)
            .with_max_delay(Duration::MAX)
            .with_bucket(f64::INFINITY, 0);
        let limiter = RateLimiter::new(config);
        let now = Instant::now();
        assert_eq!(limiter.when_at(&"x", now), Duration::MAX);
        assert_eq!(limiter.when_at(&"x", now), Duration::MAX);
    }

    #[test]
    #[should_panic(expected = "qps must be positive")]
    fn rate_limiter_should_reject_a_zero_rate() {
        let _ = RateLimiter::<u32>::new(RateLimiterConfig::default().with_bucket(0.0, 100));
    }

    #[test]
    fn num_requeues_should_count_rate_limited_adds_until_forget() {
        let queue = WorkQueue::with_rate_limiter("test", RateLimiterConfig::immediate());
        for _ in 0..3 {
            queue.add_rate_limited("x");
        }
        assert_eq!(queue.num_requeues(&"x"), 3);
        assert_eq!(queue.len(), 1, "immediate limiter adds at once; duplicates collapse");
        assert_eq!(queue.stats().retries_total, 3);
        queue.forget(&"x");
        assert_eq!(queue.num_requeues(&"x"), 0);
    }

    #[test]
    fn add_rate_limited_should_delay_by_the_limiter() {
        let queue = WorkQueue::new("test");
        queue.add_rate_limited("x");
        assert_eq!(queue.stats().waiting, 1, "the first retry waits 5 ms");
        assert_eq!(queue.num_requeues(&"x"), 1);
        let queue = Arc::new(queue);
        let got = within("rate-limited get", {
            let queue = Arc::clone(&queue);
            move || queue.get()
        });
        assert_eq!(got, Some("x"));
    }

    #[test]
    fn get_async_should_resolve_to_a_queued_item() {
        let queue = WorkQueue::new("test");
        queue.add(1);
        assert_eq!(futures::executor::block_on(queue.get_async()), Some(1));
        assert_eq!(queue.stats().processing, 1);
    }

    #[test]
    fn get_async_should_be_woken_by_add() {
        let queue = WorkQueue::new("test");
        let waker = Arc::new(CountingWaker::default());
        let mut future = queue.get_async();
        assert!(poll_once(&mut future, &waker).is_pending());
        queue.add(1);
        assert_eq!(waker.wakes(), 1);
        assert_eq!(poll_once(&mut future, &waker), Poll::Ready(Some(1)));
    }

    #[test]
    fn get_async_should_resolve_to_none_after_shut_down() {
        let queue = WorkQueue::<u32>::new("test");
        let waker = Arc::new(CountingWaker::default());
        let mut future = queue.get_async();
        assert!(poll_once(&mut future, &waker).is_pending());
        queue.shut_down();
        assert_eq!(waker.wakes(), 1);
        assert_eq!(poll_once(&mut future, &waker), Poll::Ready(None));
    }

    #[test]
    fn dropped_woken_get_future_should_pass_the_wakeup_on() {
        let queue = WorkQueue::new("test");
        let (first_waker, second_waker) = (Arc::default(), Arc::default());
        let mut first = queue.get_async();
        let mut second = queue.get_async();
        assert!(poll_once(&mut first, &first_waker).is_pending());
        assert!(poll_once(&mut second, &second_waker).is_pending());
        queue.add(1);
        assert_eq!((first_waker.wakes(), second_waker.wakes()), (1, 0));
        drop(first);
        assert_eq!(second_waker.wakes(), 1);
        assert_eq!(poll_once(&mut second, &second_waker), Poll::Ready(Some(1)));
    }

    #[test]
    fn get_async_should_wait_for_a_delayed_item() {
        let queue = Arc::new(WorkQueue::new("test"));
        queue.add_after("soon", Duration::from_millis(5));
        let got = within("async delayed get", {
            let queue = Arc::clone(&queue);
            move || futures::executor::block_on(queue.get_async())
        });
        assert_eq!(got, Some("soon"));
    }

    #[test]
    fn get_async_should_serve_tokio_workers() {
        const ITEMS: u32 = 1_000;
        let queue = Arc::new(WorkQueue::new("test"));
        let seen = Arc::new(Mutex::new(Vec::new()));
        let runtime =
            tokio::runtime::Builder::new_multi_thread().worker_threads(2).build().unwrap();
        let workers: Vec<_> = (0..4)
            .map(|_| {
                let (queue, seen) = (Arc::clone(&queue), Arc::clone(&seen));
                runtime.spawn(async move {
                    while let Some(item) = queue.get_async().await {
                        seen.lock().unwrap().push(item);
                        queue.done(&item);
                    }
                })
            })
            .collect();
        let producer = {
            let queue = Arc::clone(&queue);
            thread::spawn(move || (0..ITEMS).for_each(|i| queue.add(i)))
        };
        within("producer", move || producer.join().unwrap());
        queue.shut_down();
        within("tokio workers", move || {
            runtime.block_on(async {
                for worker in workers {
                    worker.await.unwrap();
                }
            })
        });
        let mut seen = seen.lock().unwrap().clone();
        seen.sort_unstable();
        assert_eq!(seen, (0..ITEMS).collect::<Vec<_>>());
    }

    #[test]
    fn mixed_blocking_and_async_getters_should_both_be_served() {
        let queue = Arc::new(WorkQueue::new("test"));
        let blocking = {
            let queue = Arc::clone(&queue);
            thread::spawn(move || queue.get())
        };
        wait_for("blocking getter blocks", || queue.core.state.lock().sleeping_getters == 1);
        let waker = Arc::new(CountingWaker::default());
        let mut future = queue.get_async();
        assert!(poll_once(&mut future, &waker).is_pending());
        queue.add(1);
        queue.add(2);
        let from_thread = within("blocking getter", move || blocking.join().unwrap());
        wait_for("async getter woken", || waker.wakes() > 0);
        let Poll::Ready(from_future) = poll_once(&mut future, &waker) else {
            panic!("the async getter was woken but has nothing");
        };
        let mut got = [from_thread, from_future];
        got.sort_unstable();
        assert_eq!(got, [Some(1), Some(2)]);
    }

    #[test]
    fn stats_should_count_adds_retries_and_sizes() {
        let queue =
            WorkQueue::with_rate_limiter("garbage_collector_test", RateLimiterConfig::immediate());
        queue.add(1);
        queue.add(1);
        queue.add(2);
        queue.add_rate_limited(3);
        queue.add_after(4, Duration::from_secs(3600));
        assert_eq!(queue.get(), Some(1));
        let want = QueueStats {
            depth: 2,
            urgent: 0,
            processing: 1,
            waiting: 1,
            adds_total: 3,
            retries_total: 2,
        };
        assert_eq!(queue.stats(), want);
        assert_eq!(queue.name(), "garbage_collector_test");
        assert!(format!("{queue:?}").contains("garbage_collector_test"));
    }

    #[test]
    fn add_while_delayed_should_queue_at_once_and_keep_the_delayed_add() {
        let queue = Arc::new(WorkQueue::new("test"));
        queue.add_after("x", Duration::from_millis(5));
        queue.add("x");
        assert_eq!(queue.get(), Some("x"));
        queue.done(&"x");
        let got = within("delayed re-add", {
            let queue = Arc::clone(&queue);
            move || queue.get()
        });
        assert_eq!(got, Some("x"), "the delayed add still fires, as upstream");
    }

    #[test]
    fn urgent_items_should_be_handed_out_first() {
        let q = WorkQueue::with_rate_limiter("t", RateLimiterConfig::immediate());
        q.add(1);
        q.add(2);
        q.add_urgent(3);
        q.add_urgent(1); // already waiting in the normal lane: stays there
        assert_eq!(q.pending(), [3, 1, 2]);
        let order: Vec<i32> = (0..3).map(|_| q.get().unwrap()).collect();
        assert_eq!(order, [3, 1, 2]);
    }

    #[test]
    fn urgent_first_items_should_go_before_other_urgent_items() {
        let q = WorkQueue::with_rate_limiter("t", RateLimiterConfig::immediate());
        q.add(1);
        q.add_urgent(2);
        q.add_urgent(3);
        q.add_urgent_first(4);
        q.add_urgent_first(5);
        q.add_urgent_first(2); // already waiting in the urgent lane: stays where it is
        assert_eq!(q.pending(), [5, 4, 2, 3, 1]);
        assert_eq!((q.stats().depth, q.stats().urgent), (5, 4));
        let order: Vec<i32> = (0..5).map(|_| q.get().unwrap()).collect();
        assert_eq!(order, [5, 4, 2, 3, 1]);
    }

    #[test]
    fn urgent_lane_should_not_starve_the_normal_lane() {
        let q = WorkQueue::with_rate_limiter("t", RateLimiterConfig::immediate());
        q.add(-1);
        for i in 0..(URGENT_BURST as i32 * 3) {
            q.add_urgent(i);
        }
        let mut got = Vec::new();
        while let Some(i) = (!q.is_empty()).then(|| q.get().unwrap()) {
            q.done(&i);
            got.push(i);
        }
        let normal_at = got.iter().position(|&i| i == -1).unwrap();
        assert_eq!(normal_at, URGENT_BURST as usize, "normal item waited past the burst: {got:?}");
        assert_eq!(got.len(), URGENT_BURST as usize * 3 + 1);
    }

    #[test]
    fn urgent_re_add_while_processing_should_requeue_urgently_at_done() {
        let q = WorkQueue::with_rate_limiter("t", RateLimiterConfig::immediate());
        q.add(7);
        let item = q.get().unwrap();
        q.add(8);
        q.add_urgent(7); // processing: re-enters at done, urgent
        assert_eq!(q.pending(), [8]);
        q.done(&item);
        assert_eq!(q.pending(), [7, 8]);
        // Duplicates still collapse across lanes.
        q.add(7);
        q.add_urgent(8);
        assert_eq!(q.len(), 2);
    }
}
