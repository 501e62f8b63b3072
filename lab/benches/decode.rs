//! `decode`: one list page of 500 Pods' metadata, decoded as the watchers did before the
//! metadata decoder (kube-rs's `PartialObjectMeta`, whole, then the engine's fields copied out),
//! as they do now from JSON (`kube_gc::lean_meta::LeanObject`), and from protobuf
//! (`kube_gc_wire::decode_list`, `--kube-api-content-type application/vnd.kubernetes.protobuf`),
//! side by side. The protobuf page holds the same objects, encoded as simcluster serves them.
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
use kube_gc_wire::messages::{ListMeta, PartialObjectMetadataList};

kube_gc_bench::counting_allocator!();

const PAGE: usize = 500;

const SHAPES: [(&str, &str); 2] = [
    ("simcluster", include_str!("fixtures/pod-simcluster.json")),
    ("kube-apiserver", include_str!("fixtures/pod-kube-apiserver-v1.20.2.json")),
];

/// One page in both encodings.
struct Page {
    json: String,
    protobuf: bytes::Bytes,
}

/// A PartialObjectMetadataList page of `PAGE` copies of `item`, each with its own uid, as JSON
/// and as protobuf.
fn page(item: &str) -> Page {
    let json = json_page(item);
    let list: serde_json::Value = serde_json::from_str(&json).unwrap();
    let items = (list["items"].as_array().unwrap().iter())
        .map(|o| kube_gc_simcluster::partial_object_metadata(o.to_string().as_bytes()))
        .collect();
    let metadata = ListMeta {
        resource_version: Some("9".into()),
        r#continue: Some("c".into()),
        ..Default::default()
    };
    let protobuf =
        kube_gc_wire::encode_list(&PartialObjectMetadataList { metadata: Some(metadata), items });
    Page { json, protobuf: protobuf.into() }
}

fn json_page(item: &str) -> String {
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

fn full(page: &Page) -> Vec<ObjectMeta> {
    let list: ObjectList<PartialObjectMeta<DynamicObject>> =
        serde_json::from_str(&page.json).unwrap();
    list.items.iter().map(|o| from_kube_meta(&o.metadata)).collect()
}

fn lean(page: &Page) -> Vec<ObjectMeta> {
    let list: ObjectList<LeanObject> = serde_json::from_str(&page.json).unwrap();
    // One by one into a new vector, as the watchers send them (a `collect` here would reuse
    // the page's larger buffer in place).
    let mut out = Vec::with_capacity(list.items.len());
    for item in list.items {
        out.push(item.into_meta());
    }
    out
}

fn protobuf(page: &Page) -> Vec<ObjectMeta> {
    match kube_gc_wire::decode_list(page.protobuf.clone()).unwrap() {
        kube_gc_wire::OrStatus::Ok(page) => page.items,
        kube_gc_wire::OrStatus::Status(s) => panic!("{s:?}"),
    }
}

type Decoder = fn(&Page) -> Vec<ObjectMeta>;
const DECODERS: [(&str, Decoder); 3] =
    [("kube-rs-full", full), ("lean", lean), ("protobuf", protobuf)];

/// Allocation calls per object, and bytes per object still held by what the decoder returned.
fn counts(decode: Decoder, page: &Page) -> (f64, f64) {
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
        assert_eq!(full(&page), lean(&page), "the JSON decoders disagree on the {shape} page");
        assert_eq!(lean(&page), protobuf(&page), "JSON and protobuf disagree on the {shape} page");
        println!(
            "{shape:<16} page bytes: JSON {}, protobuf {}",
            page.json.len(),
            page.protobuf.len()
        );
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
