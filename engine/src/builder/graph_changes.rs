//! The graph builder's inbox of virtual delete events (upstream's `graphChanges` queue, as far
//! as workers use it).
//!
//! A worker that reads an object live and finds it gone (or under another UID) tells the graph
//! with a virtual delete event; the graph builder applies the inbox before the next batch of
//! watch notifications. A worker never writes the graph itself: ingestion is its sole writer.

use std::collections::VecDeque;
use std::fmt;

use crate::ingest::Event;
use crate::sync::Mutex;

type Wake = Box<dyn Fn() + Send + Sync>;

/// The inbox (see the module docs). Every method takes `&self`.
#[derive(Default)]
pub struct GraphChanges {
    events: Mutex<VecDeque<Event>>,
    wake: Mutex<Option<Wake>>,
}

impl fmt::Debug for GraphChanges {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GraphChanges").field("pending", &self.len()).finish_non_exhaustive()
    }
}

impl GraphChanges {
    /// An empty inbox.
    pub fn new() -> GraphChanges {
        GraphChanges::default()
    }

    /// Calls `wake` after every [`push`](Self::push), so that a loop waiting for watch
    /// notifications also wakes for virtual deletes (the controller's batcher). Replaces any
    /// earlier callback. `wake` runs on the pushing worker's thread: it must not block.
    pub fn on_push(&self, wake: impl Fn() + Send + Sync + 'static) {
        *self.wake.lock() = Some(Box::new(wake));
    }

    /// Hands a virtual delete event to the graph builder.
    pub fn push(&self, event: Event) {
        self.events.lock().push_back(event);
        if let Some(wake) = self.wake.lock().as_ref() {
            wake();
        }
    }

    /// Puts `event` at the front (upstream's test helper `insertEvent`).
    pub fn push_front(&self, event: Event) {
        self.events.lock().push_front(event);
    }

    /// Takes up to `max` events, oldest first.
    pub fn drain(&self, max: usize) -> Vec<Event> {
        let mut q = self.events.lock();
        let n = max.min(q.len());
        q.drain(..n).collect()
    }

    /// A copy of the pending events, oldest first.
    pub fn pending(&self) -> Vec<Event> {
        self.events.lock().iter().cloned().collect()
    }

    /// How many events are pending.
    pub fn len(&self) -> usize {
        self.events.lock().len()
    }

    /// Whether no event is pending.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}
