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
    /// When the last successful renewal (or the acquisition) started.
    last_start: tokio::time::Instant,
    /// Exits the process past the renew deadline (none in this module's tests).
    watchdog: Option<Watchdog>,
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

/// What one attempt to take or renew the lease found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Attempt {
    /// This candidate holds the lease: its write was stored.
    Held,
    /// Another candidate holds the lease, and it is not free.
    HeldByOther,
    /// This candidate's write lost a race (409): the Lease changed between the read and the
    /// write (another candidate's write, an earlier renewal of ours whose answer came late, a
    /// label someone edited). The next read says who holds it.
    Conflict,
}

impl Leadership {
    /// Tries once to take or renew the lease.
    async fn try_acquire_or_renew(
        api: &Api<Lease>,
        config: &LeaseConfig,
        observed: &mut Observed,
    ) -> Result<Attempt, kube::Error> {
        let seconds = i32::try_from(config.lease_duration.as_secs()).unwrap_or(i32::MAX);
        let stored = |written: Result<Lease, kube::Error>| match written {
            Ok(_) => Ok(Attempt::Held),
            Err(kube::Error::Api(s)) if s.code == 409 => Ok(Attempt::Conflict),
            Err(e) => Err(e),
        };
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
                stored(api.create(&PostParams::default(), &lease).await)
            }
            Some(mut lease) => {
                if !observed.is_free(&lease, &config.identity, tokio::time::Instant::now()) {
                    return Ok(Attempt::HeldByOther);
                }
                let spec = lease.spec.get_or_insert_with(Default::default);
                let ours = spec.holder_identity.as_deref() == Some(config.identity.as_str());
                if !ours {
                    spec.acquire_time = Some(now());
                    spec.lease_transitions =
                        Some(spec.lease_transitions.unwrap_or(0).saturating_add(1));
                }
                spec.holder_identity = Some(config.identity.clone());
                spec.lease_duration_seconds = Some(seconds);
                spec.renew_time = Some(now());
                // The resourceVersion in `lease` makes this a compare-and-swap.
                stored(api.replace(&config.name, &PostParams::default(), &lease).await)
            }
        }
    }

    /// Blocks until this candidate holds the lease, and starts the [`Watchdog`].
    ///
    /// An acquisition is a renewal as far as the deadline goes: the server stored it at some
    /// point after its request started, so the process may act until `renew_deadline` after
    /// that start, and no longer. Each attempt is bounded by the renew deadline, and the
    /// watchdog counts from the start of the attempt that won, not from when its answer came
    /// (kube-controller-manager bounds its elector's requests by the renew deadline too).
    pub async fn acquire(client: Client, config: LeaseConfig) -> Leadership {
        let api: Api<Lease> = Api::namespaced(client, &config.namespace);
        tracing::info!(lease = %format!("{}/{}", config.namespace, config.name), identity = %config.identity, "attempting to acquire leader lease");
        let mut observed = Observed::default();
        loop {
            let started = tokio::time::Instant::now();
            let attempt = Self::try_acquire_or_renew(&api, &config, &mut observed);
            match tokio::time::timeout(config.renew_deadline, attempt).await {
                Ok(Ok(Attempt::Held)) => {
                    tracing::info!(identity = %config.identity, "successfully acquired lease");
                    let watchdog = Watchdog::start(config.renew_deadline, started.into_std());
                    return Leadership {
                        api,
                        config,
                        observed,
                        last_start: started,
                        watchdog: Some(watchdog),
                    };
                }
                Ok(Ok(_)) => {}
                Ok(Err(e)) => tracing::warn!(error = %e, "error retrieving resource lock"),
                Err(_) => tracing::warn!("acquiring the lease timed out"),
            }
            tokio::time::sleep(config.retry_period).await;
        }
    }

    /// Renews the lease every retry period; returns when another candidate holds it, or when
    /// it could not be renewed within the renew deadline (leadership lost: the caller ends the
    /// process). Meanwhile the [`Watchdog`] exits the process, whatever the rest of it is
    /// doing, once the renew deadline has passed since the start of the last successful
    /// renewal.
    pub async fn hold(mut self) {
        // The first renewal at once, as client-go's renew loop polls immediately: an
        // acquisition whose answer came late leaves less than a retry period to the deadline.
        let mut first = true;
        loop {
            if !std::mem::take(&mut first) {
                tokio::time::sleep(self.config.retry_period).await;
            }
            let started = tokio::time::Instant::now();
            let left =
                (self.last_start + self.config.renew_deadline).saturating_duration_since(started);
            match tokio::time::timeout(
                left,
                Self::try_acquire_or_renew(&self.api, &self.config, &mut self.observed),
            )
            .await
            {
                Ok(Ok(Attempt::Held)) => {
                    self.last_start = started;
                    if let Some(watchdog) = &self.watchdog {
                        watchdog.renewed(started.into_std());
                    }
                }
                Ok(Ok(Attempt::HeldByOther)) => {
                    tracing::error!("lease taken by another candidate");
                    return;
                }
                // Not lost: the next attempt reads who holds it (client-go retries until the
                // renew deadline too).
                Ok(Ok(Attempt::Conflict)) => {
                    tracing::warn!("the lease changed while renewing it; retrying")
                }
                Ok(Err(e)) => tracing::warn!(error = %e, "failed to renew lease"),
                Err(_) => tracing::warn!("renewing the lease timed out"),
            }
            if self.last_start.elapsed() >= self.config.renew_deadline {
                tracing::error!("failed to renew lease within the renew deadline");
                return;
            }
        }
    }
}

