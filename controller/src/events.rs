//! The Warning events kube-gc records (`OwnerRefInvalidNamespace`), sent asynchronously.
//!
//! Upstream records events through an event broadcaster: the caller only queues the event, and
//! the broadcaster sends it in the background through a client of its own, after a spam filter
//! and a correlator that fold repeats. The graph builder must never wait on the API (DESIGN.md,
//! "Ingestion never waits on the API"): many invalid references at once used to stall
//! ingestion behind the collector's token bucket. [`EventRecorder::record`] returns at once:
//!
//! - an event identical to one recorded in the last [`REPEAT_WINDOW`] (same object, reason and
//!   message) is folded into it (counted, not sent);
//! - the rest wait in a bounded queue ([`QUEUE_CAPACITY`]); when it is full the event is
//!   dropped and counted, never blocking the caller;
//! - a background task sends them through a token bucket of their own ([`EVENTS_QPS`],
//!   [`EVENTS_BURST`]), never the collector's.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use kube_gc_engine::cluster::WarningEvent;
use tokio::sync::mpsc;

/// Events queued for sending at most; past it, new events are dropped (and counted).
pub const QUEUE_CAPACITY: usize = 1024;
/// The events' own request rate, apart from the collector's budget.
pub const EVENTS_QPS: f64 = 5.0;
/// The events' own burst.
pub const EVENTS_BURST: u32 = 25;
/// An identical event within this window is folded into the first (client-go's correlator
/// aggregates repeats over 10 minutes).
pub const REPEAT_WINDOW: Duration = Duration::from_secs(600);
/// How many distinct recent events are remembered for folding; the oldest go first.
const RECENT_CAPACITY: usize = 4096;

/// Sends one event to the API (the recorder's background task awaits it).
pub type Sink = Arc<dyn Fn(WarningEvent) -> Pin<Box<dyn Future<Output = ()> + Send>> + Send + Sync>;

/// What the recorder did with the events it was given.
#[derive(Debug, Default)]
pub struct EventCounts {
    /// Events handed to the sink.
    pub sent: AtomicU64,
    /// Repeats folded into an identical recent event.
    pub folded: AtomicU64,
    /// Events dropped because the queue was full.
    pub dropped: AtomicU64,
}

type Key = (String, &'static str, String);

/// Records Warning events without ever waiting (see the module docs).
pub struct EventRecorder {
    tx: mpsc::Sender<WarningEvent>,
    recent: Mutex<HashMap<Key, Instant>>,
    counts: Arc<EventCounts>,
}

impl std::fmt::Debug for EventRecorder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EventRecorder").field("counts", &self.counts).finish_non_exhaustive()
    }
}

impl EventRecorder {
    /// A recorder whose background task (spawned on the current tokio runtime) sends through
    /// `sink` at most `qps` per second with bursts of `burst`.
    pub fn start(sink: Sink, qps: f64, burst: u32) -> EventRecorder {
        let (tx, mut rx) = mpsc::channel::<WarningEvent>(QUEUE_CAPACITY);
        let counts = Arc::new(EventCounts::default());
        let sent = counts.clone();
        let limiter = crate::kube_cluster::token_bucket(qps, burst);
        tokio::spawn(async move {
            while let Some(event) = rx.recv().await {
                limiter.until_ready().await;
                sent.sent.fetch_add(1, Ordering::Relaxed);
                sink(event).await;
            }
        });
        EventRecorder { tx, recent: Mutex::default(), counts }
    }

    /// Queues `event` for sending, unless an identical one was recorded lately or the queue is
    /// full. Never waits.
    pub fn record(&self, event: WarningEvent) {
        let key = (event.involved.uid.to_string(), event.reason, event.message.clone());
        let now = Instant::now();
        {
            let mut recent = self.recent.lock().unwrap_or_else(|e| e.into_inner());
            if recent.get(&key).is_some_and(|at| now.duration_since(*at) < REPEAT_WINDOW) {
                self.counts.folded.fetch_add(1, Ordering::Relaxed);
                return;
            }
            if recent.len() >= RECENT_CAPACITY {
                recent.retain(|_, at| now.duration_since(*at) < REPEAT_WINDOW);
                if recent.len() >= RECENT_CAPACITY {
                    // Still full of recent ones: forget the oldest.
                    if let Some(oldest) =
                        recent.iter().min_by_key(|(_, at)| **at).map(|(k, _)| k.clone())
                    {
                        recent.remove(&oldest);
                    }
                }
            }
            recent.insert(key, now);
        }
        if self.tx.try_send(event).is_err() {
            self.counts.dropped.fetch_add(1, Ordering::Relaxed);
            tracing::debug!("event queue full, dropping a Warning event");
        }
    }

    /// What the recorder did so far.
    pub fn counts(&self) -> &Arc<EventCounts> {
        &self.counts
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube_gc_engine::ObjectReference;

    fn event(i: usize) -> WarningEvent {
        WarningEvent {
            involved: ObjectReference::new("v1", "Pod", "ns", &format!("p{i}"), &format!("u{i}")),
            reason: "OwnerRefInvalidNamespace",
            message: "ownerRef [v1/Pod, namespace: ns, name: o, uid: x] does not exist".into(),
        }
    }

    /// A sink that never completes: the API is down or slow.
    fn stuck_sink() -> Sink {
        Arc::new(|_| Box::pin(std::future::pending()))
    }

    #[tokio::test]
    async fn recording_never_waits_on_a_stuck_api_and_stays_bounded() {
        let recorder = EventRecorder::start(stuck_sink(), 1.0, 1);
        let n = 10 * QUEUE_CAPACITY;
        // `record` is not async: had it to wait for the API, this loop would never end.
        for i in 0..n {
            recorder.record(event(i));
        }
        tokio::task::yield_now().await;
        let c = recorder.counts();
        let (sent, dropped) = (c.sent.load(Ordering::Relaxed), c.dropped.load(Ordering::Relaxed));
        // At most the queue and the one event in the sink's hands are held; the rest dropped.
        assert!(sent <= 1, "{sent}");
        assert!(dropped as usize >= n - QUEUE_CAPACITY - 1, "{dropped} dropped of {n}");
    }

    #[tokio::test]
    async fn repeats_are_folded_and_distinct_events_sent_through_their_own_budget() {
        let got = Arc::new(Mutex::new(Vec::new()));
        let seen = got.clone();
        let sink: Sink = Arc::new(move |e: WarningEvent| {
            seen.lock().unwrap().push(e.involved.name.clone());
            Box::pin(async {})
        });
        let recorder = EventRecorder::start(sink, 1000.0, 100);
        for _ in 0..5 {
            recorder.record(event(1));
        }
        recorder.record(event(2));
        for _ in 0..100 {
            if got.lock().unwrap().len() == 2 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert_eq!(*got.lock().unwrap(), ["p1", "p2"]);
        assert_eq!(recorder.counts().folded.load(Ordering::Relaxed), 4);
    }
}
