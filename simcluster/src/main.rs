//! `kube-gc-simcluster`: serves a simcluster until interrupted.
//!
//! ```text
//! kube-gc-simcluster --kubeconfig-out /tmp/sim.kubeconfig --preload 1000000
//! KUBECONFIG=/tmp/sim.kubeconfig kube-gc
//! ```
//!
//! `kube-gc-lab demo [--objects N] …` runs kube-gc against a preloaded simcluster in one
//! process instead (the `kube-gc-lab` crate).
#![forbid(unsafe_code)]

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use clap::Parser;
use kube_gc_simcluster::faults::parse_rate;
use kube_gc_simcluster::preload::{Metadata, Preload, Shape, preload};
use kube_gc_simcluster::{Config, Faults, ResourceDef, SimCluster, Store, StoreConfig, resources};

// As kube-gc's binary, so that memory figures of runs against it compare.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// An in-process Kubernetes API server emulator for kube-gc's tests and demo (plain HTTP on
/// loopback; no TLS, no real authentication, no garbage collection of its own).
#[derive(Parser, Debug)]
#[command(name = "kube-gc-simcluster", version, about)]
struct Args {
    /// Address to listen on (port 0: any free port).
    #[arg(long, default_value = "127.0.0.1:6443")]
    listen: SocketAddr,
    /// Allow a non-loopback --listen address (anyone who reaches it reads and writes everything).
    #[arg(long)]
    listen_any: bool,
    /// Write a kubeconfig for clients here.
    #[arg(long)]
    kubeconfig_out: Option<PathBuf>,
    /// Require this static bearer token (test-only: it travels in clear over HTTP).
    #[arg(long)]
    token: Option<String>,
    /// Extra resources, `apiVersion,plural,Kind,Namespaced|Cluster[,orphan][,custom]`
    /// (repeatable), e.g. `example.com/v1,widgets,Widget,Namespaced,custom`.
    #[arg(long = "resource")]
    resources: Vec<String>,
    /// Serve only the --resource ones, not the builtin set.
    #[arg(long)]
    no_builtin: bool,
    /// Preload this many objects (WORKLOAD.md's N) before serving.
    #[arg(long, default_value_t = 0)]
    preload: usize,
    /// Shape of the preloaded objects.
    #[arg(long, default_value = "deploy-rs-pods")]
    shape: String,
    /// What the preloaded objects' metadata carries besides the collector's fields: `minimal`
    /// (WORKLOAD.md's), or `kube-apiserver` (also a label and a managedFields entry, as a real
    /// server adds; about 900 bytes more per object).
    #[arg(long, default_value = "minimal")]
    preload_metadata: String,
    /// WORKLOAD.md's seed for --preload.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// WORKLOAD.md's namespace count for --preload.
    #[arg(long, default_value_t = 1000)]
    namespaces: usize,
    /// Changes kept for watches; older resourceVersions get 410 Expired.
    #[arg(long, default_value_t = 10_000)]
    watch_history: usize,
    /// Preload, report the time taken and exit without serving (to measure --preload).
    #[arg(long)]
    exit_after_preload: bool,
    /// Seconds between watch bookmarks.
    #[arg(long, default_value_t = 1)]
    bookmark_interval: u64,
    /// Seed of the fault decisions (every --fault-* rate defaults to 0: no faults).
    #[arg(long, default_value_t = 0)]
    fault_seed: u64,
    /// Probability that a request fails with 429 (Retry-After: 1), 500 or 503, evenly.
    #[arg(long, default_value_t = 0.0, value_parser = parse_rate)]
    fault_error_rate: f64,
    /// Latency added to every request on a resource, in milliseconds.
    #[arg(long, default_value_t = 0)]
    fault_latency_ms: u64,
    /// Random latency, 0 to this many milliseconds, on top of --fault-latency-ms.
    #[arg(long, default_value_t = 0)]
    fault_latency_jitter_ms: u64,
    /// Probability that a watch is cut mid-stream.
    #[arg(long, default_value_t = 0.0, value_parser = parse_rate)]
    fault_watch_drop_rate: f64,
    /// Probability of 410 Expired for a watch from a resourceVersion or a continued list page.
    #[arg(long, default_value_t = 0.0, value_parser = parse_rate)]
    fault_expire_rate: f64,
    /// Probability of 409 Conflict for an update, patch or delete.
    #[arg(long, default_value_t = 0.0, value_parser = parse_rate)]
    fault_conflict_rate: f64,
    /// Probability that an update, patch or delete is applied and then answered 504.
    #[arg(long, default_value_t = 0.0, value_parser = parse_rate)]
    fault_answer_lost_rate: f64,
    /// Probability that a watch event is held back.
    #[arg(long, default_value_t = 0.0, value_parser = parse_rate)]
    fault_watch_delay_rate: f64,
    /// The longest a held-back watch event waits, in milliseconds.
    #[arg(long, default_value_t = 0)]
    fault_watch_delay_ms: u64,
}

