//! The barrier between the phases of one batch.
//!
//! A batch runs all its phases inside one call on the ingest threads, which wait for each
//! other here between phases. Before this, each phase was a call of its own on the thread
//! pool: a worker finishing early fell asleep, and waking it cost more than the barrier's wait
//! (about 70 µs per phase on two cores; with three phases, a sixth of the time of a 4096-event
//! batch). Here a thread that arrives early spins for a short while, since the others are
//! usually a few microseconds behind, and only then sleeps.
//!
//! What a thread writes before [`PhaseBarrier::wait`] is visible to every thread after it: the
//! last thread to arrive releases the others under the barrier's lock (and, for the spinning
//! ones, through a release store they read with acquire).
//!
//! A thread that panics must not leave the others waiting for it forever: the guard of
//! [`PhaseBarrier::poison_on_unwind`] poisons the barrier as the panic unwinds, and every
//! thread waiting or arriving later panics in turn, so the batch's call returns (with the
//! panic) instead of hanging.

use crate::sync::atomic::{AtomicU64, Ordering};
use crate::sync::{Condvar, Mutex};

/// How long a thread that arrives early spins before it sleeps.
#[cfg(not(kube_gc_loom))]
const SPIN: std::time::Duration = std::time::Duration::from_micros(50);

/// Spins for up to [`SPIN`] until `done` returns true; returns whether it did. For a wait
/// expected to end within microseconds, shorter than waking a sleeping thread.
#[cfg(not(kube_gc_loom))]
pub(crate) fn spin_until(mut done: impl FnMut() -> bool) -> bool {
    let start = std::time::Instant::now();
    loop {
        for _ in 0..64 {
            if done() {
                return true;
            }
            std::hint::spin_loop();
        }
        if start.elapsed() >= SPIN {
            return false;
        }
    }
}

/// A reusable barrier for a fixed number of threads (see the module docs).
#[derive(Debug)]
pub(crate) struct PhaseBarrier {
    threads: usize,
    state: Mutex<State>,
    released: Condvar,
    /// `State::generation`, readable without the lock, for the threads that spin.
    generation: AtomicU64,
}

#[derive(Debug, Default)]
struct State {
    /// Threads that arrived in the current generation.
    arrived: usize,
    /// How many times the barrier has released its threads.
    generation: u64,
    poisoned: bool,
}

impl PhaseBarrier {
    /// A barrier for `threads` threads (at least 1; with 1, [`PhaseBarrier::wait`] returns at
    /// once).
    pub(crate) fn new(threads: usize) -> PhaseBarrier {
        PhaseBarrier {
            threads: threads.max(1),
            state: Mutex::new(State::default()),
            released: Condvar::new(),
            generation: AtomicU64::new(0),
        }
    }

    /// Waits until all the threads have called `wait` this generation.
    ///
    /// # Panics
    ///
    /// If the barrier is poisoned: another thread of the batch panicked.
    pub(crate) fn wait(&self) {
        // Seeded defect for loom-tests; never enabled in real builds: the barrier lets every
        // thread through at once, so a phase can start before the previous one has finished.
        #[cfg(all(kube_gc_loom, feature = "loom-defects"))]
        if crate::loom_support::defect_active(crate::loom_support::Defect::IngestBarrierSkipped) {
            return;
        }
        let mut state = self.state.lock();
        assert!(!state.poisoned, "another ingest thread of this batch panicked");
        let generation = state.generation;
        state.arrived += 1;
        if state.arrived == self.threads {
            state.arrived = 0;
            state.generation += 1;
            self.generation.store(state.generation, Ordering::Release);
            drop(state);
            self.released.notify_all();
            return;
        }
        drop(state);
        if self.spin_until_released(generation) {
            return;
        }
        let mut state = self.state.lock();
        while state.generation == generation && !state.poisoned {
            state = self.released.wait(state);
        }
        assert!(!state.poisoned, "another ingest thread of this batch panicked");
    }

    /// Spins for up to [`SPIN`] while the barrier is still in `generation`; true if it was
    /// released (not poisoned) meanwhile.
    #[cfg(not(kube_gc_loom))]
    fn spin_until_released(&self, generation: u64) -> bool {
        // A release moves the generation by one; poisoning sets it to `u64::MAX`.
        let mut now = generation;
        spin_until(|| {
            now = self.generation.load(Ordering::Acquire);
            now != generation
        });
        now == generation + 1
    }

    /// Loom explores the lock-and-wait path only: a spin loop would multiply the interleavings
    /// of every model without adding a hand-off the lock path lacks.
    #[cfg(kube_gc_loom)]
    fn spin_until_released(&self, _generation: u64) -> bool {
        false
    }

    /// A guard that poisons the barrier if it is dropped while its thread panics. Each thread
    /// holds one across the phases it runs.
    pub(crate) fn poison_on_unwind(&self) -> PoisonOnUnwind<'_> {
        PoisonOnUnwind(self)
    }

    fn poison(&self) {
        let mut state = self.state.lock();
        state.poisoned = true;
        self.generation.store(u64::MAX, Ordering::Release);
        drop(state);
        self.released.notify_all();
    }
}

/// See [`PhaseBarrier::poison_on_unwind`].
#[derive(Debug)]
pub(crate) struct PoisonOnUnwind<'a>(&'a PhaseBarrier);

impl Drop for PoisonOnUnwind<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.0.poison();
        }
    }
}

#[cfg(all(test, not(kube_gc_loom)))]
mod tests {
    use std::panic::{self, AssertUnwindSafe};
    use std::sync::atomic::AtomicUsize;

    use super::*;

    #[test]
    fn no_thread_passes_until_all_have_arrived() {
        const THREADS: usize = 3;
        const ROUNDS: usize = 200;
        let barrier = PhaseBarrier::new(THREADS);
        let arrivals = AtomicUsize::new(0);
        std::thread::scope(|s| {
            for t in 0..THREADS {
                let (barrier, arrivals) = (&barrier, &arrivals);
                s.spawn(move || {
                    for round in 0..ROUNDS {
                        // Stagger the threads so that some spin and some sleep.
                        if (round + t) % 7 == 0 {
                            std::thread::sleep(std::time::Duration::from_micros(200));
                        }
                        arrivals.fetch_add(1, Ordering::SeqCst);
                        barrier.wait();
                        // Everyone arrived for this round, and nobody for the next one yet
                        // (the second wait keeps the rounds apart).
                        assert_eq!(arrivals.load(Ordering::SeqCst), (round + 1) * THREADS);
                        barrier.wait();
                    }
                });
            }
        });
    }

    #[test]
    fn a_panicking_thread_releases_the_others_with_a_panic() {
        let barrier = PhaseBarrier::new(2);
        let waiter = std::thread::scope(|s| {
            let waiter = s.spawn(|| panic::catch_unwind(AssertUnwindSafe(|| barrier.wait())));
            let panicker = s.spawn(|| {
                let _guard = barrier.poison_on_unwind();
                std::thread::sleep(std::time::Duration::from_millis(5));
                panic!("a phase failed");
            });
            assert!(panicker.join().is_err());
            waiter.join().expect("the waiter itself catches its panic")
        });
        assert!(waiter.is_err(), "the waiting thread was released without a panic");
        // A thread arriving later is refused at once.
        let late = panic::catch_unwind(AssertUnwindSafe(|| barrier.wait()));
        assert!(late.is_err());
    }

    #[test]
    fn one_thread_never_waits() {
        let barrier = PhaseBarrier::new(1);
        for _ in 0..3 {
            barrier.wait();
        }
    }
}
