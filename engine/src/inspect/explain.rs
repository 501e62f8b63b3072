//! Why an object is where it is: each owner as the collector classifies it and on what
//! evidence, what the collector will do next and why, and, for an object being deleted, what
//! each finalizer waits for and who removes it.
//!
//! The owners and the decision come from the graph, the absent-owner cache and the work queue,
//! as the collector would read them now (its own decision reads owners live: an owner the graph
//! shows observed may have gone since, which the next watch event tells). Finalizers are not in
//! the graph: [`explain`] reads them live, for the object and for the few dependents a
//! finalizer waits for.

use std::collections::HashSet;

use crate::cluster::{Cluster, ClusterError};
use crate::collector::{Collector, HeldDecision, Judgement, OwnerClasses, Verdict};
use crate::graph::NodeView;
use crate::identity::{Namespace, ObjectReference, OwnerRef, Uid};
use crate::meta::{FINALIZER_DELETE_DEPENDENTS, FINALIZER_ORPHAN, ObjectMeta};

/// Most dependents a finalizer's explanation reads live, and most shown a level down the
/// chain (the rest are counted).
pub const MAX_LIVE_READS: usize = 20;

/// How the collector classifies an owner reference (upstream's `classifyReferences`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OwnerState {
    /// The owner exists and is not being deleted in the foreground: the object is kept.
    Solid,
    /// The owner exists and is being deleted in the foreground (`foregroundDeletion`).
    WaitingForDependentsDeletion,
    /// The owner is absent (or another object now holds its name).
    Dangling,
    /// Not known yet: the collector reads the owner before deciding.
    Unverified,
}

/// What an [`OwnerState`] rests on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Evidence {
    /// The owner's watch delivered it, with this UID.
    Observed,
    /// The watch delivered an object with this UID under another kind or name.
    CoordinatesDiffer,
    /// A live read (GET or proof LIST) found it absent; remembered in the absent-owner cache.
    ProvenAbsent,
    /// A live read found it absent and its placeholder left the graph (a virtual delete).
    RemovedAfterRead,
    /// Only named by dependents: never observed, not read yet.
    Virtual,
    /// Its type names no resource any server serves, or is past `--max-owner-types` (held as
    /// [`ObjectType::unrepresentable`](crate::ObjectType::unrepresentable)): the collector
    /// cannot map it, so no decision goes past it.
    Unmappable,
}

/// One owner reference of the object.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OwnerExplained {
    /// The owner, in the object's namespace (or cluster-scoped, as the graph holds it).
    pub owner: ObjectReference,
    /// The reference's `blockOwnerDeletion`.
    pub block_owner_deletion: bool,
    /// Its classification.
    pub state: OwnerState,
    /// On what.
    pub evidence: Evidence,
}

/// What the collector will do next with the object, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Decision {
    /// Nothing: the reason says why.
    Nothing(&'static str),
    /// Keep it: these owners exist.
    Keep(Vec<ObjectReference>),
    /// Read these owners first (a GET, or a proof LIST of their resource); absent ones make
    /// the references dangling.
    Verify(Vec<ObjectReference>),
    /// Keep it, and remove its references to these owners (dangling or waiting).
    RemoveReferences(Vec<ObjectReference>),
    /// Delete it, every owner being gone or going: in the foreground when an owner waits for
    /// its dependents' deletion and it has dependents, else with the policy its own
    /// `orphan`/`foregroundDeletion` finalizer names, else in the background.
    Delete {
        /// Whether the delete is in the foreground (false: its own finalizers' or background).
        foreground: bool,
    },
    /// A foreground deletion: wait for these blocking dependents to go.
    WaitForBlockingDependents(usize),
    /// A foreground deletion with no blocking dependent left: remove `foregroundDeletion`.
    RemoveForegroundFinalizer,
    /// An orphaning deletion: remove the references of these many dependents, then `orphan`.
    OrphanDependents(usize),
    /// An orphaning deletion, or a step of a foreground one (its owner with no blocking
    /// dependent left, or a dependent of it showing none of its own), that waits for watchers
    /// behind the API server (a broken watch, a relist, a CRD change not yet
    /// discovered): the dependents they have not delivered would be missed (see
    /// [`LaggingWatchers`](crate::collector::LaggingWatchers)).
    WaitForWatchers {
        /// The decision that waits.
        decision: HeldDecision,
        /// The watchers it waits for, each with how long it has been behind so far.
        behind: Vec<(String, std::time::Duration)>,
    },
    /// The decision reads the dependents set, which is complete only once every resource has
    /// synced: it waits for that.
    DeferredUntilSynced,
}