fn main() -> ExitCode {
    let args = Args::parse();
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()),
        )
        .init();
    // The error and its causes on one line (not `main`'s `Error: ...` with a backtrace under
    // RUST_BACKTRACE): what an operator starting the emulator needs to fix.
    match run(args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("kube-gc-simcluster: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn run(args: Args) -> anyhow::Result<()> {
    let mut defs = if args.no_builtin { Vec::new() } else { resources::builtin() };
    for spec in &args.resources {
        defs.push(ResourceDef::parse(spec)?);
    }
    let config = Config {
        listen: args.listen,
        listen_any: args.listen_any,
        token: args.token.clone(),
        resources: defs,
        store: StoreConfig { history: args.watch_history, ..StoreConfig::default() },
        bookmark_interval: Duration::from_secs(args.bookmark_interval.max(1)),
        faults: Faults {
            seed: args.fault_seed,
            error_rate: args.fault_error_rate,
            latency: Duration::from_millis(args.fault_latency_ms),
            latency_jitter: Duration::from_millis(args.fault_latency_jitter_ms),
            watch_drop_rate: args.fault_watch_drop_rate,
            expire_rate: args.fault_expire_rate,
            conflict_rate: args.fault_conflict_rate,
            answer_lost_rate: args.fault_answer_lost_rate,
            watch_delay_rate: args.fault_watch_delay_rate,
            watch_delay: Duration::from_millis(args.fault_watch_delay_ms),
        },
        ..Config::default()
    };
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    runtime.block_on(async move {
        let store = Arc::new(Store::new(config.store.clone(), config.resources.clone()));
        if let Ok(ns) = store.resolve("", "v1", "namespaces") {
            for name in &config.namespaces {
                store.create(&ns, None, serde_json::json!({"metadata": {"name": name}}))?;
            }
        }
        if args.preload > 0 {
            let started = Instant::now();
            let p = Preload {
                shape: args.shape.parse::<Shape>()?,
                metadata: args.preload_metadata.parse::<Metadata>()?,
                seed: args.seed,
                namespaces: args.namespaces,
                ..Preload::new(args.preload)
            };
            let out = preload(&store, &p)?;
            tracing::info!(
                objects = args.preload,
                seconds = started.elapsed().as_secs_f64(),
                json_bytes = out.json_bytes,
                ?out,
                "preloaded"
            );
            if args.exit_after_preload {
                println!(
                    "preloaded {} objects in {:.3} s ({} bytes of JSON)",
                    store.len(),
                    started.elapsed().as_secs_f64(),
                    out.json_bytes
                );
                return Ok(());
            }
        }
        let sim = SimCluster::serve(config, store).await?;
        if let Some(path) = &args.kubeconfig_out {
            std::fs::write(path, sim.kubeconfig())
                .with_context(|| format!("cannot write the kubeconfig to {}", path.display()))?;
            tracing::info!(path = %path.display(), "wrote kubeconfig");
        }
        tracing::info!(url = %sim.url(), "serving");
        tokio::signal::ctrl_c().await?;
        sim.shutdown().await;
        Ok(())
    })
}
