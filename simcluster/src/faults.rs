//! Seeded fault injection: the failures a real API server and its network produce, at rates a
//! test chooses, decided by a PRNG from an explicit seed.
//!
//! A [`Faults`] sets one rate (a probability, 0 to 1) per kind of fault; the default is all
//! zero: no fault. [`FaultInjector`] draws every decision from one splitmix64 stream seeded by
//! [`Faults::seed`], so a run is reproducible given the same sequence of requests (concurrent
//! clients make the sequence itself vary; the seed is printed by the chaos run either way).
//! [`SimCluster::set_faults`](crate::SimCluster::set_faults) changes them at run time (and
//! reseeds the stream); [`SimCluster::faults_off`](crate::SimCluster::faults_off) stops them, so
//! a test can let a system under test converge afterwards.
//!
//! # What is covered
//!
//! Every request on a served resource: get, list, watch, create, update, patch, delete and
//! deletecollection. Never discovery (`/api`, `/apis`, `/apis/<group>[/<version>]`),
//! `/version` nor `/healthz` (`/readyz`, `/livez`): they are not where a collector's
//! correctness is at stake, and clients cache discovery in ways that would make a faulted
//! discovery test the client, not the collector. A request that names no served resource
//! (404) is not faulted either.
//!
//! | Fault | Rate | Effect |
//! |-------|------|--------|
//! | [`FaultKind::TooManyRequests`], [`FaultKind::InternalError`], [`FaultKind::ServiceUnavailable`] | `error_rate` (one of the three, evenly) | the request fails before it is served: 429 with `Retry-After: 1`, 500 or 503, each with a `Status` body as the apiserver sends it |
//! | [`FaultKind::Latency`] | every covered request while `latency` or `latency_jitter` is non-zero | the request waits `latency` + uniform(0..=`latency_jitter`) first |
//! | [`FaultKind::WatchDropped`] | `watch_drop_rate`, per watch | the connection is cut (the body ends with an error, as on a reset) after a random 0 to 7 events or 0 to 1000 ms, whichever comes first |
//! | [`FaultKind::WatchExpired`] | `expire_rate`, per watch from a resourceVersion | the watch answers one `ERROR` event, a `Status` of 410 `Expired`, as the watch cache does for a compacted version |
//! | [`FaultKind::ContinueExpired`] | `expire_rate`, per list page asked with `continue` | 410 `Expired`, as for a compacted continue token |
//! | [`FaultKind::Conflict`] | `conflict_rate`, per update, patch and delete of one object | 409 `Conflict` ("the object has been modified"), the write not applied |
//! | [`FaultKind::AnswerLost`] | `answer_lost_rate`, per update, patch and delete of one object not otherwise faulted | the write is applied, then answered 504 `Timeout` ("the request did not complete"), as the apiserver's timeout filter answers a handler that finished too late, or a client sees a connection cut after the write: the client cannot tell whether it happened |
//! | [`FaultKind::WatchDelayed`] | `watch_delay_rate`, per watch event | the event waits a uniform 0 to `watch_delay` before it is written, and every later event of that watch waits behind it (a slow watch cache or network: the order is kept, the client's view lags) |
//!
//! Every injected error response carries the header `X-Simcluster-Fault: <kind>`.

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use parking_lot::Mutex;
use serde_json::{Value, json};

use crate::error::Error;
use kube_gc_workload::SplitMix64;

/// The header naming the fault an error response was injected for.
pub const FAULT_HEADER: &str = "x-simcluster-fault";

/// Fault rates and the seed they are drawn from. The default injects nothing.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Faults {
    /// Seed of the decisions' PRNG (splitmix64).
    pub seed: u64,
    /// Probability that a covered request fails with 429, 500 or 503 (one of them, evenly).
    pub error_rate: f64,
    /// Latency added to every covered request.
    pub latency: Duration,
    /// Uniform random latency, 0 to this, added on top of `latency`.
    pub latency_jitter: Duration,
    /// Probability that a watch is cut mid-stream.
    pub watch_drop_rate: f64,
    /// Probability that a watch from a resourceVersion, or a list page asked with a continue
    /// token, is answered 410 Expired.
    pub expire_rate: f64,
    /// Probability that an update, patch or delete of one object is answered 409 Conflict.
    pub conflict_rate: f64,
    /// Probability that an update, patch or delete of one object is applied and then answered
    /// 504 (the answer lost).
    pub answer_lost_rate: f64,
    /// Probability that a watch event is held back before it is sent.
    pub watch_delay_rate: f64,
    /// The longest a delayed watch event is held back.
    pub watch_delay: Duration,
}