/// A dependent a finalizer waits for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Waiting {
    /// The dependent.
    pub object: ObjectReference,
    /// Being deleted already.
    pub being_deleted: bool,
    /// Its own finalizers, read live for the dependents a finalizer waits for directly (empty
    /// if the read failed, and further down the chain, which comes from the graph alone).
    pub finalizers: Vec<String>,
    /// Its own blocking dependents, down the chain (at most [`CHAIN_DEPTH`] levels and
    /// [`MAX_LIVE_READS`] a level): what holds it in turn once it is deleted in the
    /// foreground, as the collector deletes a dependent of a foreground deletion that has
    /// dependents.
    pub blocking: Vec<Waiting>,
    /// How many blocking dependents it has in all.
    pub blocking_total: usize,
}

/// Levels of blocking dependents shown below the dependents a finalizer waits for.
pub const CHAIN_DEPTH: usize = 4;

/// The blocking dependents of `uid`, down the chain, from the graph (`seen` stops cycles).
fn chain(
    graph: &crate::Graph,
    uid: Uid,
    depth: usize,
    seen: &mut HashSet<Uid>,
) -> (Vec<Waiting>, usize) {
    let blocking = graph.blocking_dependents(uid);
    let total = blocking.len();
    if depth == 0 {
        return (Vec::new(), total);
    }
    let mut out = Vec::new();
    for dep in blocking.into_iter().take(MAX_LIVE_READS) {
        let Some(d) = graph.node(dep) else { continue };
        if !seen.insert(dep) {
            continue;
        }
        let (blocking, blocking_total) = chain(graph, dep, depth - 1, seen);
        out.push(Waiting {
            object: d.identity,
            being_deleted: d.being_deleted,
            finalizers: Vec::new(),
            blocking,
            blocking_total,
        });
    }
    (out, total)
}

/// One finalizer of an object being deleted.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FinalizerExplained {
    /// The finalizer's name, e.g. `foregroundDeletion`.
    pub name: String,
    /// The collector's (`foregroundDeletion`, `orphan`): it removes it; otherwise another
    /// controller's, which must remove it itself.
    pub garbage_collectors: bool,
    /// What it waits for: for `foregroundDeletion` the blocking dependents still present, for
    /// `orphan` the dependents still referring to the object (at most [`MAX_LIVE_READS`]).
    pub waiting_for: Vec<Waiting>,
    /// How many it waits for in all.
    pub waiting_for_total: usize,
}

/// The answer of [`explain`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Explanation {
    /// The object, as the graph holds it.
    pub object: ObjectReference,
    /// Observed by a watch (false: only named as an owner).
    pub observed: bool,
    /// Has a deletionTimestamp (as last observed).
    pub being_deleted: bool,
    /// Its owners.
    pub owners: Vec<OwnerExplained>,
    /// What the collector will do next.
    pub decision: Decision,
    /// Failed attempts on it so far, retried with backoff.
    pub retries: u32,
    /// Why the last attempt failed, while it is retried.
    pub last_error: Option<String>,
    /// The collector has not synced every resource yet.
    pub warming_up: bool,
    /// Its finalizers, read live, when it is being deleted (empty otherwise, or if the read
    /// failed: see `live_read_error`).
    pub finalizers: Vec<FinalizerExplained>,
    /// Why a live read failed, if one did.
    pub live_read_error: Option<String>,
}

/// Explains the object `uid` (see the module docs), reading finalizers through `cluster`;
/// `None` if the graph does not hold it.
pub async fn explain<C: Cluster, R: Cluster>(
    collector: &Collector<C>,
    cluster: &R,
    uid: Uid,
) -> Option<Explanation> {
    let graph = collector.graph();
    let node = graph.node(uid)?;
    let owners: Vec<OwnerExplained> =
        node.owners.iter().map(|o| owner(collector, &node, o)).collect();
    let warming_up = collector.is_warming_up();
    // The memory of orphaned owners reads the object's creationTimestamp, which the graph does
    // not keep: read live, as attemptToDelete reads it, when it may be asked. Not read, it is
    // not known: should an owner be remembered between this check and the judgement, explain
    // says the decision waits on it rather than guess.
    let mut live_read_error = None;
    let mut created = Err(());
    let remembered = collector.orphaned_owners().remembers_any(owners.iter().map(|o| o.owner.uid));
    if !node.is_virtual && !node.being_deleted && remembered {
        match read_live(cluster, &node.identity).await {
            Ok(meta) => created = Ok(meta.creation_time),
            Err(e) => {
                live_read_error = Some(format!("cannot read {}: {e}", node.identity));
                created = Err(());
            }
        }
    }
    let decision = decide(collector, &node, &owners, warming_up, created);
    let retries = collector.attempt_to_delete_queue().num_requeues(&node.key());
    let mut out = Explanation {
        object: node.identity.clone(),
        observed: !node.is_virtual,
        being_deleted: node.being_deleted,
        owners,
        decision,
        retries,
        last_error: collector.last_error(uid),
        warming_up,
        finalizers: Vec::new(),
        live_read_error,
    };
    if node.being_deleted {
        match read_finalizers(cluster, &node.identity).await {
            Ok(finalizers) => {
                for name in finalizers {
                    out.finalizers.push(finalizer(collector, cluster, &node, name).await);
                }
            }
            Err(e) => out.live_read_error = Some(format!("cannot read {}: {e}", node.identity)),
        }
    }
    Some(out)
}

