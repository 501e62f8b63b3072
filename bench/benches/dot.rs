//! `dot`: DOT export of a warm-up graph (upstream's `/debug/controllers/garbagecollector/graph`,
//! GC-SPEC.md §7), through `kube_gc_engine::dot`.
//!
//! - `dot/engine/owners-first/<N>/full`: `to_dot` of the whole graph (N + V nodes; the N/5
//!   ConfigMaps without owner or dependent have no vertex), `Throughput::Elements` = nodes;
//! - `dot/engine/owners-first/<N>/uid=deployment`: `to_dot_for_uids` of one Deployment (its
//!   family: 10 nodes), one element.
//!
//! No baseline: `upstream_design` has no DOT export (upstream's is Go's `dump.go`).

mod common;

use std::hint::black_box;
use std::sync::Arc;

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use kube_gc_bench::workload::{Order, Workload, WorkloadConfig};
use kube_gc_engine::dot::{to_dot, to_dot_for_uids};
use kube_gc_engine::{Graph, Ingester, Uid};

kube_gc_bench::counting_allocator!();

fn bench_dot(c: &mut Criterion) {
    let n = common::objects();
    let workload = Workload::generate(&WorkloadConfig::new(n, Order::OwnersFirst));
    let graph = Arc::new(Graph::new(64).expect("valid shard count"));
    let mut ingester = Ingester::new(Arc::clone(&graph), common::cores());
    for chunk in workload.events().chunks(4096) {
        ingester.ingest(chunk);
    }
    // Owners-first: the first event is Deployment 0.
    let deployment = Uid::parse(&workload.events()[0].object.uid);
    let label = format!("owners-first/{}", common::size_label(n));

    let mut group = c.benchmark_group("dot");
    group.throughput(Throughput::Elements(graph.len() as u64));
    group.bench_function(BenchmarkId::new("engine", format!("{label}/full")), |b| {
        b.iter(|| black_box(to_dot(&graph)).len())
    });
    group.throughput(Throughput::Elements(1));
    group.bench_function(BenchmarkId::new("engine", format!("{label}/uid=deployment")), |b| {
        b.iter(|| black_box(to_dot_for_uids(&graph, &[deployment])).len())
    });
    group.finish();
}

criterion_group! {
    name = benches;
    config = common::config();
    targets = bench_dot
}
criterion_main!(benches);
