//! `kube-gc-bench`: the warm-up harness.
//!
//! `kube-gc-bench warmup --objects N --order O` generates `WORKLOAD.md`'s warm-up, then times
//! kube-gc's engine and `upstream_design` ingesting it, in this one process, alternating runs,
//! and prints for each the median events/s, the ratio, the graph's bytes per object (counting
//! allocator), peak RSS and the attemptToDelete length after warm-up, which it checks against
//! `WORKLOAD.md`'s expectation (a mismatch fails the command). With `--json` the last line is
//! one JSON object. See `bench/README.md`.
#![deny(unsafe_code)]

use std::process::ExitCode;
use std::time::{Duration, Instant};

use clap::{Parser, Subcommand};
use indicatif::{ProgressBar, ProgressStyle};
use kube_gc_bench::alloc::{AllocSnapshot, allocator_name};
use kube_gc_bench::harness::{EngineConfig, Rss, run_baseline, run_engine};

use kube_gc_bench::workload::{DEFAULT_NAMESPACES, DEFAULT_SEED, Order, Workload, WorkloadConfig};

kube_gc_bench::counting_allocator!();

#[derive(Parser, Debug)]
#[command(name = "kube-gc-bench", version, about = "kube-gc's warm-up harness")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Times the engine and the upstream-design baseline on the warm-up workload.
    Warmup(WarmupArgs),
    /// Splits the engine's warm-up time from the outside: the per-event parsing of its phase
    /// zero (re-done here through the public API on one thread), 1 against 2 threads, one batch
    /// against many, the fixed cost of a batch, user against kernel time.
    Breakdown(BreakdownArgs),
}

#[derive(clap::Args, Debug)]
struct BreakdownArgs {
    /// N, the number of listed objects (WORKLOAD.md).
    #[arg(long, default_value_t = 1_000_000, value_parser = at_least_one())]
    objects: usize,
    /// Delivery order: owners-first, dependents-first or random.
    #[arg(long, default_value = "owners-first")]
    order: Order,
    /// Graph shards (a power of two).
    #[arg(long, default_value_t = 64, value_parser = power_of_two)]
    shards: usize,
    /// Events per ingested batch.
    #[arg(long, default_value_t = 4096, value_parser = at_least_one())]
    batch: usize,
    /// Timed runs of each measurement (the median is reported).
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..))]
    runs: u32,
}

#[derive(clap::Args, Debug)]
struct WarmupArgs {
    /// N, the number of listed objects (WORKLOAD.md).
    #[arg(long, default_value_t = 1_000_000, value_parser = at_least_one())]
    objects: usize,
    /// Delivery order: owners-first, dependents-first or random.
    #[arg(long, default_value = "owners-first")]
    order: Order,
    /// Graph shards (a power of two).
    #[arg(long, default_value_t = 64, value_parser = power_of_two)]
    shards: usize,
    /// Events per ingested batch.
    #[arg(long, default_value_t = 4096, value_parser = at_least_one())]
    batch: usize,
    /// Ingestion threads (default: available cores).
    #[arg(long, value_parser = at_least_one())]
    threads: Option<usize>,
    /// Timed runs of each implementation (at least 3; the median is reported).
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(3..))]
    runs: u32,
    /// Workload seed.
    #[arg(long, default_value_t = DEFAULT_SEED)]
    seed: u64,
    /// Workload namespaces.
    #[arg(long, default_value_t = DEFAULT_NAMESPACES, value_parser = at_least_one())]
    namespaces: usize,
    /// Skip the baseline (no ratio).
    #[arg(long)]
    no_baseline: bool,
    /// Print one JSON object as the last line.
    #[arg(long)]
    json: bool,
}

fn main() -> ExitCode {
    match Cli::parse().command {
        Command::Warmup(args) => match warmup(&args) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("kube-gc-bench: {e}");
                ExitCode::FAILURE
            }
        },
        Command::Breakdown(args) => {
            breakdown(&args);
            ExitCode::SUCCESS
        }
    }
}

/// A count that must be at least one (objects, a batch, threads, namespaces).
fn at_least_one() -> clap::builder::RangedU64ValueParser<usize> {
    clap::builder::RangedU64ValueParser::<usize>::new().range(1..)
}

/// A shard count: a power of two, as the graph requires.
fn power_of_two(text: &str) -> Result<usize, String> {
    let n: usize = text.parse().map_err(|e| format!("{e}"))?;
    if n.is_power_of_two() { Ok(n) } else { Err(format!("{n} is not a power of two")) }
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 { v[n / 2] } else { (v[n / 2 - 1] + v[n / 2]) / 2.0 }
}