impl Faults {
    /// No fault at all (the default).
    pub fn off() -> Faults {
        Faults::default()
    }

    /// Whether these faults inject nothing.
    pub fn is_off(&self) -> bool {
        self.error_rate <= 0.0
            && self.latency.is_zero()
            && self.latency_jitter.is_zero()
            && self.watch_drop_rate <= 0.0
            && self.expire_rate <= 0.0
            && self.conflict_rate <= 0.0
            && self.answer_lost_rate <= 0.0
            && (self.watch_delay_rate <= 0.0 || self.watch_delay.is_zero())
    }
}

/// A kind of injected fault (the index of its counter in [`FaultCounts`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FaultKind {
    /// 429 TooManyRequests with `Retry-After`.
    TooManyRequests,
    /// 500 InternalError.
    InternalError,
    /// 503 ServiceUnavailable.
    ServiceUnavailable,
    /// A request delayed.
    Latency,
    /// A watch connection cut mid-stream.
    WatchDropped,
    /// A watch answered with an `ERROR` event, 410 Expired.
    WatchExpired,
    /// A list page's continue token answered 410 Expired.
    ContinueExpired,
    /// A write answered 409 Conflict.
    Conflict,
    /// A watch event held back.
    WatchDelayed,
    /// A write applied, then answered 504.
    AnswerLost,
}

impl FaultKind {
    /// Every kind, in counter order.
    pub const ALL: [FaultKind; 10] = [
        FaultKind::TooManyRequests,
        FaultKind::InternalError,
        FaultKind::ServiceUnavailable,
        FaultKind::Latency,
        FaultKind::WatchDropped,
        FaultKind::WatchExpired,
        FaultKind::ContinueExpired,
        FaultKind::Conflict,
        FaultKind::WatchDelayed,
        FaultKind::AnswerLost,
    ];

    /// A short name (`429`, `500`, `503`, `latency`, `watch-drop`, `watch-expired`,
    /// `continue-expired`, `conflict`, `watch-delay`).
    pub fn name(self) -> &'static str {
        match self {
            FaultKind::TooManyRequests => "429",
            FaultKind::InternalError => "500",
            FaultKind::ServiceUnavailable => "503",
            FaultKind::Latency => "latency",
            FaultKind::WatchDropped => "watch-drop",
            FaultKind::WatchExpired => "watch-expired",
            FaultKind::ContinueExpired => "continue-expired",
            FaultKind::Conflict => "conflict",
            FaultKind::WatchDelayed => "watch-delay",
            FaultKind::AnswerLost => "answer-lost",
        }
    }

    fn index(self) -> usize {
        self as usize
    }
}

/// How many faults of each kind were injected.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FaultCounts([u64; 10]);

impl FaultCounts {
    /// The count of `kind`.
    pub fn get(&self, kind: FaultKind) -> u64 {
        self.0[kind.index()]
    }

    /// Every kind together.
    pub fn total(&self) -> u64 {
        self.0.iter().sum()
    }

    /// Adds `other`'s counts to these.
    pub fn add(&mut self, other: &FaultCounts) {
        for (a, b) in self.0.iter_mut().zip(other.0) {
            *a += b;
        }
    }
}

impl fmt::Display for FaultCounts {
    /// `429=… 500=… 503=… latency=… watch-drop=… watch-expired=… continue-expired=… conflict=…
    /// watch-delay=… answer-lost=…`
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, kind) in FaultKind::ALL.iter().enumerate() {
            if i > 0 {
                f.write_str(" ")?;
            }
            write!(f, "{}={}", kind.name(), self.get(*kind))?;
        }
        Ok(())
    }
}

/// What a request is, as far as faults go.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum RequestClass {
    /// get.
    Read,
    /// list; `continued`: with a continue token.
    List { continued: bool },
    /// watch; `from_version`: from a resourceVersion (not `""` / `0`).
    Watch { from_version: bool },
    /// create or deletecollection (never a conflict: they name no one object's version).
    Write,
    /// update, patch or delete of one object.
    ObjectWrite,
}

