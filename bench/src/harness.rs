//! One timed warm-up of each implementation, with its memory: what the `warmup` command and the
//! criterion benches run.
//!
//! Each function builds a fresh graph, feeds it the events, and returns the wall-clock time of
//! the ingestion alone (never generation, never dropping the graph), the graph's live bytes
//! (the counting allocator's live bytes after minus before, graph alive, outputs dropped) and
//! what the run queued to attemptToDelete.

use std::sync::Arc;
use std::time::{Duration, Instant};

use kube_gc_engine::{Event, Graph, Ingester};

use crate::alloc::AllocSnapshot;
use crate::baseline::GraphBuilder;
use crate::dashmap_graph::DashGraph;

/// Engine settings.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct EngineConfig {
    /// Graph shards (a power of two).
    pub shards: usize,
    /// Events per `Ingester::ingest` call.
    pub batch: usize,
    /// Ingestion threads.
    pub threads: usize,
}

/// The result of one timed warm-up.
#[derive(Debug)]
pub struct Run<G> {
    /// Ingestion time.
    pub elapsed: Duration,
    /// Events ingested.
    pub events: usize,
    /// attemptToDelete items after the warm-up.
    pub attempt_to_delete: usize,
    /// Live bytes and allocation calls the graph holds / made (outputs dropped).
    pub alloc: AllocSnapshot,
    /// Nodes in the graph.
    pub nodes: usize,
    /// CPU time and page faults of the whole process during ingestion.
    pub cpu: ProcStat,
    /// The graph, still alive (drop it outside any timed region).
    pub graph: G,
}

impl<G> Run<G> {
    /// Events per second.
    pub fn events_per_sec(&self) -> f64 {
        self.events as f64 / self.elapsed.as_secs_f64()
    }
}

/// Ingests `events` into a fresh engine graph, in batches of `config.batch`.
///
/// # Panics
///
/// If `config.shards` is not a power of two, or an event is rejected.
pub fn run_engine(events: &[Event], config: EngineConfig) -> Run<Arc<Graph>> {
    assert_counting();
    let before = AllocSnapshot::now();
    let graph = Arc::new(Graph::new(config.shards).expect("valid shard count"));
    let mut ingester = Ingester::new(Arc::clone(&graph), config.threads);
    let mut attempt_to_delete = 0;
    let mut errors = 0;
    let stat = ProcStat::now();
    let start = Instant::now();
    for chunk in events.chunks(config.batch.max(1)) {
        let out = ingester.ingest(chunk);
        attempt_to_delete += out.attempt_to_delete().count();
        errors += out.errors.len();
    }
    let elapsed = start.elapsed();
    let cpu = stat.since();
    drop(ingester);
    let alloc = before.since();
    assert_eq!(errors, 0, "the engine rejected workload events");
    let nodes = graph.len();
    Run { elapsed, events: events.len(), attempt_to_delete, alloc, nodes, cpu, graph }
}

/// Ingests `events` through `upstream_design` (one event at a time, one consumer thread).
pub fn run_baseline(events: &[Event]) -> Run<GraphBuilder> {
    assert_counting();
    let before = AllocSnapshot::now();
    let builder = GraphBuilder::new();
    let stat = ProcStat::now();
    let start = Instant::now();
    let stats = builder.run(events);
    let elapsed = start.elapsed();
    let cpu = stat.since();
    let alloc = before.since();
    assert_eq!(stats.processed, events.len());
    let attempt_to_delete = builder.attempt_to_delete_len();
    let nodes = builder.len();
    Run { elapsed, events: events.len(), attempt_to_delete, alloc, nodes, cpu, graph: builder }
}

/// Ingests the add events of `events` into a fresh [`DashGraph`] on `threads` threads.
pub fn run_dashmap(events: &[Event], threads: usize) -> Run<DashGraph> {
    assert_counting();
    let before = AllocSnapshot::now();
    let graph = DashGraph::new();
    let stat = ProcStat::now();
    let start = Instant::now();
    let attempt_to_delete = graph.ingest_adds(events, threads);
    let elapsed = start.elapsed();
    let cpu = stat.since();
    let alloc = before.since();
    let nodes = graph.len();
    Run { elapsed, events: events.len(), attempt_to_delete, alloc, nodes, cpu, graph }
}

/// Peak and current resident set size of this process, from `/proc/self/status`.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub struct Rss {
    /// `VmHWM`, in bytes (0 if unavailable).
    pub peak: u64,
    /// `VmRSS`, in bytes (0 if unavailable).
    pub current: u64,
}

impl Rss {
    /// Reads both figures now.
    pub fn now() -> Rss {
        let status = procfs::process::Process::myself().and_then(|p| p.status()).ok();
        let bytes = |kib: Option<u64>| kib.map_or(0, |kib| kib * 1024);
        Rss {
            peak: bytes(status.as_ref().and_then(|s| s.vmhwm)),
            current: bytes(status.as_ref().and_then(|s| s.vmrss)),
        }
    }

    /// Resets the peak to the current RSS (`echo 5 > /proc/self/clear_refs`); false where the
    /// kernel does not allow it, in which case the peak keeps counting from process start.
    pub fn reset_peak() -> bool {
        std::fs::write("/proc/self/clear_refs", "5").is_ok()
    }
}

/// CPU time and page faults of this process, from `/proc/self/stat` (all threads).
#[derive(Clone, Copy, PartialEq, Debug, Default)]
pub struct ProcStat {
    /// User CPU seconds.
    pub user: f64,
    /// Kernel CPU seconds (page faults, futexes, thread creation).
    pub sys: f64,
    /// Minor page faults (first touches of fresh pages).
    pub minor_faults: u64,
}

impl ProcStat {
    /// Reads the figures now (zeros where `/proc` is unavailable).
    pub fn now() -> ProcStat {
        let Ok(stat) = procfs::process::Process::myself().and_then(|p| p.stat()) else {
            return ProcStat::default();
        };
        let ticks = procfs::ticks_per_second() as f64;
        ProcStat {
            user: stat.utime as f64 / ticks,
            sys: stat.stime as f64 / ticks,
            minor_faults: stat.minflt,
        }
    }

    /// The figures since `self`.
    pub fn since(self) -> ProcStat {
        let now = ProcStat::now();
        ProcStat {
            user: now.user - self.user,
            sys: now.sys - self.sys,
            minor_faults: now.minor_faults - self.minor_faults,
        }
    }
}

/// Memory figures need the counting allocator; a binary that forgot it would report 0 bytes.
fn assert_counting() {
    assert!(
        crate::alloc::is_counting(),
        "this binary does not allocate through kube_gc_bench::alloc::CountingAlloc: \
         add `kube_gc_bench::counting_allocator!();` at its root"
    );
}