fn mib(bytes: u64) -> f64 {
    bytes as f64 / (1024.0 * 1024.0)
}

/// The figures of one implementation over all runs.
#[derive(Default)]
struct Figures {
    rates: Vec<f64>,
    secs: Vec<f64>,
    bytes: isize,
    calls: usize,
    attempt_to_delete: usize,
    nodes: usize,
    peak_rss: u64,
    user: Vec<f64>,
    sys: Vec<f64>,
    faults: Vec<f64>,
}

impl Figures {
    fn record<G>(&mut self, run: &kube_gc_bench::harness::Run<G>, peak_rss: u64) {
        self.rates.push(run.events_per_sec());
        self.secs.push(run.elapsed.as_secs_f64());
        self.bytes = run.alloc.live_bytes;
        self.calls = run.alloc.calls;
        self.attempt_to_delete = run.attempt_to_delete;
        self.nodes = run.nodes;
        self.peak_rss = self.peak_rss.max(peak_rss);
        self.user.push(run.cpu.user);
        self.sys.push(run.cpu.sys);
        self.faults.push(run.cpu.minor_faults as f64);
    }
}

fn run_line<G>(run: &kube_gc_bench::harness::Run<G>) -> String {
    format!(
        "{:>10.0} events/s ({:.3} s; cpu user {:.2} s, sys {:.2} s; {} minor faults)",
        run.events_per_sec(),
        run.elapsed.as_secs_f64(),
        run.cpu.user,
        run.cpu.sys,
        run.cpu.minor_faults
    )
}