/// The writes' side of the watchdog: whether the renew deadline has passed since the start of
/// the last successful renewal (or the acquisition).
#[derive(Debug, Clone)]
struct Fence {
    last_start: std::sync::Arc<std::sync::Mutex<std::time::Instant>>,
    renew_deadline: Duration,
}

impl Fence {
    /// The fence of a lease (re)acquired by a request that started at `started`.
    fn new(started: std::time::Instant, renew_deadline: Duration) -> Fence {
        Fence { last_start: std::sync::Arc::new(std::sync::Mutex::new(started)), renew_deadline }
    }

    fn deadline(&self) -> std::time::Instant {
        *self.last_start.lock().unwrap_or_else(|e| e.into_inner()) + self.renew_deadline
    }
}

/// The fence of the lease this process holds, once it holds one.
static FENCE: std::sync::OnceLock<Fence> = std::sync::OnceLock::new();
/// This process runs under leader election ([`elect`]): no write before it leads.
static ELECTED_ONLY: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
/// This process has lost its lease ([`exit_lost`]): no write any more.
static LOST: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Declares that this process writes only while it leads: until [`Leadership::acquire`]
/// returns, [`may_write`] says no.
pub fn elect() {
    ELECTED_ONLY.store(true, std::sync::atomic::Ordering::SeqCst);
}

/// Whether this process may still write to the cluster: always without leader election;
/// with it, only once it leads, before the renew deadline has passed since the start of the
/// last successful renewal, and never once the lease was lost. The collector's PATCHes and
/// DELETEs ask just before they are sent, so that a worker that waited (for its rate limit,
/// or a paused process woken up) does not write past the moment a standby may take over, in
/// the milliseconds before the process exits.
pub fn may_write() -> bool {
    let lost = LOST.load(std::sync::atomic::Ordering::SeqCst);
    let elected_only = ELECTED_ONLY.load(std::sync::atomic::Ordering::SeqCst);
    allows(FENCE.get(), elected_only, lost, std::time::Instant::now())
}

/// [`may_write`]'s rule, for a `fence` (if the lease is held) at `now`.
fn allows(fence: Option<&Fence>, elected_only: bool, lost: bool, now: std::time::Instant) -> bool {
    !lost
        && match fence {
            Some(fence) => now < fence.deadline(),
            None => !elected_only,
        }
}

/// Ends the process because the lease was lost (another holder, or the renew deadline passed
/// while renewing): writes stop first ([`may_write`]), then the reason is logged, waited for
/// 50 ms at most, and the process exits.
pub fn exit_lost(reason: &'static str) -> ! {
    LOST.store(true, std::sync::atomic::Ordering::SeqCst);
    exit_logging(reason)
}

/// Exits the process once `renew_deadline` has passed since the start of the last successful
/// renewal (see the module docs), from an OS thread of its own.
#[derive(Debug, Clone)]
pub struct Watchdog {
    fence: Fence,
}

impl Watchdog {
    /// Starts watching a lease (re)acquired by a request that started at `started`, and fences
    /// this process's writes ([`may_write`]) by the same deadline.
    pub fn start(renew_deadline: Duration, started: std::time::Instant) -> Watchdog {
        let fence = Fence::new(started, renew_deadline);
        let watched = fence.clone();
        std::thread::Builder::new()
            .name("lease-watchdog".into())
            .spawn(move || {
                loop {
                    let deadline = watched.deadline();
                    let now = std::time::Instant::now();
                    if now >= deadline {
                        exit_lost(
                            "leaderelection lost: the lease was not renewed within the renew deadline; exiting before another replica may take over",
                        );
                    }
                    std::thread::sleep((deadline - now).min(Duration::from_millis(100)));
                }
            })
            .expect("spawn the lease watchdog thread");
        FENCE.set(fence.clone()).expect("one lease a process");
        Watchdog { fence }
    }

