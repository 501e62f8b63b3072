//! Leader election on a coordination.k8s.io Lease, as client-go's `leaderelection` with a
//! `LeaseLock`: acquire when the lease is free or expired, renew every retry period, and give
//! up (the process exits, as kube-controller-manager does) when renewal has failed for the
//! renew deadline.
//!
//! # One writer
//!
//! Two rules, both client-go's, make sure two replicas never act at once (DESIGN.md):
//!
//! - **Expiry by local observation, never by comparing clocks.** A candidate remembers the last
//!   lease record it saw (holder, renew and acquire times, transitions, duration) and the local
//!   monotonic time at which it saw that record change. The lease is expired only once
//!   `leaseDurationSeconds` have passed on the candidate's own clock since then. The holder's
//!   `renewTime` is only compared for equality, so a candidate whose wall clock is an hour
//!   ahead of the holder's does not take over a lease that is being renewed.
//! - **The holder stops before anyone may take over.** A watchdog on its own OS thread
//!   (independent of the tokio runtime and of whatever the controller loop is doing: an
//!   initial sync, a resync's wait) exits the process once `renew_deadline` has passed since
//!   the *start* of the last successful renewal request. The server stored that renewal at some
//!   point during the request, and a standby counts `lease_duration` from when it saw the record
//!   change, later still; with `renew_deadline < lease_duration` (validated), the holder is gone
//!   before any standby can consider the lease expired, modulo the process's own exit, which
//!   takes milliseconds. Each renewal attempt is bounded by the time left before the deadline.
//!
//! Why not a crate: kube-rs has no leader election; `kube-leader-election` is documented as a
//! basic lock without fencing, for applications that tolerate two leaders for a while; the
//! ports of client-go's elector we found keep the observation time on the wall clock
//! (`SystemTime`), which a clock step moves. What is needed here, client-go's rule on the
//! monotonic clock plus a watchdog that ends the process, is this module's few hundred lines.

use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::Timestamp;
use kube::Client;
use kube::api::{Api, PostParams};

/// Lease timing, from the `--leader-elect-*` flags.
#[derive(Clone, Debug)]
pub struct LeaseConfig {
    /// Lease namespace.
    pub namespace: String,
    /// Lease name.
    pub name: String,
    /// This candidate's identity (hostname + random suffix, as client-go).
    pub identity: String,
    /// `--leader-elect-lease-duration`.
    pub lease_duration: Duration,
    /// `--leader-elect-renew-deadline`.
    pub renew_deadline: Duration,
    /// `--leader-elect-retry-period`.
    pub retry_period: Duration,
}

/// A held lease.
#[derive(Debug)]
pub struct Leadership {
    api: Api<Lease>,
    config: LeaseConfig,
    observed: Observed,
}

fn now() -> MicroTime {
    MicroTime(Timestamp::now())
}

/// The lease record as last seen, and when (on this process's monotonic clock) it was seen to
/// change: client-go's `observedRecord` and `observedTime`.
#[derive(Clone, Debug, Default)]
pub struct Observed {
    record: Option<Record>,
    at: Option<tokio::time::Instant>,
}

/// The fields of a lease record whose change proves its holder alive.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Record {
    holder: String,
    renew_time: Option<String>,
    acquire_time: Option<String>,
    transitions: Option<i32>,
    duration_seconds: Option<i32>,
}

impl Record {
    fn of(lease: &Lease) -> Record {
        let spec = lease.spec.clone().unwrap_or_default();
        let time = |t: Option<MicroTime>| t.map(|t| t.0.to_string());
        Record {
            holder: spec.holder_identity.unwrap_or_default(),
            renew_time: time(spec.renew_time),
            acquire_time: time(spec.acquire_time),
            transitions: spec.lease_transitions,
            duration_seconds: spec.lease_duration_seconds,
        }
    }
}

impl Observed {
    /// Whether `lease` may be taken by `identity` at `now`: unheld, already ours, or unchanged
    /// for its whole duration as observed locally. Records what it saw.
    fn is_free(&mut self, lease: &Lease, identity: &str, now: tokio::time::Instant) -> bool {
        let record = Record::of(lease);
        if self.record.as_ref() != Some(&record) {
            // A change (or the first sight): the holder is alive as of now.
            self.record = Some(record.clone());
            self.at = Some(now);
        }
        if record.holder.is_empty() || record.holder == identity {
            return true;
        }
        let duration = Duration::from_secs(record.duration_seconds.unwrap_or(0).max(0) as u64);
        self.at.is_some_and(|at| now >= at + duration)
    }
}