fn warmup(args: &WarmupArgs) -> Result<(), String> {
    let threads = args.threads.unwrap_or_else(|| {
        std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get)
    });
    let engine = EngineConfig { shards: args.shards, batch: args.batch, threads };
    let config = WorkloadConfig {
        objects: args.objects,
        seed: args.seed,
        namespaces: args.namespaces,
        order: args.order,
    };
    let n = config.objects;
    println!(
        "kube-gc-bench warmup: N={n} order={} shards={} batch={} threads={} runs={} allocator={}",
        config.order,
        engine.shards,
        engine.batch,
        engine.threads,
        args.runs,
        allocator_name()
    );

    let start = Instant::now();
    let before = AllocSnapshot::now();
    let workload = Workload::generate(&config);
    let input = before.since();
    let counts = workload.counts();
    let expected = workload.expected_attempt_to_delete();
    println!(
        "workload: F={} S={} V={} -> {} graph nodes; generated in {:.2} s; input {:.0} B/object (not counted)",
        counts.families,
        counts.configmaps,
        counts.virtual_owner_pods,
        counts.graph_nodes(),
        start.elapsed().as_secs_f64(),
        input.live_bytes as f64 / n as f64
    );
    let events = workload.events();

    let steps = u64::from(args.runs) * if args.no_baseline { 1 } else { 2 };
    let bar = ProgressBar::new(steps).with_style(
        ProgressStyle::with_template("{spinner} [{elapsed_precise}] {bar:30} {pos}/{len} {msg}")
            .expect("valid template"),
    );
    bar.enable_steady_tick(Duration::from_millis(200));

    let (mut eng, mut base) = (Figures::default(), Figures::default());
    let mut failures = Vec::new();
    // Each run resets `VmHWM` (where allowed): the process's peak is the largest of them all.
    let mut peak = Rss::now().peak;
    for r in 0..args.runs {
        // Alternate which goes first, so neither always runs on a warmer heap.
        let order: &[bool] = if args.no_baseline {
            &[true]
        } else if r % 2 == 0 {
            &[true, false]
        } else {
            &[false, true]
        };
        for &is_engine in order {
            bar.set_message(format!(
                "run {}/{}: {}",
                r + 1,
                args.runs,
                if is_engine { "engine" } else { "baseline" }
            ));
            Rss::reset_peak();
            let (line, nodes, atd) = if is_engine {
                let run = run_engine(events, engine);
                eng.record(&run, Rss::now().peak);
                let line = format!("engine   {}", run_line(&run));
                let res = (line, run.nodes, run.attempt_to_delete);
                drop(run);
                res
            } else {
                let run = run_baseline(events);
                base.record(&run, Rss::now().peak);
                let line = format!("baseline {}", run_line(&run));
                let res = (line, run.nodes, run.attempt_to_delete);
                drop(run);
                res
            };
            peak = peak.max(eng.peak_rss).max(base.peak_rss);
            bar.suspend(|| eprintln!("run {}/{}: {line}", r + 1, args.runs));
            let who = if is_engine { "engine" } else { "baseline" };
            if nodes != counts.graph_nodes() {
                failures.push(format!("{who}: {nodes} graph nodes, want {}", counts.graph_nodes()));
            }
            if atd != expected {
                failures.push(format!("{who}: attemptToDelete length {atd}, want {expected}"));
            }
            bar.inc(1);
        }
    }
    bar.finish_and_clear();

    let rate = median(eng.rates.clone());
    let base_rate = (!args.no_baseline).then(|| median(base.rates.clone()));
    let ratio = base_rate.map(|b| rate / b);
    let bpo = eng.bytes as f64 / n as f64;
    let base_bpo = (!args.no_baseline).then(|| base.bytes as f64 / n as f64);
    let peak = peak.max(Rss::now().peak);
    let eng_user = median(eng.user.clone());
    let base_user = (!args.no_baseline).then(|| median(base.user.clone()));
    // User CPU (all threads) per event, in microseconds: the cost that caps the rate once every
    // core is busy.
    let cpu_per_event = |user_secs: f64| user_secs * 1e6 / n as f64;

    println!(
        "engine:   {rate:>12.0} events/s (median of {}), {bpo:.1} B/object, {:.2} allocations/event, peak RSS during its runs {:.0} MiB, cpu user {:.2} s sys {:.2} s ({:.2} µs user an event)",
        args.runs,
        eng.calls as f64 / n as f64,
        mib(eng.peak_rss),
        eng_user,
        median(eng.sys.clone()),
        cpu_per_event(eng_user)
    );
    if let (Some(b), Some(bb), Some(base_user)) = (base_rate, base_bpo, base_user) {
        println!(
            "baseline: {b:>12.0} events/s (median of {}), {bb:.1} B/object, {:.2} allocations/event, peak RSS during its runs {:.0} MiB, cpu user {:.2} s sys {:.2} s ({:.2} µs user an event)",
            args.runs,
            base.calls as f64 / n as f64,
            mib(base.peak_rss),
            base_user,
            median(base.sys.clone()),
            cpu_per_event(base_user)
        );
    }
    if let Some(ratio) = ratio {
        println!("ratio engine/baseline: {ratio:.2}x");
    }
    println!(
        "attemptToDelete after warm-up: engine {}{} (expected {expected})",
        eng.attempt_to_delete,
        if args.no_baseline {
            String::new()
        } else {
            format!(", baseline {}", base.attempt_to_delete)
        }
    );
    println!("peak RSS (process, includes the input events): {:.0} MiB", mib(peak));
    println!(
        "command: kube-gc-bench warmup --objects {n} --order {} --shards {} --batch {} --threads {} --runs {}{}",
        config.order,
        engine.shards,
        engine.batch,
        engine.threads,
        args.runs,
        if args.json { " --json" } else { "" }
    );
    for f in &failures {
        eprintln!("CHECK FAILED: {f}");
    }
    if args.json {
        let json = serde_json::json!({
            "objects": n,
            "order": config.order.as_str(),
            "threads": engine.threads,
            "shards": engine.shards,
            "batch": engine.batch,
            "events_per_sec": rate,
            "baseline_events_per_sec": base_rate,
            "ratio": ratio,
            "bytes_per_object": bpo,
            "baseline_bytes_per_object": base_bpo,
            "peak_rss_bytes": peak,
            "engine_peak_rss_bytes": eng.peak_rss,
            "baseline_peak_rss_bytes": (!args.no_baseline).then_some(base.peak_rss),
            "engine_allocations_per_event": eng.calls as f64 / n as f64,
            "baseline_allocations_per_event": (!args.no_baseline).then(|| base.calls as f64 / n as f64),
            "engine_cpu_user_secs": eng_user,
            "engine_cpu_sys_secs": median(eng.sys.clone()),
            "baseline_cpu_user_secs": base_user,
            "baseline_cpu_sys_secs": (!args.no_baseline).then(|| median(base.sys.clone())),
            "engine_cpu_user_us_per_event": cpu_per_event(eng_user),
            "baseline_cpu_user_us_per_event": base_user.map(cpu_per_event),
            "engine_run_secs": eng.secs,
            "baseline_run_secs": base.secs,
            "attempt_to_delete": eng.attempt_to_delete,
            "expected_attempt_to_delete": expected,
            "runs": args.runs,
            "allocator": allocator_name(),
            "checks_passed": failures.is_empty(),
        });
        println!("{json}");
    }
    if failures.is_empty() { Ok(()) } else { Err(format!("{} check(s) failed", failures.len())) }
}

