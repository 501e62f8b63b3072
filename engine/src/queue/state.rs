//! The queue's state machine under its one lock: the two lanes and their fairness, the
//! dirty and processing sets, the delay heap, and who to wake (client-go's `queue.go` and
//! `delaying_queue.go`).

use std::hash::Hash;
use std::task::Waker;
use std::time::Instant;

use hashbrown::hash_set::Entry;

use super::{Core, Delayed, State, URGENT_BURST, URGENT_OLDEST_EVERY};

impl<T: Clone + Eq + Hash> State<T> {
    /// Puts an item that just became ready into its lane (the front of the urgent lane for
    /// [`super::WorkQueue::add_urgent_first`]).
    pub(super) fn push_back(&mut self, item: T) {
        let Some(first) = self.urgent_marks.remove(&item) else {
            return self.queue.push_back(item);
        };
        let entry = self.urgent_entries;
        self.urgent_entries += 1;
        if first {
            self.urgent_first.push_front((entry, item));
        } else {
            self.urgent.push_back((entry, item));
        }
    }

    /// Takes the next item: urgent first, but never more than [`URGENT_BURST`] in a row while
    /// normal items wait.
    pub(super) fn pop_front(&mut self) -> Option<T> {
        let urgent_waits = !self.urgent_first.is_empty() || !self.urgent.is_empty();
        if urgent_waits && (self.urgent_streak < URGENT_BURST || self.queue.is_empty()) {
            self.urgent_streak += 1;
            self.pop_urgent()
        } else {
            self.urgent_streak = 0;
            self.queue.pop_front()
        }
    }

    /// Takes the next urgent item: the newest of `urgent_first`, else the oldest of `urgent`;
    /// on every [`URGENT_OLDEST_EVERY`]th turn the oldest of both.
    fn pop_urgent(&mut self) -> Option<T> {
        self.urgent_handed_out = self.urgent_handed_out.wrapping_add(1);
        let oldest_turn = self.urgent_handed_out % URGENT_OLDEST_EVERY == 0;
        let from_first = match (self.urgent_first.back(), self.urgent.front()) {
            (None, None) => return None,
            (Some(_), None) => true,
            (None, Some(_)) => false,
            (Some((first, _)), Some((other, _))) => !oldest_turn || first < other,
        };
        let entry = match (from_first, oldest_turn) {
            (true, true) => self.urgent_first.pop_back(),
            (true, false) => self.urgent_first.pop_front(),
            (false, _) => self.urgent.pop_front(),
        };
        entry.map(|(_, item)| item)
    }
}

impl<T> State<T> {
    /// Items waiting in either lane.
    pub(super) fn queued(&self) -> usize {
        self.queue.len() + self.urgent_first.len() + self.urgent.len()
    }

    /// The waiting items, urgent lane first (the order `get` hands them out, ignoring the
    /// fairness interleave and the oldest item's turns).
    pub(super) fn pending_order(&self) -> impl Iterator<Item = &T> {
        let urgent = self.urgent_first.iter().chain(self.urgent.iter()).map(|(_, item)| item);
        urgent.chain(self.queue.iter())
    }

    /// Removes the waiter `id` if it is still registered; `false` means a notifier took it.
    pub(super) fn remove_waiter(&mut self, id: u64) -> bool {
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
pub(super) type Wakeups = Vec<Waker>;

pub(super) fn wake_all(wakeups: Wakeups) {
    for waker in wakeups {
        waker.wake();
    }
}

impl<T> Core<T> {
    /// Wakes one sleeping thread and one async waiter for an item just pushed to the FIFO.
    pub(super) fn notify_one_getter(&self, state: &mut State<T>, wakeups: &mut Wakeups) {
        if state.sleeping_getters > 0 {
            self.get_cv.notify_one();
        }
        if let Some(waiter) = state.async_waiters.pop_front() {
            wakeups.push(waiter.waker);
        }
    }

    /// Marks the queue shut down, drops the delayed items and wakes everybody; with `drain`,
    /// then waits until no item is processing (or a plain shutdown cancels the drain).
    pub(super) fn shut_down(&self, drain: bool) {
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
    pub(super) fn add_locked(&self, state: &mut State<T>, item: T, wakeups: &mut Wakeups) {
        if state.shutting_down {
            return;
        }
        let item = match state.dirty.entry(item) {
            Entry::Occupied(_) => return,
            Entry::Vacant(slot) => slot.insert().get().clone(),
        };
        state.adds_total += 1;
        if let Some(timings) = &mut state.timings {
            timings.added(&item);
        }
        if state.processing.contains(&item) {
            return;
        }
        state.push_back(item);
        self.notify_one_getter(state, wakeups);
    }

    /// Pops the FIFO head and moves it from dirty to processing.
    pub(super) fn take_next(&self, state: &mut State<T>) -> Option<T> {
        let item = state.pop_front()?;
        state.dirty.remove(&item);
        // Seeded defect for loom-tests; never enabled in real builds: the item handed out is
        // not recorded as processing, so a re-add queues it for a second worker at once.
        #[cfg(all(kube_gc_loom, feature = "loom-defects"))]
        if crate::loom_support::defect_active(crate::loom_support::Defect::QueueNoProcessingSet) {
            return Some(item);
        }
        if let Some(timings) = &mut state.timings {
            timings.taken(&item);
        }
        state.processing.insert(item.clone());
        Some(item)
    }

    /// Puts `item` in the delay heap, unless it already waits with an earlier or equal ready
    /// time. Returns whether the heap's head changed (the delay thread must re-arm).
    pub(super) fn insert_delayed(&self, state: &mut State<T>, item: T, ready_at: Instant) -> bool {
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
    pub(super) fn promote_ready(
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
    pub(super) fn promote_due(&self, state: &mut State<T>, wakeups: &mut Wakeups) {
        if !state.waiting.is_empty() {
            self.promote_ready(state, Instant::now(), wakeups);
        }
    }

    /// client-go's `waitingLoop`: sleeps until the heap's head is due, moves due items to the
    /// FIFO, and returns at shutdown.
    #[cfg(not(kube_gc_loom))]
    pub(super) fn run_delay_loop(&self) {
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