    /// Records a successful renewal whose request started at `started`.
    pub fn renewed(&self, started: std::time::Instant) {
        let mut last = self.fence.last_start.lock().unwrap_or_else(|e| e.into_inner());
        *last = (*last).max(started);
    }
}

/// Exits the process after logging `reason` from another thread, waited for 50 ms at most: a
/// log write blocked on a full pipe must not keep the process (and its workers) running.
fn exit_logging(reason: &'static str) -> ! {
    let (logged, wait) = std::sync::mpsc::channel();
    let _ = std::thread::Builder::new().name("lease-lost-log".into()).spawn(move || {
        tracing::error!("{reason}");
        let _ = logged.send(());
    });
    let _ = wait.recv_timeout(Duration::from_millis(50));
    std::process::exit(1)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_server::{Reply, Script, failure_reply};

    /// The Lease `kube-gc` as the server answers it: held by `holder`, renewed at `renewed`.
    fn lease_json(holder: &str, renewed: &str, rv: u32) -> Reply {
        Reply::json(
            200,
            format!(
                r#"{{"apiVersion":"coordination.k8s.io/v1","kind":"Lease","metadata":{{"name":"kube-gc","namespace":"kube-system","resourceVersion":"{rv}"}},"spec":{{"holderIdentity":"{holder}","leaseDurationSeconds":15,"renewTime":"{renewed}"}}}}"#
            ),
            false,
        )
    }

    /// A holder of the lease over `script`, as `acquire` would leave it (without the watchdog,
    /// which would end the test process).
    fn holder(script: &Script) -> Leadership {
        let client = Client::new(script.clone(), "default");
        let config = LeaseConfig {
            namespace: "kube-system".into(),
            name: "kube-gc".into(),
            identity: "me".into(),
            lease_duration: Duration::from_secs(15),
            renew_deadline: Duration::from_secs(10),
            retry_period: Duration::from_secs(2),
        };
        Leadership {
            api: Api::namespaced(client, "kube-system"),
            config,
            observed: Observed::default(),
            last_start: tokio::time::Instant::now(),
            watchdog: None,
        }
    }

    /// A renewal refused with 409 (the Lease changed between its read and its write: an earlier
    /// renewal's write landing late, a label edited) is retried; the holder gives up only once
    /// a read shows another holder. It used to give up, and the process to exit, at the 409.
    #[tokio::test(start_paused = true)]
    async fn a_conflicting_renewal_is_retried_and_only_another_holder_ends_it() {
        let script = Script::new(vec![
            lease_json("me", "2026-01-01T00:00:00.000000Z", 1),
            failure_reply(409),
            lease_json("me", "2026-01-01T00:00:01.000000Z", 2),
            lease_json("me", "2026-01-01T00:00:04.000000Z", 3),
            lease_json("other", "2026-01-01T00:00:05.000000Z", 4),
        ]);
        holder(&script).hold().await;
        // Read, write (409); read, write (stored); read: another holder.
        assert_eq!(script.requests().len(), 5, "{:?}", script.requests());
    }

    /// No write before the lease is held under leader election, none past the renew deadline,
    /// none once the lease is lost; without leader election, always.
    #[test]
    fn writes_are_allowed_only_while_the_lease_holds() {
        let start = std::time::Instant::now();
        let fence = Fence::new(start, Duration::from_secs(10));
        let at = |s: u64| start + Duration::from_secs(s);
        assert!(allows(None, false, false, at(0)), "no leader election");
        assert!(!allows(None, true, false, at(0)), "not leading yet");
        assert!(allows(Some(&fence), true, false, at(9)));
        assert!(!allows(Some(&fence), true, false, at(10)), "past the renew deadline");
        assert!(!allows(Some(&fence), true, true, at(1)), "lost");
    }

    /// The fence moves forward with each renewal's start, never back.
    #[test]
    fn the_fence_counts_from_the_latest_renewal_start() {
        let start = std::time::Instant::now();
        let fence = Fence::new(start, Duration::from_secs(10));
        let watchdog = Watchdog { fence: fence.clone() };
        assert_eq!(fence.deadline(), start + Duration::from_secs(10));
        watchdog.renewed(start + Duration::from_secs(3));
        watchdog.renewed(start + Duration::from_secs(1));
        assert_eq!(fence.deadline(), start + Duration::from_secs(13));
    }

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