/// Median wall seconds, user and sys of `runs` engine runs.
fn engine_medians(
    events: &[kube_gc_engine::Event],
    config: EngineConfig,
    runs: u32,
) -> (f64, f64, f64) {
    let (mut wall, mut user, mut sys) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..runs {
        let run = run_engine(events, config);
        wall.push(run.elapsed.as_secs_f64());
        user.push(run.cpu.user);
        sys.push(run.cpu.sys);
    }
    (median(wall), median(user), median(sys))
}

fn breakdown(args: &BreakdownArgs) {
    use kube_gc_engine::{Namespace, ObjectType, Uid};
    let config = WorkloadConfig::new(args.objects, args.order);
    let workload = Workload::generate(&config);
    let events = workload.events();
    let n = events.len() as f64;
    println!(
        "breakdown: N={} order={} shards={} batch={}",
        args.objects, args.order, args.shards, args.batch
    );

    // What the engine's phase 0 does per event (spread over its threads), through the public
    // API on one thread: parse the object's UID and each owner's, intern the namespace and each
    // owner's type.
    let mut prepare = Vec::new();
    for _ in 0..args.runs {
        let start = Instant::now();
        let mut sink = 0u64;
        for e in events {
            let o = &e.object;
            sink ^= Uid::parse(&o.uid).as_u128() as u64;
            sink ^= u64::from(Namespace::new(&o.namespace).is_cluster());
            for r in &o.owner_references {
                sink ^= Uid::parse(&r.uid).as_u128() as u64;
                sink ^=
                    u64::from(ObjectType::new(&r.api_version, &r.kind) == ObjectType::default());
            }
        }
        std::hint::black_box(sink);
        prepare.push(start.elapsed().as_secs_f64());
    }
    let uid_parse = {
        let start = Instant::now();
        for e in events {
            std::hint::black_box(Uid::parse(&e.object.uid));
        }
        start.elapsed().as_secs_f64()
    };
    let prepare = median(prepare);
    println!(
        "phase zero's parse+intern (public API, 1 thread): {:.3} s = {:.0} ns/event (of which UID parse {:.0} ns per UID)",
        prepare,
        prepare * 1e9 / n,
        uid_parse * 1e9 / n
    );

    let cfg = |threads, batch| EngineConfig { shards: args.shards, batch, threads };
    let rows = [
        ("threads=1", cfg(1, args.batch)),
        ("threads=2", cfg(2, args.batch)),
        ("threads=1, one batch", cfg(1, events.len())),
        ("threads=2, one batch", cfg(2, events.len())),
    ];
    let mut walls = Vec::new();
    for (name, c) in rows {
        let (wall, user, sys) = engine_medians(events, c, args.runs);
        walls.push(wall);
        println!(
            "engine {name:<22} {:>10.0} events/s  wall {wall:.3} s  user {user:.2} s  sys {sys:.2} s  ({:.0} ns/event wall)",
            n / wall,
            wall * 1e9 / n
        );
    }
    // The fixed cost of a batch: one-event calls (applied on the calling thread whatever the
    // thread count) and calls of the smallest batch the ingester spreads over its threads,
    // whose difference between 1 and 2 threads is the pool's hand-off less half the work.
    let small = kube_gc_engine::Ingester::SMALL_BATCH;
    for (threads, batch) in [(1, 1), (2, 1), (1, small), (2, small)] {
        let few = &events[..events.len().min(if batch == 1 { 20_000 } else { 200_000 })];
        let (wall, _, _) = engine_medians(few, cfg(threads, batch), args.runs);
        let calls = few.len().div_ceil(batch);
        println!(
            "engine batch={batch} threads={threads}: {:.1} us per ingest call ({calls} calls)",
            wall * 1e6 / calls as f64,
        );
    }
    println!(
        "scaling from 1 to 2 threads: {:.2}x (batch {}), {:.2}x (one batch)",
        walls[0] / walls[1],
        args.batch,
        walls[2] / walls[3]
    );
}
