//! Faults the stale-view property tests inject into the collector's calls: a fault is armed for
//! the next call of one verb (GET, LIST page, PATCH, DELETE) and fires on it, after the oracle
//! has judged the call (every call is judged as the server would serve it). Either the server
//! refuses the call, or it serves it and the answer is lost: the collector sees an error
//! either way, and must decide again, from what it reads live, making only upstream's writes.
//!
//! The refusals are answered by a cluster hook ([`Faults::on_call`], added after the oracle's);
//! a lost answer needs the call served first, so the test's wrapper of the cluster replaces the
//! answer ([`Faults::answer`]).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use kube_gc_engine::ObjectMeta;
use kube_gc_engine::cluster::{Cluster, ClusterError, DeleteOptions, Patch, Resource};
use kube_gc_testkit::MemoryCluster;
use kube_gc_testkit::memory_cluster::{Call, Verb};
use parking_lot::Mutex;
use proptest::prelude::*;

/// How a faulted call goes wrong.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug)]
pub enum FaultKind {
    /// Refused with 503 (an API server restarting, etcd timing out): nothing served.
    Unavailable,
    /// Refused with 429 (API priority and fairness): nothing served.
    Throttled,
    /// A write refused with 409 Conflict (another writer's update got there first; the
    /// collector's preconditions or JSON merge resourceVersion no longer hold): nothing served.
    Conflict,
    /// A write to an object without finalizers that another client has just deleted: the
    /// object is gone when the write is served (404). Not fired on an object with finalizers
    /// (a delete would leave it, being deleted): the fault then waits for the next write.
    Gone,
    /// A write served, and its answer lost (a cut connection, a timeout at a proxy): the
    /// collector sees an error, and the write took effect.
    Lost,
}

impl FaultKind {
    /// Whether the fault makes sense for `verb`: a read's lost answer is its refusal, and only
    /// writes conflict or find their object gone.
    pub fn fits(self, verb: Verb) -> bool {
        matches!(verb, Verb::Patch | Verb::Delete)
            || matches!(self, FaultKind::Unavailable | FaultKind::Throttled)
    }
}

/// A fault for the next call of one verb (see [`FaultKind::fits`]).
pub fn fault() -> impl Strategy<Value = (Verb, FaultKind)> {
    let read = prop_oneof![Just(FaultKind::Unavailable), Just(FaultKind::Throttled)];
    let write = prop_oneof![
        1 => Just(FaultKind::Unavailable),
        1 => Just(FaultKind::Throttled),
        1 => Just(FaultKind::Conflict),
        1 => Just(FaultKind::Gone),
        2 => Just(FaultKind::Lost),
    ];
    prop_oneof![
        2 => read.clone().prop_map(|k| (Verb::Get, k)),
        1 => read.prop_map(|k| (Verb::List, k)),
        3 => write.clone().prop_map(|k| (Verb::Patch, k)),
        2 => write.prop_map(|k| (Verb::Delete, k)),
    ]
}

/// Up to three faults, each with where in a history it is armed (see [`insert_faults`]).
pub fn fault_schedule() -> impl Strategy<Value = Vec<(prop::sample::Index, (Verb, FaultKind))>> {
    prop::collection::vec((any::<prop::sample::Index>(), fault()), 0..4)
}

/// `ops` (a history's steps) with the faults of `schedule` inserted, `step` making the step
/// that arms one.
pub fn insert_faults<T>(
    mut ops: Vec<T>,
    schedule: Vec<(prop::sample::Index, (Verb, FaultKind))>,
    step: impl Fn(Verb, FaultKind) -> T,
) -> Vec<T> {
    for (at, (verb, kind)) in schedule {
        let at = at.index(ops.len() + 1);
        ops.insert(at, step(verb, kind));
    }
    ops
}

/// `ops` (a history's steps) with up to three faults inserted at random points, `step` making
/// the step that arms one. The history is drawn first, so a seed gives the history it gave
/// before faults were added.
pub fn with_faults<T: Clone + std::fmt::Debug>(
    ops: impl Strategy<Value = Vec<T>>,
    step: impl Fn(Verb, FaultKind) -> T + Clone,
) -> impl Strategy<Value = Vec<T>> {
    (ops, fault_schedule()).prop_map(move |(ops, schedule)| insert_faults(ops, schedule, &step))
}

/// The faults armed, and those fired.
#[derive(Default)]
pub struct Faults {
    /// Armed, oldest first: each fires on the next call of its verb.
    armed: Mutex<Vec<(Verb, FaultKind)>>,
    /// Set by the hook when the call it was consulted on is to be served and its answer lost;
    /// taken by [`Faults::answer`] when that call returns (the in-memory server answers at
    /// once, so nothing comes in between but the calls a hook makes, which take it first).
    losing: AtomicBool,
    /// How many fired, by verb and kind.
    fired: Mutex<BTreeMap<(&'static str, FaultKind), u64>>,
}

impl Faults {
    /// Arms `kind` for the next call of `verb` (ignored if it does not fit the verb).
    pub fn arm(&self, verb: Verb, kind: FaultKind) {
        if kind.fits(verb) {
            self.armed.lock().push((verb, kind));
        }
    }

