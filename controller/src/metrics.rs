//! `/metrics`, in the Prometheus text format, with upstream's metric names where upstream has
//! them (GC-SPEC.md §8).
//!
//! Almost every value here already exists as a counter somewhere (the work queues' stats, the
//! cluster's call counts, the graph's size) and is read at scrape time, so the exposition is
//! written directly rather than through a registry of instruments.

use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use kube_gc_engine::Graph;
use kube_gc_engine::graph::NodeKey;
use kube_gc_engine::queue::WorkQueue;

use crate::kube_cluster::ApiCallCounts;

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
    /// The count.
    pub fn get(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

/// The controller's own counters.
#[derive(Debug, Default)]
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
}

impl Metrics {
    /// Records how long `resource` took from its watcher's start to the end of its initial list.
    pub fn set_warmup_seconds(&self, resource: &str, seconds: f64) {
        self.warmup_seconds.lock().expect("metrics lock").insert(resource.to_owned(), seconds);
    }

    /// Records the resources whose watcher has not delivered its initial list although the
    /// collector proceeds (past `--initial-sync-timeout`); empty once every one has synced.
    pub fn set_unsynced(&self, resources: &[String]) {
        *self.unsynced.lock().expect("metrics lock") = resources.to_vec();
    }

    /// Renders every metric.
    pub fn render(
        &self,
        graph: &Graph,
        queues: &[&WorkQueue<NodeKey>],
        calls: &ApiCallCounts,
        collector: &kube_gc_engine::collector::CollectorStats,
    ) -> String {
        let mut out = String::new();
        let mut metric = |name: &str, kind: &str, help: &str, samples: &[(String, f64)]| {
            let _ = writeln!(out, "# HELP {name} {help}");
            let _ = writeln!(out, "# TYPE {name} {kind}");
            for (labels, value) in samples {
                let _ = writeln!(out, "{name}{labels} {value}");
            }
        };
        let q = |f: &dyn Fn(&kube_gc_engine::queue::QueueStats) -> f64| -> Vec<(String, f64)> {
            queues.iter().map(|q| (format!("{{name=\"{}\"}}", q.name()), f(&q.stats()))).collect()
        };
        metric("workqueue_depth", "gauge", "Current depth of workqueue", &q(&|s| s.depth as f64));
        metric(
            "workqueue_adds_total",
            "counter",
            "Total number of adds handled by workqueue",
            &q(&|s| s.adds_total as f64),
        );
        metric(
            "workqueue_retries_total",
            "counter",
            "Total number of retries handled by workqueue",
            &q(&|s| s.retries_total as f64),
        );
        metric(
            "kube_gc_workqueue_urgent_depth",
            "gauge",
            "Of workqueue_depth, the items in the urgent lane: likely garbage (virtual owners to verify, dependents of absent owners, foreground deletions) ahead of re-checks",
            &q(&|s| s.urgent as f64),
        );
        metric(
            "kube_gc_workqueue_processing",
            "gauge",
            "Items being processed",
            &q(&|s| s.processing as f64),
        );
        metric(
            "kube_gc_workqueue_waiting",
            "gauge",
            "Items waiting for their backoff to pass",
            &q(&|s| s.waiting as f64),
        );
        metric(
            "garbagecollector_controller_resources_sync_error_total",
            "counter",
            "Number of garbage collector resources sync errors",
            &[(String::new(), self.resources_sync_errors.get() as f64)],
        );
        metric(
            "kube_gc_graph_nodes",
            "gauge",
            "Nodes in the dependency graph",
            &[(String::new(), graph.len() as f64)],
        );
        metric(
            "kube_gc_ingest_batches_total",
            "counter",
            "Batches applied to the graph",
            &[(String::new(), self.ingest_batches.get() as f64)],
        );
        metric(
            "kube_gc_ingest_events_total",
            "counter",
            "Events applied to the graph",
            &[(String::new(), self.ingest_events.get() as f64)],
        );
        metric(
            "kube_gc_ingest_rejected_events_total",
            "counter",
            "Malformed events rejected",
            &[(String::new(), self.ingest_rejected.get() as f64)],
        );
        metric(
            "kube_gc_ingest_seconds_total",
            "counter",
            "Time spent applying batches (events_total / this = events per second)",
            &[(String::new(), self.ingest_micros.get() as f64 / 1e6)],
        );
        metric(
            "kube_gc_watch_errors_total",
            "counter",
            "Watch stream errors, each retried",
            &[(String::new(), self.watch_errors.get() as f64)],
        );
        let warmup: Vec<_> = self
            .warmup_seconds
            .lock()
            .expect("metrics lock")
            .iter()
            .map(|(r, s)| (format!("{{resource=\"{r}\"}}"), *s))
            .collect();
        metric(
            "kube_gc_warmup_seconds",
            "gauge",
            "Seconds from a watcher's start to the end of its initial list",
            &warmup,
        );
        let unsynced: Vec<_> = self
            .unsynced
            .lock()
            .expect("metrics lock")
            .iter()
            .map(|r| (format!("{{resource=\"{r}\"}}"), 1.0))
            .collect();
        metric(
            "kube_gc_unsynced_resource",
            "gauge",
            "1 for each resource whose watcher has not synced while the collector proceeds without it (past --initial-sync-timeout)",
            &unsynced,
        );
        // By verb and purpose: a GET proves an owner absent (or present), or reads an item.
        let load = |c: &AtomicU64| c.load(Ordering::Relaxed);
        let proof_gets = load(&collector.proof_gets).min(load(&calls.get));
        let by_purpose = [
            ("get", "proof", proof_gets),
            ("get", "read", load(&calls.get) - proof_gets),
            ("list", "proof", load(&calls.list)),
            ("patch", "patch", load(&calls.patch)),
            ("delete", "delete", load(&calls.delete)),
            ("create", "event", load(&calls.event)),
        ];
        let series: Vec<_> = by_purpose
            .iter()
            .map(|(v, p, n)| (format!("{{verb=\"{v}\",purpose=\"{p}\"}}"), *n as f64))
            .collect();
        metric(
            "kube_gc_api_calls_total",
            "counter",
            "API calls made by the collector, by verb and purpose (proof: showing owners absent or present; read: an item's GET; event: Warning events, on their own budget)",
            &series,
        );
        let collector_calls: u64 = by_purpose.iter().filter(|c| c.1 != "event").map(|c| c.2).sum();
        let deleted = load(&collector.deleted);
        if deleted > 0 {
            metric(
                "kube_gc_api_calls_per_collected_object",
                "gauge",
                "The collector's API calls (events and watch lists not counted) per object it deleted",
                &[(String::new(), collector_calls as f64 / deleted as f64)],
            );
        }
        out
    }
}

