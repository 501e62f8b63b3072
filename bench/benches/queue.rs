//! `queue`: work-queue throughput, kube-gc's `WorkQueue` beside `upstream_design`'s
//! client-go-shaped queue (`baseline::Queue`: one std mutex, a condvar, FIFO, dirty and
//! processing sets; no metrics, no rate limiter).
//!
//! `Throughput::Elements(OPS)`, each element one item through `add`, `get` and `done`:
//! - `queue/<impl>/single-thread`: add OPS distinct items, then get and done each;
//! - `queue/<impl>/duplicates`: add each of OPS/4 items 4 times (3 collapse), then drain;
//! - `queue/<impl>/contended/threads=T`: T threads, each adding an item then taking one
//!   (any thread's) and marking it done, OPS in all.

mod common;

use criterion::measurement::WallTime;
use criterion::{
    BenchmarkGroup, BenchmarkId, Criterion, Throughput, criterion_group, criterion_main,
};
use kube_gc_bench::baseline::Queue;
use kube_gc_engine::WorkQueue;

kube_gc_bench::counting_allocator!();

/// Items through the queue per iteration.
const OPS: u64 = 100_000;
/// Contending threads.
const CONTENDED_THREADS: [usize; 3] = [2, 3, 4];

/// The three operations the benches use, for both queues.
trait BenchQueue: Sync {
    fn add(&self, item: u64);
    fn get(&self) -> Option<u64>;
    fn done(&self, item: u64);
}

impl BenchQueue for WorkQueue<u64> {
    fn add(&self, item: u64) {
        WorkQueue::add(self, item);
    }
    fn get(&self) -> Option<u64> {
        WorkQueue::get(self)
    }
    fn done(&self, item: u64) {
        WorkQueue::done(self, &item);
    }
}

impl BenchQueue for Queue<u64> {
    fn add(&self, item: u64) {
        Queue::add(self, item);
    }
    fn get(&self) -> Option<u64> {
        Queue::get(self)
    }
    fn done(&self, item: u64) {
        Queue::done(self, &item);
    }
}

fn single_thread(q: &impl BenchQueue, copies: u64) {
    for i in 0..OPS / copies {
        for _ in 0..copies {
            q.add(i);
        }
    }
    for _ in 0..OPS / copies {
        let item = q.get().expect("an item");
        q.done(item);
    }
}

fn contended(q: &impl BenchQueue, threads: usize) {
    let per = OPS / threads as u64;
    std::thread::scope(|s| {
        for t in 0..threads as u64 {
            s.spawn(move || {
                for i in 0..per {
                    q.add(t * per + i);
                    let item = q.get().expect("an item");
                    q.done(item);
                }
            });
        }
    });
}

fn cases<Q: BenchQueue>(
    group: &mut BenchmarkGroup<'_, WallTime>,
    name: &str,
    make: impl Fn() -> Q,
) {
    group.bench_function(BenchmarkId::new(name, "single-thread"), |b| {
        b.iter(|| single_thread(&make(), 1))
    });
    group.bench_function(BenchmarkId::new(name, "duplicates"), |b| {
        b.iter(|| single_thread(&make(), 4))
    });
    for threads in CONTENDED_THREADS {
        group.bench_function(BenchmarkId::new(name, format!("contended/threads={threads}")), |b| {
            b.iter(|| contended(&make(), threads))
        });
    }
}

fn bench_queue(c: &mut Criterion) {
    let mut group = c.benchmark_group("queue");
    group.throughput(Throughput::Elements(OPS));
    cases(&mut group, "engine", || WorkQueue::<u64>::new("bench"));
    cases(&mut group, "upstream_design", Queue::<u64>::new);
    group.finish();
}

criterion_group! {
    name = benches;
    config = common::config();
    targets = bench_queue
}
criterion_main!(benches);
