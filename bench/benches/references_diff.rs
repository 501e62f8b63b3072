//! `references_diff`: upstream's `BenchmarkReferencesDiffs` (GC-SPEC.md §9.A): old owner
//! references `[{1},{2}]`, new `[{2},{3}]` (one added, one removed, one kept).
//!
//! Only `upstream_design`'s port of `referencesDiffs` (a map by UID, as written in Go) is
//! measured: the engine's `references_diffs` is crate-private (`ingest::rules`), so it cannot
//! be reached from here; its cost is inside every `ingest/engine/*` figure.

mod common;

use std::hint::black_box;

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use kube_gc_bench::baseline::references_diffs;
use kube_gc_engine::OwnerReference;

kube_gc_bench::counting_allocator!();

fn owner(uid: &str) -> OwnerReference {
    OwnerReference { uid: uid.to_owned(), ..OwnerReference::default() }
}

fn bench_references_diff(c: &mut Criterion) {
    let old = vec![owner("1"), owner("2")];
    let new = vec![owner("2"), owner("3")];
    let mut group = c.benchmark_group("references_diff");
    group.throughput(Throughput::Elements(1));
    group.bench_function(BenchmarkId::new("upstream_design", "old=2,new=2"), |b| {
        b.iter(|| {
            let diff = references_diffs(black_box(&old), black_box(&new));
            black_box((diff.added.len(), diff.removed.len(), diff.changed.len()))
        })
    });
    group.finish();
}

criterion_group! {
    name = benches;
    config = common::config();
    targets = bench_references_diff
}
criterion_main!(benches);
