//! `decode`: one list page of 500 Pods' metadata, decoded as the watchers did before the
//! metadata decoder (kube-rs's `PartialObjectMeta`, whole, then the engine's fields copied out)
//! and as they do now (`kube_gc::lean_meta::LeanObject`), side by side.
//!
//! Two shapes of Pod: as simcluster's preload writes it (the end-to-end benchmarks' input), and
//! as kube-apiserver v1.20.2 returns a Pod the real-server benchmark creates (captured from
//! `scripts/testenv`: labels and a `managedFields` entry). Before timing, it prints what counts
//! do not blur (the counting allocator's): allocations per object, and the bytes per object
//! the decoded result keeps (equal for both: they return the same metadata).
//!
//!     cargo bench -p kube-gc-lab --bench decode

use std::hint::black_box;
use std::time::Duration;

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use kube::api::{DynamicObject, ObjectList};
use kube::core::PartialObjectMeta;
use kube_gc::lean_meta::{LeanObject, from_kube_meta};
use kube_gc_bench::alloc::AllocSnapshot;
use kube_gc_engine::ObjectMeta;

kube_gc_bench::counting_allocator!();

const PAGE: usize = 500;

const SHAPES: [(&str, &str); 2] = [
    ("simcluster", include_str!("fixtures/pod-simcluster.json")),
    ("kube-apiserver", include_str!("fixtures/pod-kube-apiserver-v1.20.2.json")),
];

/// A PartialObjectMetadataList page of `PAGE` copies of `item`, each with its own uid.
fn page(item: &str) -> String {
    let uid = serde_json::from_str::<serde_json::Value>(item).unwrap()["metadata"]["uid"]
        .as_str()
        .unwrap()
        .to_owned();
    let items: Vec<String> = (0..PAGE)
        .map(|i| item.replacen(&uid, &format!("{}{i:06}", &uid[..uid.len() - 6]), 1))
        .collect();
    format!(
        r#"{{"kind":"PartialObjectMetadataList","apiVersion":"meta.k8s.io/v1","metadata":{{"resourceVersion":"9","continue":"c"}},"items":[{}]}}"#,
        items.join(",")
    )
}

fn full(page: &str) -> Vec<ObjectMeta> {
    let list: ObjectList<PartialObjectMeta<DynamicObject>> = serde_json::from_str(page).unwrap();
    list.items.iter().map(|o| from_kube_meta(&o.metadata)).collect()
}

fn lean(page: &str) -> Vec<ObjectMeta> {
    let list: ObjectList<LeanObject> = serde_json::from_str(page).unwrap();
    // One by one into a new vector, as the watchers send them (a `collect` here would reuse
    // the page's larger buffer in place).
    let mut out = Vec::with_capacity(list.items.len());
    for item in list.items {
        out.push(item.into_meta());
    }
    out
}

type Decoder = fn(&str) -> Vec<ObjectMeta>;
const DECODERS: [(&str, Decoder); 2] = [("kube-rs-full", full), ("lean", lean)];

/// Allocation calls per object, and bytes per object still held by what the decoder returned.
fn counts(decode: Decoder, page: &str) -> (f64, f64) {
    let before = AllocSnapshot::now();
    let decoded = decode(page);
    let during = before.since();
    assert_eq!(decoded.len(), PAGE);
    (during.calls as f64 / PAGE as f64, during.live_bytes as f64 / PAGE as f64)
}

fn bench_decode(c: &mut Criterion) {
    println!(
        "\n{:<16} {:<14} {:>14} {:>18}",
        "shape", "decoder", "allocs/object", "kept bytes/object"
    );
    for (shape, item) in SHAPES {
        let page = page(item);
        assert_eq!(full(&page), lean(&page), "the two decoders disagree on the {shape} page");
        for (name, decode) in DECODERS {
            let (allocs, bytes) = counts(decode, &page);
            println!("{shape:<16} {name:<14} {allocs:>14.1} {bytes:>18.0}");
        }
    }
    let mut group = c.benchmark_group("decode_page");
    group.throughput(Throughput::Elements(PAGE as u64));
    for (shape, item) in SHAPES {
        let page = page(item);
        for (name, decode) in DECODERS {
            group.bench_function(BenchmarkId::new(name, shape), |b| {
                b.iter(|| black_box(decode(black_box(&page))))
            });
        }
    }
    group.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .sample_size(20)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3))
        .configure_from_args();
    targets = bench_decode
}
criterion_main!(benches);
