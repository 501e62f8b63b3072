//! `/metrics`, through prometheus-client's registry, in the OpenMetrics text format, with
//! upstream's families and labels (GC-SPEC.md §8; client-go's workqueue, rest client and
//! leader-election metrics; the Prometheus `process_*` set) and kube-gc's own (`kube_gc_*`).
//!
//! Two kinds of values:
//! - durations, observed as they happen into histograms: the work queues' waits and work
//!   (through the engine's [`QueueDurations`]), the API requests and the client-side rate
//!   limiter's waits ([`rest_client`]);
//! - everything that already exists as a count somewhere (the queues' stats, the collector's
//!   calls and decisions, the graph's size, the watchers' warm-up), read at scrape time
//!   (`scrape.rs`), so the hot paths keep their plain atomics.

pub mod process;
pub mod rest_client;
mod scrape;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use kube_gc_engine::Graph;
use kube_gc_engine::graph::NodeKey;
use kube_gc_engine::queue::{QueueDurations, WorkQueue};
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

use crate::kube_cluster::ApiCallCounts;

/// The content type of [`encode`]'s text.
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// A monotonically increasing count.
#[derive(Debug, Default)]
pub struct Counter(AtomicU64);

impl Counter {
    /// Adds one.
    pub fn inc(&self) {
        self.0.fetch_add(1, Ordering::Relaxed);
    }
    /// Adds `n`.
    pub fn add(&self, n: u64) {
        self.0.fetch_add(n, Ordering::Relaxed);
    }
    /// The value now (a relaxed read: another thread's latest `inc` may not be in it yet).
    pub fn get(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

/// One label, `name`, as client-go's workqueue and leader-election metrics have.
type NameLabel = [(&'static str, String); 1];
type HistogramFamily<L> = Family<L, Histogram, fn() -> Histogram>;

/// client-go's workqueue duration buckets: 10 ns to 10 s, by tens.
fn queue_histogram() -> Histogram {
    Histogram::new(go_exponential_buckets(10e-9, 10.0, 10))
}

/// Prometheus' Go client's `ExponentialBuckets`: each bound the one before times `factor`,
/// so the float bounds (`le="9.999999999999999e-06"`) are those kube-controller-manager
/// exports, and a query over both collectors' series meets the same `le` values.
fn go_exponential_buckets(start: f64, factor: f64, count: usize) -> Vec<f64> {
    std::iter::successors(Some(start), |b| Some(b * factor)).take(count).collect()
}

/// The controller's own counters and instruments.
#[derive(Debug)]
pub struct Metrics {
    /// Discovery or monitor resyncs that failed (upstream's
    /// `garbagecollector_controller_resources_sync_error_total`).
    pub resources_sync_errors: Counter,
    /// Watch stream errors (each retried with backoff).
    pub watch_errors: Counter,
    /// Batches applied to the graph.
    pub ingest_batches: Counter,
    /// Events applied to the graph.
    pub ingest_events: Counter,
    /// Events rejected as malformed.
    pub ingest_rejected: Counter,
    /// Time spent applying batches, in microseconds.
    pub ingest_micros: Counter,
    warmup_seconds: Mutex<BTreeMap<String, f64>>,
    unsynced: Mutex<Vec<String>>,
    /// The last `kube_gc_api_calls_total{verb="get",purpose="read"}` exported: it never goes
    /// below it (see the scrape).
    pub(crate) read_gets_exported: AtomicU64,
    collecting_since: OnceLock<Instant>,
    /// Set in shadow mode (`--dry-run`): the collector's would-be deletions are no deletions.
    dry_run: OnceLock<()>,
    queue_duration: HistogramFamily<NameLabel>,
    work_duration: HistogramFamily<NameLabel>,
    leader: Family<NameLabel, Gauge>,
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics {
            resources_sync_errors: Counter::default(),
            watch_errors: Counter::default(),
            ingest_batches: Counter::default(),
            ingest_events: Counter::default(),
            ingest_rejected: Counter::default(),
            ingest_micros: Counter::default(),
            warmup_seconds: Mutex::default(),
            unsynced: Mutex::default(),
            read_gets_exported: AtomicU64::new(0),
            collecting_since: OnceLock::new(),
            dry_run: OnceLock::new(),
            queue_duration: Family::new_with_constructor(queue_histogram),
            work_duration: Family::new_with_constructor(queue_histogram),
            leader: Family::default(),
        }
    }
}

impl Metrics {
    /// Records how long `resource` took from its watcher's start to the end of its initial list.
    pub fn set_warmup_seconds(&self, resource: &str, seconds: f64) {
        self.warmup_seconds.lock().expect("metrics lock").insert(resource.to_owned(), seconds);
    }

    /// Drops `resource`'s [`set_warmup_seconds`](Self::set_warmup_seconds): it is no longer
    /// watched.
    pub fn forget_warmup_seconds(&self, resource: &str) {
        self.warmup_seconds.lock().expect("metrics lock").remove(resource);
    }

    /// How long each synced resource took to list, by resource.
    pub fn warmup_seconds(&self) -> BTreeMap<String, f64> {
        self.warmup_seconds.lock().expect("metrics lock").clone()
    }

    /// Records the resources whose watcher has not delivered its initial list although the
    /// collector proceeds (past `--initial-sync-timeout`); empty once every one has synced.
    pub fn set_unsynced(&self, resources: &[String]) {
        *self.unsynced.lock().expect("metrics lock") = resources.to_vec();
    }

    /// Marks the moment this process started collecting (after winning the Lease): what
    /// `kube_gc_first_deletion_seconds` and `kube_gc_last_deletion_seconds` count from.
    pub fn start_collecting(&self) {
        let _ = self.collecting_since.set(Instant::now());
    }

    /// Marks the process as shadow mode (`--dry-run`): the deletion metrics
    /// (`kube_gc_deleted_total`, `kube_gc_api_calls_per_collected_object`,
    /// `kube_gc_first_deletion_seconds`, `kube_gc_last_deletion_seconds`) are not exported, as
    /// nothing was deleted; `kube_gc_dry_run_writes_total` counts what would have been.
    pub fn set_dry_run(&self) {
        let _ = self.dry_run.set(());
    }

    /// Whether [`set_dry_run`](Self::set_dry_run) was called.
    pub fn dry_run(&self) -> bool {
        self.dry_run.get().is_some()
    }

    /// `leader_election_master_status{name=lease}`: 1 while this process holds the Lease, 0
    /// while it waits for it.
    pub fn set_leader(&self, lease: &str, leading: bool) {
        self.leader.get_or_create(&[("name", lease.to_owned())]).set(i64::from(leading));
    }

    /// Where `queue`'s wait and work durations go (`workqueue_queue_duration_seconds`,
    /// `workqueue_work_duration_seconds`, labelled with its name).
    pub fn queue_durations(&self, queue: &str) -> Arc<dyn QueueDurations> {
        let label = [("name", queue.to_owned())];
        Arc::new(QueueHistograms {
            queued: self.queue_duration.get_or_create(&label).clone(),
            worked: self.work_duration.get_or_create(&label).clone(),
        })
    }
}

struct QueueHistograms {
    queued: Histogram,
    worked: Histogram,
}

impl QueueDurations for QueueHistograms {
    fn queued(&self, waited: Duration) {
        self.queued.observe(waited.as_secs_f64());
    }
    fn worked(&self, took: Duration) {
        self.worked.observe(took.as_secs_f64());
    }
}

/// What a scrape reads besides [`Metrics`].
#[derive(Clone, Debug)]
pub struct Sources {
    /// The dependency graph (its size).
    pub graph: Arc<Graph>,
    /// attemptToDelete and attemptToOrphan.
    pub queues: [Arc<WorkQueue<NodeKey>>; 2],
    /// The collector's API calls.
    pub calls: Arc<ApiCallCounts>,
    /// The collector (its decisions and proof counts).
    pub collector: Arc<kube_gc_engine::collector::Collector<crate::kube_cluster::KubeCluster>>,
    /// What happened to the Warning events.
    pub events: Arc<crate::events::EventCounts>,
}

/// The registry of every family `/metrics` serves.
pub fn registry(metrics: Arc<Metrics>, sources: Sources) -> Registry {
    let mut registry = Registry::default();
    registry.register(
        "workqueue_queue_duration_seconds",
        "How long in seconds an item stays in workqueue before being requested",
        metrics.queue_duration.clone(),
    );
    registry.register(
        "workqueue_work_duration_seconds",
        "How long in seconds processing an item from workqueue takes",
        metrics.work_duration.clone(),
    );
    registry.register(
        "leader_election_master_status",
        "Gauge of if the reporting system is master of the relevant lease, 0 indicates backup, 1 indicates master. 'name' is the string used to identify the lease",
        metrics.leader.clone(),
    );
    rest_client::global().register(&mut registry);
    registry.register_collector(Box::new(process::ProcessCollector));
    registry.register_collector(Box::new(scrape::ScrapeTime { metrics, sources }));
    registry
}

/// The registry's families in the OpenMetrics text format.
pub fn encode(registry: &Registry) -> String {
    let mut out = String::new();
    // Writing to a String cannot fail; a collector's error would be a bug, shown in the text.
    if let Err(e) = prometheus_client::encoding::text::encode(&mut out, registry) {
        out.push_str(&format!("# encoding failed: {e}\n"));
    }
    out
}

#[cfg(test)]
mod tests {
    /// The workqueue buckets are the floats client-go's `ExponentialBuckets(10e-9, 10, 10)`
    /// gives (each the one before times ten), not the nearest powers of ten.
    #[test]
    fn queue_buckets_are_client_gos_floats() {
        let buckets = super::go_exponential_buckets(10e-9, 10.0, 10);
        let go = [1e-08, 1e-07, 1e-06, 9.999999999999999e-06, 9.999999999999999e-05];
        assert_eq!(buckets[..5], go);
        assert_eq!(buckets[5..], [0.001, 0.01, 0.1, 1.0, 10.0]);
        assert_ne!(buckets[3], 1e-5, "powf's bound, not Go's");
    }
}