/// Classifies `owner` of `item` from the graph and the absent-owner cache, as `isDangling`
/// would find it.
fn owner<C: Cluster>(
    collector: &Collector<C>,
    item: &NodeView,
    owner: &OwnerRef,
) -> OwnerExplained {
    let block_owner_deletion = owner.block_owner_deletion == Some(true);
    let in_cache = [Namespace::CLUSTER, item.identity.namespace]
        .into_iter()
        .any(|ns| collector.absent_owners().has(&ObjectReference::from_owner(owner, ns)));
    let node = collector.graph().node(owner.uid);
    let namespace = node.as_ref().map_or(item.identity.namespace, |n| n.identity.namespace);
    let (state, evidence) = match node {
        _ if owner.ty == crate::ObjectType::unrepresentable() => {
            (OwnerState::Unverified, Evidence::Unmappable)
        }
        _ if in_cache => (OwnerState::Dangling, Evidence::ProvenAbsent),
        None => (OwnerState::Dangling, Evidence::RemovedAfterRead),
        Some(n) if n.is_virtual => (OwnerState::Unverified, Evidence::Virtual),
        Some(n) if !n.identity.matches_coordinates(owner) => {
            (OwnerState::Dangling, Evidence::CoordinatesDiffer)
        }
        Some(n) if n.deleting_dependents => {
            (OwnerState::WaitingForDependentsDeletion, Evidence::Observed)
        }
        Some(_) => (OwnerState::Solid, Evidence::Observed),
    };
    OwnerExplained {
        owner: ObjectReference::from_owner(owner, namespace),
        block_owner_deletion,
        state,
        evidence,
    }
}

/// The collector's next step on `node`, as `attemptToDeleteItem` and
/// `processDeletingDependentsItem` would take it on the graph's view (and `created`, the
/// object's creationTimestamp as a live read found it, if read; `Err` if that read failed).
fn decide<C: Cluster>(
    collector: &Collector<C>,
    node: &NodeView,
    owners: &[OwnerExplained],
    warming_up: bool,
    created: Result<Option<i64>, ()>,
) -> Decision {
    let graph = collector.graph();
    if node.is_virtual {
        return Decision::Verify(vec![node.identity.clone()]);
    }
    if node.being_deleted && !node.deleting_dependents {
        if node.has_gc_finalizers {
            // Being deleted with a GC finalizer and not foreground: `orphan`.
            if warming_up {
                return Decision::DeferredUntilSynced;
            }
            let behind = collector.watchers_holding();
            if !behind.is_empty() {
                return Decision::WaitForWatchers { decision: HeldDecision::Orphaning, behind };
            }
            return Decision::OrphanDependents(graph.dependents_len(node.identity.uid));
        }
        return Decision::Nothing(
            "being deleted: the API server removes it once its finalizers are gone",
        );
    }
    if node.deleting_dependents {
        if warming_up {
            return Decision::DeferredUntilSynced;
        }
        return match graph.blocking_dependents(node.identity.uid).len() {
            0 => {
                let behind = collector.watchers_holding();
                if behind.is_empty() {
                    Decision::RemoveForegroundFinalizer
                } else {
                    let decision = HeldDecision::ForegroundDeletion;
                    Decision::WaitForWatchers { decision, behind }
                }
            }
            n => Decision::WaitForBlockingDependents(n),
        };
    }
    if owners.is_empty() {
        return Decision::Nothing("no owner references: never garbage");
    }
    let with = |state: OwnerState| -> Vec<ObjectReference> {
        owners.iter().filter(|o| o.state == state).map(|o| o.owner.clone()).collect()
    };
    let solid = with(OwnerState::Solid);
    let unverified = with(OwnerState::Unverified);
    let waiting = with(OwnerState::WaitingForDependentsDeletion);
    let dangling = with(OwnerState::Dangling);
    if owners.iter().any(|o| o.evidence == Evidence::Unmappable) {
        return Decision::Nothing(
            "an owner reference names a type no server serves (or one past --max-owner-types): the collector reads the object live and stops at that reference, keeping it and retrying",
        );
    }
    if !unverified.is_empty() {
        // With a solid owner too the object stays; the read only decides whether the
        // unverified references are removed.
        return Decision::Verify(unverified);
    }
    // The collector's memory of the owners it orphaned (`collector/orphaned_owners.rs`),
    // consulted as `attemptToDelete` consults it, after classifying.
    let dangling_uids: Vec<Uid> = dangling.iter().map(|o| o.uid).collect();
    let owner_uids = owners.iter().map(|o| o.owner.uid);
    let judged = collector.orphaned_owners().peek_judgement(
        owner_uids,
        &dangling_uids,
        created.ok().flatten(),
    );
    match judged {
        Judgement::RemoveReferences | Judgement::CreatedAfterDeletion if created.is_err() => {
            return Decision::Nothing(
                "its owners were orphaned and are gone: whether it is orphaned or collected depends on its creationTimestamp, which was not read",
            );
        }
        Judgement::Wait => {
            return Decision::Nothing(
                "an owner is gone while the collector orphans its dependents: decided again once that ends",
            );
        }
        // Owners the collector orphaned, all gone: their references go, the write their
        // orphaning would have made.
        Judgement::RemoveReferences => return Decision::RemoveReferences(dangling),
        // Created after their deletion: upstream's decision, below.
        Judgement::CreatedAfterDeletion | Judgement::Upstream => {}
    }
    let classes = OwnerClasses {
        solid: solid.len(),
        dangling: dangling.len(),
        waiting_for_dependents_deletion: waiting.len(),
    };
    match classes.verdict(node.dependents_len != 0, node.has_gc_finalizers, warming_up) {
        Verdict::Keep => Decision::Keep(solid),
        Verdict::RemoveReferences => {
            Decision::RemoveReferences(dangling.into_iter().chain(waiting).collect())
        }
        Verdict::DeferUntilSynced => Decision::DeferredUntilSynced,
        Verdict::Delete { foreground: false } if !waiting.is_empty() => {
            // A dependent of a foreground deletion showing no dependents of its own waits for
            // the watchers behind (see `HeldDecision::ForegroundDeletion`).
            let behind = collector.watchers_holding();
            if behind.is_empty() {
                Decision::Delete { foreground: false }
            } else {
                Decision::WaitForWatchers { decision: HeldDecision::ForegroundDeletion, behind }
            }
        }
        Verdict::Delete { foreground } => Decision::Delete { foreground },
    }
}