/// What to do to a watch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum WatchFault {
    /// Answer one `ERROR` event, 410 Expired.
    Expire,
    /// Cut the connection after this many events or this long, whichever comes first.
    Drop { events: u32, after: Duration },
}

/// The faults decided for one request.
#[derive(Debug, Default)]
pub(crate) struct Plan {
    /// Wait this long first.
    pub(crate) latency: Option<Duration>,
    /// Answer this instead of serving the request.
    pub(crate) reject: Option<Response>,
    /// Serve the request, then answer this instead of what it answered (a write's answer lost).
    pub(crate) lose_answer: Option<Response>,
    /// For a watch: what to do to it.
    pub(crate) watch: Option<WatchFault>,
}

/// Decides and counts faults; shared by the server's handlers.
#[derive(Debug)]
pub struct FaultInjector {
    state: Mutex<(Faults, SplitMix64)>,
    counts: [AtomicU64; 10],
}

impl Default for FaultInjector {
    fn default() -> FaultInjector {
        FaultInjector::new(Faults::off())
    }
}

impl FaultInjector {
    /// An injector with `faults`.
    pub fn new(faults: Faults) -> FaultInjector {
        let rng = SplitMix64::new(faults.seed);
        FaultInjector { state: Mutex::new((faults, rng)), counts: Default::default() }
    }

    /// Replaces the faults and reseeds the PRNG with their seed (counts are kept).
    pub fn set(&self, faults: Faults) {
        let rng = SplitMix64::new(faults.seed);
        *self.state.lock() = (faults, rng);
    }

    /// The faults in force.
    pub fn faults(&self) -> Faults {
        self.state.lock().0.clone()
    }

    /// The faults injected so far, by kind.
    pub fn counts(&self) -> FaultCounts {
        FaultCounts(std::array::from_fn(|i| self.counts[i].load(Ordering::Relaxed)))
    }

    /// Sets every count back to zero.
    pub fn reset_counts(&self) {
        for c in &self.counts {
            c.store(0, Ordering::Relaxed);
        }
    }

    pub(crate) fn count(&self, kind: FaultKind) {
        self.counts[kind.index()].fetch_add(1, Ordering::Relaxed);
    }

    /// Decides whether the next event of a watch is held back, and for how long (counted).
    pub(crate) fn watch_delay(&self) -> Option<Duration> {
        let mut guard = self.state.lock();
        let (faults, rng) = &mut *guard;
        if faults.watch_delay_rate <= 0.0 || faults.watch_delay.is_zero() {
            return None;
        }
        if !chance(rng, faults.watch_delay_rate) {
            return None;
        }
        let max = faults.watch_delay.as_nanos() as u64;
        let delay = Duration::from_nanos(rng.next() % (max + 1));
        drop(guard);
        self.count(FaultKind::WatchDelayed);
        Some(delay)
    }

    /// Decides the faults of one request on `resource` (`plural.group`), object `name` (empty
    /// for a collection). Draws in a fixed order, and only for the rates that are non-zero.
    pub(crate) fn plan(&self, class: RequestClass, resource: &str, name: &str) -> Plan {
        let mut plan = Plan::default();
        let mut guard = self.state.lock();
        let (faults, rng) = &mut *guard;
        if faults.is_off() {
            return plan;
        }
        if !faults.latency.is_zero() || !faults.latency_jitter.is_zero() {
            let jitter = faults.latency_jitter.as_nanos() as u64;
            let extra = if jitter == 0 { 0 } else { rng.next() % (jitter + 1) };
            plan.latency = Some(faults.latency + Duration::from_nanos(extra));
        }
        let mut reject = None;
        if chance(rng, faults.error_rate) {
            reject = Some(match rng.next() % 3 {
                0 => FaultKind::TooManyRequests,
                1 => FaultKind::InternalError,
                _ => FaultKind::ServiceUnavailable,
            });
        }
        match class {
            RequestClass::List { continued: true } => {
                if chance(rng, faults.expire_rate) && reject.is_none() {
                    reject = Some(FaultKind::ContinueExpired);
                }
            }
            RequestClass::ObjectWrite => {
                if chance(rng, faults.conflict_rate) && reject.is_none() {
                    reject = Some(FaultKind::Conflict);
                }
                if chance(rng, faults.answer_lost_rate) && reject.is_none() {
                    plan.lose_answer = Some(rejection(FaultKind::AnswerLost, resource, name));
                }
            }
            RequestClass::Watch { from_version } => {
                if from_version && chance(rng, faults.expire_rate) {
                    plan.watch = Some(WatchFault::Expire);
                } else if chance(rng, faults.watch_drop_rate) {
                    let events = (rng.next() % 8) as u32;
                    let after = Duration::from_millis(rng.next() % 1001);
                    plan.watch = Some(WatchFault::Drop { events, after });
                }
            }
            RequestClass::Read | RequestClass::List { continued: false } | RequestClass::Write => {}
        }
        drop(guard);
        if plan.latency.is_some() {
            self.count(FaultKind::Latency);
        }
        if let Some(kind) = reject {
            self.count(kind);
            plan.reject = Some(rejection(kind, resource, name));
            plan.watch = None;
        }
        if plan.watch == Some(WatchFault::Expire) {
            self.count(FaultKind::WatchExpired);
        }
        // A lost answer is counted once the write it follows was applied (see the handler).
        plan
    }
}