impl Leadership {
    /// Tries once to take or renew the lease; `Ok(true)` when this candidate holds it after.
    async fn try_acquire_or_renew(
        api: &Api<Lease>,
        config: &LeaseConfig,
        observed: &mut Observed,
    ) -> Result<bool, kube::Error> {
        let seconds = i32::try_from(config.lease_duration.as_secs()).unwrap_or(i32::MAX);
        match api.get_opt(&config.name).await? {
            None => {
                let lease = Lease {
                    metadata: ObjectMeta { name: Some(config.name.clone()), ..Default::default() },
                    spec: Some(LeaseSpec {
                        holder_identity: Some(config.identity.clone()),
                        lease_duration_seconds: Some(seconds),
                        acquire_time: Some(now()),
                        renew_time: Some(now()),
                        lease_transitions: Some(0),
                        ..Default::default()
                    }),
                };
                match api.create(&PostParams::default(), &lease).await {
                    Ok(_) => Ok(true),
                    Err(kube::Error::Api(s)) if s.code == 409 => Ok(false),
                    Err(e) => Err(e),
                }
            }
            Some(mut lease) => {
                if !observed.is_free(&lease, &config.identity, tokio::time::Instant::now()) {
                    return Ok(false);
                }
                let spec = lease.spec.get_or_insert_with(Default::default);
                let ours = spec.holder_identity.as_deref() == Some(config.identity.as_str());
                if !ours {
                    spec.acquire_time = Some(now());
                    spec.lease_transitions = Some(spec.lease_transitions.unwrap_or(0) + 1);
                }
                spec.holder_identity = Some(config.identity.clone());
                spec.lease_duration_seconds = Some(seconds);
                spec.renew_time = Some(now());
                // The resourceVersion in `lease` makes this a compare-and-swap.
                match api.replace(&config.name, &PostParams::default(), &lease).await {
                    Ok(_) => Ok(true),
                    Err(kube::Error::Api(s)) if s.code == 409 => Ok(false),
                    Err(e) => Err(e),
                }
            }
        }
    }

    /// Blocks until this candidate holds the lease.
    pub async fn acquire(client: Client, config: LeaseConfig) -> Leadership {
        let api: Api<Lease> = Api::namespaced(client, &config.namespace);
        tracing::info!(lease = %format!("{}/{}", config.namespace, config.name), identity = %config.identity, "attempting to acquire leader lease");
        let mut observed = Observed::default();
        loop {
            match Self::try_acquire_or_renew(&api, &config, &mut observed).await {
                Ok(true) => {
                    tracing::info!(identity = %config.identity, "successfully acquired lease");
                    return Leadership { api, config, observed };
                }
                Ok(false) => {}
                Err(e) => tracing::warn!(error = %e, "error retrieving resource lock"),
            }
            tokio::time::sleep(config.retry_period).await;
        }
    }

    /// Renews the lease every retry period; returns when it could not be renewed within the
    /// renew deadline (leadership lost). Starts the [`Watchdog`] that exits the process, whatever
    /// the rest of it is doing, once the renew deadline has passed since the start of the last
    /// successful renewal.
    pub async fn hold(mut self) {
        // Acquiring counts as the first renewal; its request started at most now.
        let mut last_start = tokio::time::Instant::now();
        let watchdog = Watchdog::start(self.config.renew_deadline);
        loop {
            tokio::time::sleep(self.config.retry_period).await;
            let started = tokio::time::Instant::now();
            let left = (last_start + self.config.renew_deadline).saturating_duration_since(started);
            match tokio::time::timeout(
                left,
                Self::try_acquire_or_renew(&self.api, &self.config, &mut self.observed),
            )
            .await
            {
                Ok(Ok(true)) => {
                    last_start = started;
                    watchdog.renewed(started.into_std());
                }
                Ok(Ok(false)) => {
                    tracing::error!("lease taken by another candidate");
                    return;
                }
                Ok(Err(e)) => tracing::warn!(error = %e, "failed to renew lease"),
                Err(_) => tracing::warn!("renewing the lease timed out"),
            }
            if last_start.elapsed() >= self.config.renew_deadline {
                tracing::error!("failed to renew lease within the renew deadline");
                return;
            }
        }
    }
}