async fn read_finalizers<R: Cluster>(
    cluster: &R,
    object: &ObjectReference,
) -> Result<Vec<String>, String> {
    read_live(cluster, object).await.map(|meta| meta.finalizers)
}

/// `object` as a live GET finds it; "gone" if another object holds its name.
async fn read_live<R: Cluster>(
    cluster: &R,
    object: &ObjectReference,
) -> Result<ObjectMeta, String> {
    let resource = cluster.resource_for(object.ty).map_err(|e| e.to_string())?;
    let namespace = if resource.namespaced { object.namespace.as_str() } else { "" };
    match cluster.get(&resource, namespace, &object.name).await {
        Ok(meta) if meta.uid == object.uid.to_string() => Ok(meta),
        Ok(_) | Err(ClusterError::NotFound) => Err("gone".into()),
        Err(e) => Err(e.to_string()),
    }
}

/// One finalizer of `node`, with what it waits for.
async fn finalizer<C: Cluster, R: Cluster>(
    collector: &Collector<C>,
    cluster: &R,
    node: &NodeView,
    name: String,
) -> FinalizerExplained {
    let graph = collector.graph();
    let uid = node.identity.uid;
    let waiting_on: Vec<Uid> = match name.as_str() {
        FINALIZER_DELETE_DEPENDENTS => graph.blocking_dependents(uid),
        FINALIZER_ORPHAN => {
            let mut seen = HashSet::new();
            graph.dependents(uid).into_iter().map(|d| d.uid).filter(|u| seen.insert(*u)).collect()
        }
        _ => Vec::new(),
    };
    let garbage_collectors = name == FINALIZER_DELETE_DEPENDENTS || name == FINALIZER_ORPHAN;
    let mut waiting_for = Vec::new();
    let mut seen = HashSet::from([uid]);
    for dep in waiting_on.iter().take(MAX_LIVE_READS) {
        let Some(d) = graph.node(*dep) else { continue };
        let finalizers = read_finalizers(cluster, &d.identity).await.unwrap_or_default();
        seen.insert(*dep);
        let (blocking, blocking_total) = chain(graph, *dep, CHAIN_DEPTH, &mut seen);
        waiting_for.push(Waiting {
            being_deleted: d.being_deleted,
            object: d.identity,
            finalizers,
            blocking,
            blocking_total,
        });
    }
    FinalizerExplained {
        name,
        garbage_collectors,
        waiting_for,
        waiting_for_total: waiting_on.len(),
    }
}