/// Parses a rate (a probability, `0` to `1`) given on the command line.
pub fn parse_rate(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(r) if (0.0..=1.0).contains(&r) => Ok(r),
        _ => Err(format!("{text:?} is not a probability between 0 and 1")),
    }
}

/// A draw with probability `rate` (no draw when the rate is zero or less).
fn chance(rng: &mut SplitMix64, rate: f64) -> bool {
    if rate <= 0.0 {
        return false;
    }
    let unit = (rng.next() >> 11) as f64 / (1u64 << 53) as f64;
    unit < rate
}

/// The message of a watch answered 410 by [`WatchFault::Expire`].
pub(crate) const WATCH_EXPIRED: &str = "too old resource version (simcluster fault: watch expired)";

/// The response the apiserver would send for `kind`.
fn rejection(kind: FaultKind, resource: &str, name: &str) -> Response {
    let (code, status, retry_after) = match kind {
        FaultKind::TooManyRequests => (
            StatusCode::TOO_MANY_REQUESTS,
            status_body(
                429,
                "TooManyRequests",
                "the server has received too many requests and has asked us to try again later",
                Some(json!({"retryAfterSeconds": 1})),
            ),
            true,
        ),
        FaultKind::InternalError => (
            StatusCode::INTERNAL_SERVER_ERROR,
            Error::Internal("simcluster fault: internal error".into()).to_status(),
            false,
        ),
        FaultKind::ServiceUnavailable => (
            StatusCode::SERVICE_UNAVAILABLE,
            status_body(
                503,
                "ServiceUnavailable",
                "the server is currently unable to handle the request (simcluster fault)",
                None,
            ),
            false,
        ),
        FaultKind::ContinueExpired => (
            StatusCode::GONE,
            Error::Expired("The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter, or use the continue token in this response to retrieve the remainder of the results. (simcluster fault)".into()).to_status(),
            false,
        ),
        FaultKind::Conflict => (
            StatusCode::CONFLICT,
            Error::Conflict {
                resource: resource.to_owned(),
                name: name.to_owned(),
                message: "the object has been modified; please apply your changes to the latest version and try again (simcluster fault)".into(),
            }
            .to_status(),
            false,
        ),
        FaultKind::AnswerLost => (
            StatusCode::GATEWAY_TIMEOUT,
            status_body(
                504,
                "Timeout",
                "Timeout: request did not complete within the allotted timeout (simcluster fault: the write was applied)",
                None,
            ),
            false,
        ),
        // Not answered with an error response.
        FaultKind::Latency
        | FaultKind::WatchDropped
        | FaultKind::WatchExpired
        | FaultKind::WatchDelayed => {
            unreachable!("{kind:?} is not a rejection")
        }
    };
    let mut resp =
        (code, [(header::CONTENT_TYPE, "application/json")], status.to_string()).into_response();
    let headers = resp.headers_mut();
    headers.insert(FAULT_HEADER, HeaderValue::from_static(kind.name()));
    if retry_after {
        headers.insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
    }
    resp
}