/// Exits the process once `renew_deadline` has passed since the start of the last successful
/// renewal (see the module docs), from an OS thread of its own.
#[derive(Debug, Clone)]
pub struct Watchdog {
    last_start: std::sync::Arc<std::sync::Mutex<std::time::Instant>>,
}

impl Watchdog {
    /// Starts watching; the lease was (re)acquired by a request that started at most now.
    pub fn start(renew_deadline: Duration) -> Watchdog {
        let last_start = std::sync::Arc::new(std::sync::Mutex::new(std::time::Instant::now()));
        let watched = last_start.clone();
        std::thread::Builder::new()
            .name("lease-watchdog".into())
            .spawn(move || {
                loop {
                    let since = *watched.lock().unwrap_or_else(|e| e.into_inner());
                    let deadline = since + renew_deadline;
                    let now = std::time::Instant::now();
                    if now >= deadline {
                        tracing::error!(
                            "leaderelection lost: the lease was not renewed within the renew deadline; exiting before another replica may take over"
                        );
                        std::process::exit(1);
                    }
                    std::thread::sleep((deadline - now).min(Duration::from_millis(100)));
                }
            })
            .expect("spawn the lease watchdog thread");
        Watchdog { last_start }
    }

    /// Records a successful renewal whose request started at `started`.
    pub fn renewed(&self, started: std::time::Instant) {
        let mut last = self.last_start.lock().unwrap_or_else(|e| e.into_inner());
        *last = (*last).max(started);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lease(holder: &str, renew_time: &str, duration: i32) -> Lease {
        Lease {
            metadata: ObjectMeta::default(),
            spec: Some(LeaseSpec {
                holder_identity: Some(holder.into()),
                lease_duration_seconds: Some(duration),
                renew_time: Some(MicroTime(renew_time.parse().unwrap())),
                ..Default::default()
            }),
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_lease_is_free_when_unheld_ours_or_unchanged_for_its_duration() {
        let now = tokio::time::Instant::now();
        let mut o = Observed::default();
        assert!(o.is_free(&Lease::default(), "me", now));
        let mut o = Observed::default();
        assert!(o.is_free(&lease("me", "2026-01-01T00:00:00Z", 15), "me", now));
        let mut o = Observed::default();
        let held = lease("other", "2026-01-01T00:00:00Z", 15);
        assert!(!o.is_free(&held, "me", now), "first sight: its holder is alive now");
        assert!(!o.is_free(&held, "me", now + Duration::from_secs(14)));
        assert!(o.is_free(&held, "me", now + Duration::from_secs(15)), "unchanged for 15 s");
    }

    /// Finding 5 of #11: expiry used to compare the holder's renewTime with the local wall
    /// clock, so a candidate an hour ahead (or a holder an hour behind) saw every lease as
    /// expired and took it over while it was being renewed. Only changes count now.
    #[tokio::test(start_paused = true)]
    async fn clock_skew_never_makes_a_renewed_lease_look_expired() {
        let start = tokio::time::Instant::now();
        let mut o = Observed::default();
        // The holder's wall clock is an hour behind this candidate's: its renewTimes look old.
        for i in 0..100u32 {
            let renewed = format!("2026-01-01T00:{:02}:{:02}Z", (i * 2) / 60, (i * 2) % 60);
            let now = start + Duration::from_secs(u64::from(i) * 2);
            assert!(!o.is_free(&lease("other", &renewed, 15), "me", now), "renewal {i}");
        }
        // The holder stops renewing: free 15 s after the last change was seen, not before.
        let last = lease("other", "2026-01-01T00:03:18Z", 15);
        let seen = start + Duration::from_secs(198);
        assert!(!o.is_free(&last, "me", seen + Duration::from_secs(14)));
        assert!(o.is_free(&last, "me", seen + Duration::from_secs(15)));
    }
}
