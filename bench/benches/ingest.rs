//! `ingest`: warm-up ingestion throughput, kube-gc's engine beside its baselines.
//!
//! One group, `Throughput::Elements(N)` (events), ids `ingest/<case>/<params>`:
//! - `ingest/upstream_design/<order>/<N>`: the upstream-design baseline (`baseline.rs`);
//! - `ingest/dashmap/<order>/<N>/threads=T`: the same adds into one `DashMap`
//!   (`dashmap_graph.rs`);
//! - `ingest/engine/<order>/<N>/batch=B,shards=S,threads=T`: the engine, swept over batch
//!   size (at 64 shards, all cores), shard count (batch 4096, all cores) and threads (batch
//!   4096, 64 shards).
//!
//! Each iteration ingests the whole workload into a fresh graph; only ingestion is timed
//! (generation and dropping the graph are not). The batch-size-1 case runs on a tenth of the
//! workload (each batch spawns the ingest threads), still reported per event.

mod common;

use std::time::Duration;

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use kube_gc_bench::harness::{EngineConfig, run_baseline, run_dashmap, run_engine};
use kube_gc_bench::workload::{Order, Workload, WorkloadConfig};

kube_gc_bench::counting_allocator!();

/// Batch sizes swept (at [`DEFAULT_SHARDS`] shards, all cores).
const BATCHES: [usize; 4] = [1, 64, 512, 4096];
/// Shard counts swept (at [`DEFAULT_BATCH`], all cores).
const SHARDS: [usize; 5] = [1, 4, 16, 64, 256];
/// The harness's defaults.
const DEFAULT_SHARDS: usize = 64;
const DEFAULT_BATCH: usize = 4096;
/// The order of the workload: the canonical one.
const ORDER: Order = Order::OwnersFirst;

fn engine_configs() -> Vec<EngineConfig> {
    let all = common::cores();
    let mut configs = Vec::new();
    for batch in BATCHES {
        configs.push(EngineConfig { shards: DEFAULT_SHARDS, batch, threads: all });
    }
    for shards in SHARDS {
        configs.push(EngineConfig { shards, batch: DEFAULT_BATCH, threads: all });
    }
    for threads in common::thread_counts() {
        configs.push(EngineConfig { shards: DEFAULT_SHARDS, batch: DEFAULT_BATCH, threads });
    }
    let mut seen = Vec::new();
    configs.retain(|c| {
        let new = !seen.contains(c);
        seen.push(*c);
        new
    });
    configs
}

fn bench_ingest(c: &mut Criterion) {
    let n = common::objects();
    let workload = Workload::generate(&WorkloadConfig::new(n, ORDER));
    let small = Workload::generate(&WorkloadConfig::new(n / 10, ORDER));
    let mut group = c.benchmark_group("ingest");

    let label = format!("{ORDER}/{}", common::size_label(n));
    group.throughput(Throughput::Elements(n as u64));
    group.bench_function(BenchmarkId::new("upstream_design", &label), |b| {
        b.iter_custom(|iters| (0..iters).map(|_| run_baseline(workload.events()).elapsed).sum())
    });
    for threads in common::thread_counts() {
        let id = BenchmarkId::new("dashmap", format!("{label}/threads={threads}"));
        group.bench_function(id, |b| {
            b.iter_custom(|iters| {
                (0..iters).map(|_| run_dashmap(workload.events(), threads).elapsed).sum()
            })
        });
    }
    for config in engine_configs() {
        let w = if config.batch == 1 { &small } else { &workload };
        let events = w.events();
        group.throughput(Throughput::Elements(events.len() as u64));
        let params = format!(
            "{ORDER}/{}/batch={},shards={},threads={}",
            common::size_label(events.len()),
            config.batch,
            config.shards,
            config.threads
        );
        group.bench_function(BenchmarkId::new("engine", params), |b| {
            b.iter_custom(|iters| {
                (0..iters).map(|_| run_engine(events, config).elapsed).sum::<Duration>()
            })
        });
    }
    group.finish();
}

criterion_group! {
    name = benches;
    config = common::config();
    targets = bench_ingest
}
criterion_main!(benches);