fn status_body(code: u16, reason: &str, message: &str, details: Option<Value>) -> Value {
    let mut s = json!({
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code,
    });
    if let Some(d) = details {
        s["details"] = d;
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all_on(seed: u64) -> Faults {
        Faults {
            seed,
            error_rate: 0.2,
            latency: Duration::from_millis(1),
            latency_jitter: Duration::from_millis(5),
            watch_drop_rate: 0.3,
            expire_rate: 0.3,
            conflict_rate: 0.3,
            answer_lost_rate: 0.3,
            watch_delay_rate: 0.3,
            watch_delay: Duration::from_millis(10),
        }
    }

    fn trace(faults: Faults) -> Vec<String> {
        let inj = FaultInjector::new(faults);
        let classes = [
            RequestClass::Read,
            RequestClass::List { continued: true },
            RequestClass::Watch { from_version: true },
            RequestClass::ObjectWrite,
            RequestClass::Write,
        ];
        (0..500)
            .map(|i| {
                let p = inj.plan(classes[i % classes.len()], "pods", "p");
                let code = p.reject.as_ref().map(|r| r.status().as_u16());
                format!("{:?} {:?} {:?}", p.latency, code, p.watch)
            })
            .collect()
    }

    #[test]
    fn faults_should_be_off_by_default() {
        let inj = FaultInjector::default();
        for class in [RequestClass::Read, RequestClass::ObjectWrite] {
            let p = inj.plan(class, "pods", "p");
            assert!(p.latency.is_none() && p.reject.is_none() && p.watch.is_none());
            assert!(p.lose_answer.is_none());
        }
        assert_eq!(inj.counts().total(), 0);
    }

    #[test]
    fn plan_should_be_deterministic_per_seed() {
        assert_eq!(trace(all_on(7)), trace(all_on(7)));
        assert_ne!(trace(all_on(7)), trace(all_on(8)));
    }

    #[test]
    fn plan_should_inject_every_kind_at_about_its_rate() {
        let inj = FaultInjector::new(all_on(1));
        for i in 0..4000 {
            let class = match i % 3 {
                0 => RequestClass::List { continued: true },
                1 => RequestClass::Watch { from_version: i % 2 == 0 },
                _ => RequestClass::ObjectWrite,
            };
            let plan = inj.plan(class, "pods", "p");
            // The handlers count a dropped watch and a lost answer once they happen.
            if let Some(WatchFault::Drop { .. }) = plan.watch {
                inj.count(FaultKind::WatchDropped);
            }
            if plan.lose_answer.is_some() {
                assert_eq!(class, RequestClass::ObjectWrite, "only a write's answer is lost");
                inj.count(FaultKind::AnswerLost);
            }
            // Watch delays are drawn per event, not per request.
            if let Some(d) = inj.watch_delay() {
                assert!(d <= Duration::from_millis(10), "{d:?}");
            }
        }
        let c = inj.counts();
        for kind in FaultKind::ALL {
            assert!(c.get(kind) > 0, "{kind:?} never injected: {c}");
        }
        assert_eq!(c.get(FaultKind::Latency), 4000);
        // 20% errors split three ways: about 267 each of 4000.
        let errors = c.get(FaultKind::TooManyRequests)
            + c.get(FaultKind::InternalError)
            + c.get(FaultKind::ServiceUnavailable);
        assert!((600..1000).contains(&errors), "errors {errors}");
    }

    #[test]
    fn rejections_should_carry_the_apiservers_status() {
        let r = rejection(FaultKind::TooManyRequests, "pods", "p");
        assert_eq!(r.status(), StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(r.headers()[header::RETRY_AFTER], "1");
        assert_eq!(r.headers()[FAULT_HEADER], "429");
        let r = rejection(FaultKind::Conflict, "deployments.apps", "web");
        assert_eq!(r.status(), StatusCode::CONFLICT);
        let r = rejection(FaultKind::ContinueExpired, "pods", "");
        assert_eq!(r.status(), StatusCode::GONE);
    }

    #[test]
    fn set_should_reseed_and_off_should_stop() {
        let inj = FaultInjector::new(all_on(3));
        assert!(inj.plan(RequestClass::Read, "pods", "p").latency.is_some());
        inj.set(Faults::off());
        assert!(inj.plan(RequestClass::Read, "pods", "p").latency.is_none());
        assert!(inj.faults().is_off());
    }
}
