//! How long items wait in a queue and how long workers hold them: client-go's workqueue
//! metrics (`workqueue_queue_duration_seconds`, `workqueue_work_duration_seconds`,
//! `workqueue_unfinished_work_seconds`, `workqueue_longest_running_processor_seconds`),
//! measured as its `defaultQueueMetrics` measures them.
//!
//! An item's wait starts at the add that makes it dirty (a re-add while it waits or is being
//! processed does not restart it) and ends when a worker takes it; its work ends at `done`.
//! Nothing is measured until [`WorkQueue::set_durations`](super::WorkQueue::set_durations).

use std::hash::Hash;
use std::time::{Duration, Instant};

use hashbrown::HashMap;

use std::sync::Arc;

/// Receives each item's wait and work durations (the histograms' observations).
pub trait QueueDurations: Send + Sync {
    /// An item waited `waited` between its add and a worker taking it.
    fn queued(&self, waited: Duration);
    /// A worker held an item `took` between taking it and `done`.
    fn worked(&self, took: Duration);
}

/// The timestamps behind the durations, under the queue's lock.
pub(super) struct Timings<T> {
    sink: Arc<dyn QueueDurations>,
    added: HashMap<T, Instant>,
    started: HashMap<T, Instant>,
}

impl<T: Clone + Eq + Hash> Timings<T> {
    pub(super) fn new(sink: Arc<dyn QueueDurations>) -> Self {
        Timings { sink, added: HashMap::new(), started: HashMap::new() }
    }

    /// `item` became dirty.
    pub(super) fn added(&mut self, item: &T) {
        if !self.added.contains_key(item) {
            self.added.insert(item.clone(), Instant::now());
        }
    }

    /// A worker took `item`.
    pub(super) fn taken(&mut self, item: &T) {
        let now = Instant::now();
        if let Some(at) = self.added.remove(item) {
            self.sink.queued(now.saturating_duration_since(at));
        }
        self.started.insert(item.clone(), now);
    }

    /// A worker is done with `item`.
    pub(super) fn done(&mut self, item: &T) {
        if let Some(at) = self.started.remove(item) {
            self.sink.worked(at.elapsed());
        }
    }
}

impl<T> Timings<T> {
    /// The summed and the longest time the items being processed have been held so far.
    pub(super) fn in_flight(&self) -> (Duration, Duration) {
        let now = Instant::now();
        self.started.values().fold((Duration::ZERO, Duration::ZERO), |(sum, max), at| {
            let held = now.saturating_duration_since(*at);
            (sum + held, max.max(held))
        })
    }
}