/// Renders the collector's own counters: what warm-up saved and when garbage went.
pub fn render_collector(
    stats: &kube_gc_engine::collector::CollectorStats,
    started: std::time::Instant,
) -> String {
    let mut out = String::new();
    let mut one = |name: &str, kind: &str, help: &str, value: f64| {
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}\n{name} {value}");
    };
    let get = |c: &AtomicU64| c.load(Ordering::Relaxed) as f64;
    one(
        "kube_gc_deleted_total",
        "counter",
        "Objects the collector deleted (or started deleting)",
        get(&stats.deleted),
    );
    one(
        "kube_gc_verifications_skipped_total",
        "counter",
        "Virtual-owner verifications skipped because the owner was observed since",
        get(&stats.verifications_skipped),
    );
    one(
        "kube_gc_deferred_until_synced_total",
        "counter",
        "Items deferred during warm-up because their decision needs the synced graph",
        get(&stats.deferred_until_synced),
    );
    one(
        "kube_gc_owner_lookups_shared_total",
        "counter",
        "Owner GETs answered by a concurrent identical request",
        get(&stats.owner_lookups_shared),
    );
    one(
        "kube_gc_stale_view_conflicts_total",
        "counter",
        "Writes decided from the graph's copy of an object refused because it had changed (decided again from a live read)",
        get(&stats.stale_view_conflicts),
    );
    one(
        "kube_gc_proven_absent_total",
        "counter",
        "Owners a consistent LIST of their resource proved absent (--bulk-absence-proof)",
        get(&stats.proven_absent),
    );
    one(
        "kube_gc_proof_lists_failed_total",
        "counter",
        "Proof LISTs that failed; their owners were verified by GET",
        get(&stats.proof_lists_failed),
    );
    one(
        "kube_gc_item_reads_saved_total",
        "counter",
        "Item GETs replaced by the graph's observed copy (--read-items-from-graph)",
        get(&stats.item_reads_saved),
    );
    let times = *stats.deletion_times.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((first, last)) = times {
        let since = |t: std::time::Instant| t.saturating_duration_since(started).as_secs_f64();
        one(
            "kube_gc_first_deletion_seconds",
            "gauge",
            "Seconds from start to the first deletion",
            since(first),
        );
        one(
            "kube_gc_last_deletion_seconds",
            "gauge",
            "Seconds from start to the latest deletion",
            since(last),
        );
    }
    out
}

/// Renders what happened to the Warning events: sent, folded into a recent identical one, or
/// dropped because the recorder's queue was full.
pub fn render_events(events: &crate::events::EventCounts) -> String {
    let mut out = String::new();
    let name = "kube_gc_events_total";
    let _ = writeln!(out, "# HELP {name} Warning events recorded, by what became of them");
    let _ = writeln!(out, "# TYPE {name} counter");
    for (outcome, n) in
        [("sent", &events.sent), ("folded", &events.folded), ("dropped", &events.dropped)]
    {
        let _ = writeln!(out, "{name}{{outcome=\"{outcome}\"}} {}", n.load(Ordering::Relaxed));
    }
    out
}