    /// No more faults: those armed are dropped. Returns whether any was.
    pub fn disarm(&self) -> bool {
        let mut armed = self.armed.lock();
        let any = !armed.is_empty();
        armed.clear();
        any
    }

    /// Whether a fault is armed for the next call of `verb`.
    pub fn armed_for(&self, verb: Verb) -> bool {
        self.armed.lock().iter().any(|&(v, _)| v == verb)
    }

    /// How many faults fired, by verb and kind.
    pub fn fired(&self) -> BTreeMap<(&'static str, FaultKind), u64> {
        self.fired.lock().clone()
    }

    /// The hook, consulted on each of the collector's calls after the oracle's: fires the
    /// first fault armed for the call's verb, if any. Returns the fault fired, and the error the
    /// server refuses the call with (none when it serves it: a lost answer).
    pub fn on_call(
        &self,
        cluster: &MemoryCluster,
        call: &Call,
    ) -> Option<(FaultKind, Option<ClusterError>)> {
        let verb = call.verb();
        let kind = {
            let mut armed = self.armed.lock();
            let i = armed.iter().position(|&(v, kind)| {
                v == verb
                    && (kind != FaultKind::Gone
                        || cluster
                            .object(&call.resource, &call.namespace, &call.name)
                            .is_some_and(|o| o.finalizers.is_empty()))
            })?;
            armed.remove(i).1
        };
        *self.fired.lock().entry((verb.as_str(), kind)).or_default() += 1;
        let refused =
            |code: u16, message: &str| ClusterError::Other { code, message: message.into() };
        let error = match kind {
            FaultKind::Unavailable => {
                Some(refused(503, "the server is currently unable to handle the request"))
            }
            FaultKind::Throttled => Some(refused(
                429,
                "the server has received too many requests and has asked us to try again later",
            )),
            FaultKind::Conflict => Some(ClusterError::Conflict(format!(
                "Operation cannot be fulfilled on {} {:?}: the object has been modified; please apply your changes to the latest version and try again",
                call.resource.resource, call.name
            ))),
            FaultKind::Gone => {
                cluster.delete_object(&call.resource, &call.namespace, &call.name);
                Some(ClusterError::NotFound)
            }
            FaultKind::Lost => {
                self.losing.store(true, Ordering::SeqCst);
                None
            }
        };
        Some((kind, error))
    }

    /// The answer the collector gets to a write the server answered with `answer`: an error if
    /// the hook lost it.
    pub fn answer<T>(&self, answer: Result<T, ClusterError>) -> Result<T, ClusterError> {
        if self.losing.swap(false, Ordering::SeqCst) {
            return Err(ClusterError::Other {
                code: 0,
                message: "connection reset by peer (the request may have been served)".into(),
            });
        }
        answer
    }
}

/// Asserts that every fault that fits a verb fired on it at least once (a coverage test's
/// check), by verb and kind as [`Faults::fired`] counts them.
pub fn assert_every_fault_fired(fired: &BTreeMap<(&'static str, FaultKind), u64>) {
    for verb in [Verb::Get, Verb::List, Verb::Patch, Verb::Delete] {
        for kind in [
            FaultKind::Unavailable,
            FaultKind::Throttled,
            FaultKind::Conflict,
            FaultKind::Gone,
            FaultKind::Lost,
        ] {
            let n = fired.get(&(verb.as_str(), kind)).copied().unwrap_or_default();
            assert!(!kind.fits(verb) || n > 0, "no {kind:?} fault on a {verb:?}: {fired:?}");
        }
    }
}

/// The object a call addresses: (resource, namespace, name).
pub type CallKey = (String, String, String);

/// The [`CallKey`] of a call on `resource`'s `namespace`/`name`.
pub fn call_key(resource: &Resource, namespace: &str, name: &str) -> CallKey {
    (resource.resource.clone(), namespace.to_owned(), name.to_owned())
}

/// The cluster as the collector sees it: the [`MemoryCluster`], whose hooks judge each call
/// before it is served and may fail it, and the answer the collector gets (lost, if a fault
/// says so). The oracle judges a write before it is served, but what the collector remembers
/// of it depends on the answer: an orphaning whose finalizer removal the server refuses (or
/// whose answer is lost) is forgotten by the collector (see `OrphanedOwners`), so each PATCH's
/// outcome is told to `patched` (its object, and whether it was answered with success), for
/// the oracle to remember the orphaning only then.
pub struct Served {
    pub inner: Arc<MemoryCluster>,
    pub faults: Arc<Faults>,
    pub patched: Box<dyn Fn(CallKey, bool) + Send + Sync>,
}

impl Cluster for Served {
    crate::support::forward_to!(inner: resource_for, consistent_lists, get, list_page, record_event);

    async fn delete(
        &self,
        r: &Resource,
        ns: &str,
        name: &str,
        o: &DeleteOptions,
    ) -> Result<(), ClusterError> {
        self.faults.answer(self.inner.delete(r, ns, name, o).await)
    }

    async fn patch(
        &self,
        r: &Resource,
        ns: &str,
        name: &str,
        p: &Patch,
    ) -> Result<ObjectMeta, ClusterError> {
        let answer = self.faults.answer(self.inner.patch(r, ns, name, p).await);
        (self.patched)(call_key(r, ns, name), answer.is_ok());
        answer
    }
}
