//! The one criterion configuration every bench file uses, and the shared parameters.
//!
//! Short on purpose (`cargo bench -p kube-gc-bench` finishes in minutes on 2 cores): 10
//! samples, 1 s of warm-up, 3 s of measurement. `KUBE_GC_BENCH_OBJECTS` overrides the workload
//! size (default 100k objects).

use std::time::Duration;

use criterion::Criterion;

/// Default workload size of the benches.
pub const DEFAULT_OBJECTS: usize = 100_000;

/// The shared criterion configuration (command-line flags still override it).
pub fn config() -> Criterion {
    Criterion::default()
        .sample_size(10)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3))
        .configure_from_args()
}

/// Workload size: `KUBE_GC_BENCH_OBJECTS`, else [`DEFAULT_OBJECTS`].
#[allow(dead_code)] // not every bench file sizes a workload
pub fn objects() -> usize {
    std::env::var("KUBE_GC_BENCH_OBJECTS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(DEFAULT_OBJECTS)
}

/// Available cores.
#[allow(dead_code)] // not every bench file runs threads
pub fn cores() -> usize {
    std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get)
}

/// 1, 2 and all cores, without repeats.
#[allow(dead_code)] // not every bench file runs threads
pub fn thread_counts() -> Vec<usize> {
    let mut t = vec![1, 2, cores()];
    t.sort_unstable();
    t.dedup();
    t
}

/// `100k`, `1M`, `2500`: the size as it appears in benchmark ids.
#[allow(dead_code)] // not every bench file sizes a workload
pub fn size_label(n: usize) -> String {
    if n >= 1_000_000 && n % 1_000_000 == 0 {
        format!("{}M", n / 1_000_000)
    } else if n >= 1_000 && n % 1_000 == 0 {
        format!("{}k", n / 1_000)
    } else {
        n.to_string()
    }
}
