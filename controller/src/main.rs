//! `kube-gc`: run the Kubernetes garbage collector against a cluster.

use clap::Parser;
use kube_gc::leader::{Leadership, LeaseConfig};
use kube_gc::{Controller, Flags};

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// The process's stop signal: SIGTERM or SIGINT (ctrl-c).
#[derive(Clone)]
struct Shutdown(tokio::sync::watch::Receiver<bool>);

impl Shutdown {
    /// Installs the handlers now, before anything else runs. As a container's PID 1, kube-gc
    /// never sees a signal that arrives before its handler exists (the kernel drops the
    /// signals PID 1 does not handle), and the kubelet would wait out the grace period and
    /// kill it: a standby waiting for the lease, or a leader in its first warm-up.
    fn install() -> std::io::Result<Shutdown> {
        let (tx, rx) = tokio::sync::watch::channel(false);
        #[cfg(unix)]
        {
            use tokio::signal::unix::{SignalKind, signal};
            let mut term = signal(SignalKind::terminate())?;
            let mut interrupt = signal(SignalKind::interrupt())?;
            tokio::spawn(async move {
                tokio::select! {
                    _ = term.recv() => tracing::info!("SIGTERM: stopping"),
                    _ = interrupt.recv() => tracing::info!("SIGINT: stopping"),
                }
                let _ = tx.send(true);
            });
        }
        #[cfg(not(unix))]
        tokio::spawn(async move {
            let _ = tokio::signal::ctrl_c().await;
            let _ = tx.send(true);
        });
        Ok(Shutdown(rx))
    }

    /// Resolves once the process was asked to stop.
    async fn wait(self) {
        let mut rx = self.0;
        let _ = rx.wait_for(|stop| *stop).await;
    }
}

/// Turns transparent huge pages off for this process, unless `MIMALLOC_ALLOW_THP` says
/// otherwise (mimalloc then applied that choice itself, before `main`).
///
/// mimalloc asks the kernel for huge pages on its arenas, and the graph's many small
/// allocations then touch a few bytes of many 2 MiB pages, each faulted in and zeroed whole.
/// Measured at 1M objects over HTTP (README, "End-to-end warm-up"): without them the warm-up
/// takes 0.8x the time and 0.85x the peak memory. Called first, so that only the few pages
/// allocated before `main` can be huge.
fn disable_transparent_huge_pages() {
    #[cfg(target_os = "linux")]
    if std::env::var_os("MIMALLOC_ALLOW_THP").is_none() {
        // Refused only under a seccomp policy that forbids prctl: huge pages then stay on.
        if let Err(e) = rustix::thread::disable_transparent_huge_pages(true) {
            eprintln!("kube-gc: transparent huge pages stay on (prctl: {e})");
        }
    }
}

fn main() -> std::process::ExitCode {
    disable_transparent_huge_pages();
    let flags = Flags::parse();
    kube_gc::logging::init(&flags);
    if let Err(e) = flags.validate() {
        eprintln!("kube-gc: {e}");
        return std::process::ExitCode::from(2);
    }
    let runtime =
        tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("tokio runtime");
    let result = runtime.block_on(run(flags));
    // Not waiting for blocking tasks (a batch being ingested, a large graph's DOT dump): the
    // process is done, and the kubelet's grace period is short.
    runtime.shutdown_timeout(std::time::Duration::from_secs(1));
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            let error = kube_gc::error::one_line(e.as_ref());
            tracing::error!(%error, "kube-gc failed");
            eprintln!("kube-gc: {error}");
            std::process::ExitCode::FAILURE
        }
    }
}

async fn run(flags: Flags) -> anyhow::Result<()> {
    let shutdown = Shutdown::install()?;
    let client = kube_gc::client(&flags).await?;
    if !flags.enable_garbage_collector {
        tracing::warn!("garbage collector disabled by --enable-garbage-collector=false");
        // As kube-controller-manager with the controller off: the probes, /metrics and the
        // (empty) debug graph are served, ready at once; nothing is watched nor collected,
        // and no Lease is taken.
        let controller = Controller::start(flags, client).await?;
        controller.ready.store(true, std::sync::atomic::Ordering::Release);
        shutdown.wait().await;
        return Ok(());
    }
    let lease = flags.leader_elect.then(|| {
        let host = std::env::var("HOSTNAME").unwrap_or_else(|_| "kube-gc".into());
        LeaseConfig {
            namespace: flags.leader_elect_resource_namespace.clone(),
            name: flags.leader_elect_resource_name.clone(),
            identity: format!("{host}_{:016x}", rand_suffix()),
            lease_duration: flags.leader_elect_lease_duration,
            renew_deadline: flags.leader_elect_renew_deadline,
            retry_period: flags.leader_elect_retry_period,
        }
    });
    if lease.is_some() {
        // No write before this process leads.
        kube_gc::leader::elect();
    }
    // Serves /healthz (and /readyz: 503 until synced) from the start, so that a standby waiting
    // for the lease passes its liveness probe, as kube-controller-manager's does; nothing is
    // watched nor collected before `run`.
    let controller = Controller::start(flags, client.clone()).await?;
    if let Some(lease) = lease {
        let metrics = controller.metrics.clone();
        metrics.set_leader(&lease.name, false);
        let name = lease.name.clone();
        let leadership = tokio::select! {
            leadership = Leadership::acquire(client, lease) => leadership,
            // A standby asked to stop stops: it has written nothing.
            _ = shutdown.clone().wait() => return Ok(()),
        };
        metrics.set_leader(&name, true);
        tokio::spawn(async move {
            leadership.hold().await;
            // As kube-controller-manager: losing the lease ends the process, so that two
            // collectors never act at once; at once, whatever the controller is doing (it may
            // be in an initial sync that does not look at its stop signal), writes first.
            kube_gc::leader::exit_lost("leaderelection lost");
        });
    }
    controller.run(shutdown.wait()).await;
    Ok(())
}

/// A per-process random suffix for the lease identity (no RNG dependency needed).
fn rand_suffix() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u32(std::process::id());
    h.finish()
}
