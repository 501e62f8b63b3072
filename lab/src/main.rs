//! `kube-gc-lab`: runs kube-gc against a simcluster in this process.
//!
//! ```text
//! kube-gc-lab demo            # the README's first command: a million objects, warm-up, collection
//! kube-gc-lab chaos --seeds 50 --scenarios 20
//! kube-gc-lab tune --dependents 10000
//! ```
#![forbid(unsafe_code)]

use std::time::Duration;

use anyhow::Context;
use clap::{Parser, Subcommand};
use kube_gc_lab::chaos::{self, ChaosArgs};
use kube_gc_lab::demo::{self, DemoArgs};
use kube_gc_lab::tune::{self, TuneArgs};

// As kube-gc's binary: the demo's memory figures are those of the allocator kube-gc ships with.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Runs kube-gc against an in-process simcluster: the demo, chaos scenarios, the tuning sweep.
#[derive(Parser, Debug)]
#[command(name = "kube-gc-lab", version, about)]
struct Args {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Preload a simcluster (default 1,000,000 objects), run kube-gc against it over HTTP in this
    /// process, show its warm-up, collect the garbage, delete sample Deployments with each
    /// propagation policy, and print a summary table (exit status 1 if any check failed).
    Demo(DemoArgs),
    /// Random garbage-collection scenarios from seeds, run by kube-gc in this process under
    /// seeded faults and collector restarts; once faults stop every scenario must reach its
    /// expected state and the audit must show no wrongful deletion. The last line printed is
    /// the totals (exit status 1 if any check failed).
    Chaos(ChaosArgs),
    /// Time kube-gc's collection of the dependents of deleted owners for each
    /// --concurrent-gc-syncs, simulated API latency and client rate limit (a fresh simcluster
    /// and kube-gc per run); a line per run on stderr, then a markdown table on stdout.
    Tune(TuneArgs),
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let default_filter = match args.command {
        // Faults make the clients log every failed request: only simcluster's errors (the
        // audit's wrongful deletions) show.
        Command::Chaos(_) => "off,kube_gc_simcluster=error",
        // The tune runs end kube-gc's watches at every run's end: only errors show.
        Command::Tune(_) => "error",
        // The demo draws progress bars: only warnings (RUST_LOG overrides) may interleave.
        Command::Demo(_) => "warn",
    };
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| default_filter.into()),
        )
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .log_internal_errors(false)
        .init();
    match &args.command {
        Command::Demo(demo_args) => {
            let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
            let report = match runtime.block_on(demo::run(demo_args, demo::Progress::Stderr)) {
                Ok(report) => report,
                Err(e) => {
                    eprintln!("kube-gc-lab demo: {}", kube_gc::error::one_line(e.as_ref()));
                    std::process::exit(2);
                }
            };
            print!("{}", report.table());
            runtime.shutdown_timeout(Duration::from_secs(1));
            if !report.ok() {
                std::process::exit(1);
            }
        }
        Command::Chaos(chaos_args) => {
            let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
            let config = chaos_args.config();
            let report = match runtime.block_on(chaos::run(&config, |seed| println!("{seed}"))) {
                Ok(report) => report,
                Err(e) => {
                    eprintln!("kube-gc-lab chaos: {}", kube_gc::error::one_line(e.as_ref()));
                    std::process::exit(2);
                }
            };
            println!("{}", report.totals());
            runtime.shutdown_timeout(Duration::from_secs(1));
            if !report.ok() {
                std::process::exit(1);
            }
        }
        Command::Tune(tune_args) => {
            let samples = if tune_args.from_json.is_empty() {
                let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
                let samples =
                    runtime.block_on(tune::run(tune_args, |s| eprintln!("{}", tune::line(s))));
                runtime.shutdown_timeout(Duration::from_secs(1));
                samples
            } else {
                tune::read_json(&tune_args.from_json)
            };
            let samples = match samples {
                Ok(samples) => samples,
                Err(e) => {
                    eprintln!("kube-gc-lab tune: {}", kube_gc::error::one_line(e.as_ref()));
                    std::process::exit(2);
                }
            };
            // A sweep takes minutes: a path it cannot write is named, and the table still
            // printed below.
            let mut failed = false;
            let mut write = |path: &std::path::Path, text: anyhow::Result<String>| {
                let written = text.and_then(|text| {
                    std::fs::write(path, text)
                        .with_context(|| format!("cannot write {}", path.display()))
                });
                if let Err(e) = written {
                    eprintln!("kube-gc-lab tune: {}", kube_gc::error::one_line(e.as_ref()));
                    failed = true;
                }
            };
            if let Some(path) = &tune_args.out_json {
                write(path, serde_json::to_string_pretty(&samples).map_err(Into::into));
            }
            if let Some(path) = &tune_args.out_svg {
                write(path, tune::plot_svg(&samples));
            }
            print!("{}", tune::markdown(&samples));
            if failed {
                std::process::exit(1);
            }
        }
    }
    Ok(())
}
