//! Bulk proof of absence: one paged, consistent LIST of a resource proves absent every
//! unverified virtual owner of that resource it does not hold, where upstream spends a GET per
//! owner (kubernetes#96752: the collector's two calls per deletion halve the rate at which a
//! cluster can delete Pods).
//!
//! # Why a LIST proves what a GET's 404 proves (DESIGN.md, "Absence")
//!
//! A virtual node stands for an owner (UID `u`, at coordinates `c`: resource, namespace, name)
//! that some dependent's ownerReference names and no watch has shown. Upstream verifies it with
//! a live GET of `c`: 404, or another UID there, and the owner is absent for ever, because the
//! API server assigns UIDs at creation and never reuses them, and names are immutable.
//!
//! A LIST proves the same fact for every virtual node of one resource at once, when:
//! * **it is consistent**: read from etcd (no `resourceVersion`), never from the watch cache,
//!   which may lag; the pages of one continue chain are one snapshot of a revision at least as
//!   new as the first page's request ([`Cluster::list_page`]);
//! * **it started after the node was in the graph**: the node exists because a dependent naming
//!   `u` was observed, so `u` was created (if ever) before that dependent was written, which is
//!   before the list began. An object `u` at `c` alive when the list began is on its pages;
//!   absent from them, `u` is gone (or never was) and cannot come back. A node offered after a
//!   list began waits for the next one ([`Collector::prove_absences`] takes its set before the
//!   first page);
//! * **the coordinates are the GET's**: the node is looked up by the same resource (the
//!   restMapper's, as the GET's) and the same namespace (none for cluster-scoped resources) and
//!   name, and its UID compared, so the list answers exactly what the GET would have.
//!
//! The answer then takes upstream's own path: a virtual delete event for the node's identity,
//! which the graph builder applies as it applies a GET's 404 (the identity into the
//! absent-owner cache, the matching dependents queued).
//!
//! # What a list cannot prove, and goes back to the GET
//! Nodes whose kind maps to no resource, whose namespace does not fit the resource's scope, or
//! whose resource an aggregated API server serves ([`Cluster::consistent_lists`]: its lists
//! make no promise of consistency) are never offered; the node's coordinates found with its UID (present), a node re-identified
//! or observed since it was offered, and every node of a list that failed, go back to the
//! attemptToDelete queue, to upstream's per-owner GET, and are not offered again. A resource
//! whose list failed is not listed again for [`RETRY_LIST_AFTER`].
//!
//! # When a list is worth it
//! A list of `n` objects costs `n / 500` calls; GETs cost one per pending owner. A resource is
//! listed as soon as its pending owners are at least [`OWNERS_PER_PAGE`] times its pages (at
//! most 1/20 of a call per owner), during warm-up once only: that list starts the deletions
//! (320 owners of 7,900 ReplicaSets keep the workers busy for 8 s at kube-controller-manager's
//! default budget of 40 calls/s), and the owners found after it wait until the graph is synced,
//! when every dependent is in the graph and one list proves them all. After warm-up, owners
//! wait until offers stop for the settle time (or [`ProofWaits::max_wait`]), when the cheaper of a list and
//! the GETs is taken. Listing more often for fewer owners would start deletions sooner, but the
//! collector is bound by its API budget, and every extra page delays the last deletion as much
//! as it hastens the first.
//!
//! # Rounds side by side
//! [`Collector::prove_absences`] may run beside itself (the controller starts a round every
//! tick without waiting for the last): a resource's list holds only that resource's owners.
//! One list of a resource at a time: owners offered while its list is under way wait for the
//! next (its pages began before them, so they could prove nothing of them anyway).

use std::collections::{HashMap, HashSet};
use std::panic::AssertUnwindSafe;
use std::time::{Duration, Instant};

use futures_util::FutureExt;

use super::{Collector, REASON_VERIFY};
use crate::cluster::{Cluster, ClusterError, Resource};
use crate::graph::{NodeKey, NodeView};
use crate::identity::{ObjectReference, ObjectType};

/// Objects per page of a proof list (client-go's pager default, as the watchers' lists).
pub const PAGE_SIZE: u32 = 500;

/// A resource is listed as soon as this many pending owners would share each page.
pub const OWNERS_PER_PAGE: usize = 20;

/// How long a resource whose list failed is left to the GETs.
pub const RETRY_LIST_AFTER: Duration = Duration::from_secs(30);

/// How long owners wait for others to share a list (the controller's values are the
/// [`Default`]; tests may shorten them).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProofWaits {
    /// After warm-up, how long offers must have stopped before the waiting owners are settled
    /// (listed, or sent to the GET).
    pub settle: Duration,
    /// After warm-up, the longest an owner waits (counted from the end of warm-up for owners
    /// offered before it).
    pub max_wait: Duration,
    /// During warm-up, the longest an owner waits for the sync: past it, the owners of a
    /// resource whose list is in the graph are settled as after warm-up, and the others go to
    /// the GET. This is what keeps early collection alive when one resource never syncs
    /// (warm-up then lasts `--initial-sync-timeout`); a normal warm-up ends well before it.
    pub warm_up_max_wait: Duration,
}

impl Default for ProofWaits {
    fn default() -> ProofWaits {
        ProofWaits {
            settle: Duration::from_millis(200),
            max_wait: Duration::from_secs(2),
            warm_up_max_wait: Duration::from_secs(10),
        }
    }
}

impl ProofWaits {
    /// No waiting: every round settles every owner it can (tests).
    pub const NONE: ProofWaits = ProofWaits {
        settle: Duration::ZERO,
        max_wait: Duration::ZERO,
        warm_up_max_wait: Duration::ZERO,
    };
}

/// An owner waiting for a proof.
#[derive(Clone, Debug)]
struct Pending {
    key: NodeKey,
    identity: ObjectReference,
    /// Why its item was queued (restored if it goes back to the queue).
    reasons: u8,
}

/// The prover's state (behind the collector's lock).
#[derive(Default, Debug)]
pub(super) struct Proofs {
    /// Owners waiting for a list of their resource, and when the first of them came.
    pending: HashMap<Resource, (Instant, Vec<Pending>)>,
    /// When the latest owner was offered.
    last_offer: Option<Instant>,
    /// Items handed back to the GET: not offered again.
    declined: HashSet<NodeKey>,
    /// Object types whose watcher has its list in the graph, with their object count.
    listed: HashMap<ObjectType, usize>,
    /// Sizes learnt from proof lists, for resources no watcher lists under that version.
    sizes: HashMap<Resource, usize>,
    /// Resources whose list failed, and until when they are left to the GETs.
    failed_until: HashMap<Resource, Instant>,
    /// `declined` is pruned when it grows past this.
    prune_above: usize,
    /// Resources whose proof list is under way: their owners offered since wait for the next
    /// one (a round runs beside the others: a long list holds only its own resource's owners).
    listing: HashSet<Resource>,
    /// Resources listed during the current warm-up (one early list each).
    listed_in_warm_up: HashSet<Resource>,
    /// Whether the last round ran during warm-up, and when warm-up was last seen ending.
    warming_up: bool,
    warm_up_ended: Option<Instant>,
}

/// `declined` is first pruned past this many entries.
const PRUNE_DECLINED_ABOVE: usize = 4096;

impl Proofs {
    pub(super) fn new() -> Proofs {
        Proofs { prune_above: PRUNE_DECLINED_ABOVE, ..Proofs::default() }
    }
}

/// What one [`Collector::prove_absences`] round did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ProofRound {
    /// Resources listed.
    pub lists: usize,
    /// LIST calls made (pages).
    pub pages: usize,
    /// Owners proven absent (a virtual delete event each).
    pub proven_absent: usize,
    /// Owners handed back to the per-owner GET.
    pub handed_back: usize,
    /// Owners still waiting for a list.
    pub waiting: usize,
}

/// A resource's proof list under way (in [`Proofs::listing`] until dropped, however the list
/// ends: done, failed, panicked or cancelled).
struct Listing<'a> {
    proofs: &'a crate::sync::Mutex<Proofs>,
    resource: Resource,
}

impl Drop for Listing<'_> {
    fn drop(&mut self) {
        self.proofs.lock().listing.remove(&self.resource);
    }
}

/// The coordinates a GET of `identity` in `resource` would address.
fn coordinates(resource: &Resource, identity: &ObjectReference) -> (String, String) {
    let namespace = if resource.namespaced { identity.namespace.as_str() } else { "" };
    (namespace.to_owned(), identity.name.clone())
}

impl<C: Cluster> Collector<C> {
    /// Takes a virtual node's verification for the next proof list of its resource, if a list
    /// can answer it (see the module docs); `false` leaves it to the GET.
    pub(super) fn offer_for_proof(&self, node: &NodeView, reasons: u8) -> bool {
        if !self.options.bulk_absence_proof {
            return false;
        }
        let now = Instant::now();
        let mut proofs = self.proofs.lock();
        if proofs.declined.remove(&node.key()) || !node.is_virtual {
            return false;
        }
        if !super::classify::is_addressable(&node.identity.name) {
            // No list can answer for it either (see `is_addressable`): the GET path keeps it.
            return false;
        }
        let Ok(resource) = self.cluster.resource_for(node.identity.ty) else { return false };
        if resource.namespaced && node.identity.namespace.is_cluster() {
            // Upstream's namespacedOwnerOfClusterScopedObject: the GET path reports it.
            return false;
        }
        if !self.cluster.consistent_lists(&resource) {
            // An aggregated API server's list is no proof (see `Cluster::consistent_lists`).
            return false;
        }
        if proofs.failed_until.get(&resource).is_some_and(|until| *until > now) {
            return false;
        }
        proofs.last_offer = Some(now);
        let entry = proofs.pending.entry(resource).or_insert_with(|| (now, Vec::new()));
        entry.1.push(Pending { key: node.key(), identity: node.identity.clone(), reasons });
        true
    }

    /// Owners waiting for a proof list.
    pub fn pending_proofs(&self) -> usize {
        self.proofs.lock().pending.values().map(|(_, p)| p.len()).sum()
    }

    /// Records that the watcher of `ty` has its list in the graph, with `objects` objects (the
    /// graph builder calls it): its virtual owners may be listed during warm-up, and the list's
    /// cost is known.
    pub fn note_listed(&self, ty: ObjectType, objects: usize) {
        self.proofs.lock().listed.insert(ty, objects);
    }

    /// Records that the watcher of `ty` stopped.
    pub fn note_unlisted(&self, ty: ObjectType) {
        self.proofs.lock().listed.remove(&ty);
    }

    /// Runs one round of proofs: lists the resources whose waiting owners make a list worth it
    /// (see the module docs), proves absent the owners the lists do not hold, and hands the
    /// rest back to the GET. `waits` says how long owners wait for others to share a list
    /// warm-up stop waiting. Call it repeatedly (the controller does, every few tens of
    /// milliseconds); with nothing pending it returns at once.
    pub async fn prove_absences(&self, waits: ProofWaits) -> ProofRound {
        let mut round = ProofRound::default();
        let (to_list, to_hand_back) = self.choose_lists(waits, &mut round);
        // Marked listing by `choose_lists`; unmarked when each list's future ends or is
        // dropped. The guards exist before anything else runs, so that nothing (a panic
        // handing owners back, say) can leave a resource marked for ever.
        let to_list: Vec<(Listing<'_>, Resource, Vec<Pending>)> = to_list
            .into_iter()
            .map(|(resource, entries)| {
                (Listing { proofs: &self.proofs, resource: resource.clone() }, resource, entries)
            })
            .collect();
        self.hand_back(&to_hand_back);
        round.handed_back += to_hand_back.len();
        let lists = to_list.into_iter().map(|(listing, resource, entries)| async move {
            let _listing = listing;
            // The owners' items were left by the queue when offered: a list that panics
            // must hand them back, or nothing would ever verify them again (their dependents
            // never collected), and the round's other lists go on.
            let owners = entries.clone();
            let proving = self.prove_by_list(resource.clone(), entries);
            AssertUnwindSafe(proving).catch_unwind().await.unwrap_or_else(|panic| {
                let panic = super::panic_message(&panic);
                tracing::error!(%resource, panic, owners = owners.len(), "a proof list panicked; verifying its owners one by one");
                self.give_up_listing(resource, &owners);
                ProofRound { handed_back: owners.len(), ..ProofRound::default() }
            })
        });
        for done in futures_util::future::join_all(lists).await {
            round.lists += usize::from(done.pages != 0);
            round.pages += done.pages;
            round.proven_absent += done.proven_absent;
            round.handed_back += done.handed_back;
        }
        round
    }

    /// Under the lock, decides which resources to list now and which owners go to the GET.
    #[allow(clippy::type_complexity)]
    fn choose_lists(
        &self,
        waits: ProofWaits,
        round: &mut ProofRound,
    ) -> (Vec<(Resource, Vec<Pending>)>, Vec<Pending>) {
        let now = Instant::now();
        let mut proofs = self.proofs.lock();
        // Under the lock: rounds overlap, and one that read an older value could record the
        // warm-up's end before another reads the earlier state back.
        let warming_up = self.is_warming_up();
        if proofs.declined.len() > proofs.prune_above {
            // Items handed back whose node left the graph (or was observed) before they ran
            // again are never offered again: forget them.
            let graph = &self.graph;
            proofs.declined.retain(|k| {
                graph.node(k.uid).is_some_and(|n| n.incarnation == k.incarnation && n.is_virtual)
            });
            proofs.prune_above = (proofs.declined.len() * 2).max(PRUNE_DECLINED_ABOVE);
        }
        if !warming_up {
            proofs.listed_in_warm_up.clear();
            if proofs.warming_up {
                proofs.warm_up_ended = Some(now);
            }
        }
        proofs.warming_up = warming_up;
        let ended = proofs.warm_up_ended;
        let quiet = proofs.last_offer.is_none_or(|t| now.duration_since(t) >= waits.settle);
        let (mut to_list, mut to_hand_back) = (Vec::new(), Vec::<Pending>::new());
        let resources: Vec<Resource> = proofs.pending.keys().cloned().collect();
        let graph = &self.graph;
        for resource in resources {
            let (since, waiting) = {
                let (since, entries) = &proofs.pending[&resource];
                (*since, entries.len())
            };
            if proofs.listing.contains(&resource) {
                // Offered after that list's first page: its pages are no proof for them.
                round.waiting += waiting;
                continue;
            }
            let synced = proofs.listed.get(&resource.object_type()).copied();
            let size = synced.or_else(|| proofs.sizes.get(&resource).copied());
            let pages = size.map(|n| n.div_ceil(PAGE_SIZE as usize).max(1));
            let failed = proofs.failed_until.get(&resource).is_some_and(|until| *until > now);
            // During warm-up only resources whose list is in the graph: the others' virtual
            // owners may simply not be observed yet.
            let may_list = !failed && (synced.is_some() || !warming_up);
            let listable =
                pages.is_some() && !(warming_up && proofs.listed_in_warm_up.contains(&resource));
            let worth_listing_for =
                |owners: usize| listable && pages.is_some_and(|p| owners >= OWNERS_PER_PAGE * p);
            // Owners waiting since before the sync have waited for the sync, not for the
            // settle: the longest wait counts from whichever came last.
            let waited_since = ended.map_or(since, |e| e.max(since));
            let flush = if warming_up {
                now.duration_since(since) >= waits.warm_up_max_wait
            } else {
                quiet || now.duration_since(waited_since) >= waits.max_wait
            };
            let may_list_now = may_list && worth_listing_for(waiting);
            if warming_up && !(failed || flush || may_list_now) {
                // Nothing can be decided for these owners this round, however many of them
                // turn out observed below (that only lowers the count): skip that look-up of
                // every one of them in the graph. At 10M objects, repeated every tick for
                // owners whose resource was still listing, it cost a second of CPU during
                // warm-up. Observed owners then go back to their queue when a decision is
                // taken (at the latest at the sync, or after `warm_up_max_wait`), with the
                // same outcome: during warm-up upstream decides nothing at all.
                round.waiting += waiting;
                continue;
            }
            let count = {
                let (_, entries) = proofs.pending.get_mut(&resource).expect("present");
                // Owners the informers have observed since they were offered (their resource's
                // list reached the graph meanwhile) need no proof: their items go back, to be
                // skipped or decided on the object. Without this a list would be spent on owners
                // that all exist (7,900 Deployments at 100k objects, once).
                let (still, observed): (Vec<Pending>, Vec<Pending>) =
                    std::mem::take(entries).into_iter().partition(|p| {
                        graph
                            .node(p.key.uid)
                            .is_some_and(|n| n.incarnation == p.key.incarnation && n.is_virtual)
                    });
                *entries = still;
                to_hand_back.extend(observed);
                entries.len()
            };
            if count == 0 {
                proofs.pending.remove(&resource);
                continue;
            }
            let worth_it = worth_listing_for(count);
            let decision = if failed {
                Some(false)
            } else if may_list && worth_it {
                Some(true)
            } else if flush && warming_up && synced.is_none() {
                // A warm-up that outlasts the wait (a resource that never syncs holds it open):
                // these owners' own list is not in the graph, so they take the GET, as they
                // would without proofs.
                Some(false)
            } else if flush {
                // The cheaper of one list and a GET per owner (unknown size: list, and learn).
                Some(pages.is_none_or(|p| p <= count))
            } else {
                None
            };
            match decision {
                Some(list) => {
                    let (_, entries) = proofs.pending.remove(&resource).expect("present");
                    if list {
                        if warming_up {
                            proofs.listed_in_warm_up.insert(resource.clone());
                        }
                        to_list.push((resource, entries));
                    } else {
                        for p in &entries {
                            proofs.declined.insert(p.key);
                        }
                        to_hand_back.extend(entries);
                    }
                }
                None => round.waiting += count,
            }
        }
        // Marked at the end, all at once (see `prove_absences` for the guards that unmark).
        proofs.listing.extend(to_list.iter().map(|(resource, _)| resource.clone()));
        (to_list, to_hand_back)
    }

    /// Puts owners back on the attemptToDelete queue for the GET, with the reasons they came
    /// with.
    fn hand_back(&self, entries: &[Pending]) {
        for p in entries {
            self.enqueue_likely_garbage(p.key, p.reasons | REASON_VERIFY);
        }
    }

    /// A list of `resource` failed: counted, no list of it for a while, and `entries` handed
    /// back to the GET, which they take next (not offered again).
    fn give_up_listing(&self, resource: Resource, entries: &[Pending]) {
        self.stats.proof_lists_failed.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let mut proofs = self.proofs.lock();
        proofs.failed_until.insert(resource, Instant::now() + RETRY_LIST_AFTER);
        for p in entries {
            proofs.declined.insert(p.key);
        }
        drop(proofs);
        self.hand_back(entries);
    }

    /// Lists `resource` and settles each of `entries` (taken before the first page: see the
    /// module docs).
    async fn prove_by_list(&self, resource: Resource, entries: Vec<Pending>) -> ProofRound {
        let mut done = ProofRound::default();
        if !self.cluster.consistent_lists(&resource) {
            // Checked again: its API moved to an aggregated server (a new discovery) since
            // these owners were offered.
            self.hand_back(&entries);
            done.handed_back = entries.len();
            return done;
        }
        let mut found: HashMap<(String, String), Option<String>> =
            entries.iter().map(|p| (coordinates(&resource, &p.identity), None)).collect();
        let mut token: Option<String> = None;
        let mut objects = 0usize;
        loop {
            done.pages += 1;
            self.stats.proof_pages.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let outcome = match self.cluster.list_page(&resource, token.as_deref(), PAGE_SIZE).await
            {
                // An item out of the resource's scope (a namespaced one without namespace, or
                // the reverse: a broken server or proxy) would sit at other coordinates than
                // its owner's GET, and every owner waiting at the right ones would seem absent.
                Ok(page)
                    if page.items.iter().any(|o| o.namespace.is_empty() == resource.namespaced) =>
                {
                    Err(ClusterError::Other {
                        code: 0,
                        message: "a listed item's namespace does not match its resource's scope"
                            .into(),
                    })
                }
                Ok(page) => {
                    objects += page.items.len();
                    for o in page.items {
                        if let Some(slot) = found.get_mut(&(o.namespace, o.name)) {
                            *slot = Some(o.uid);
                        }
                    }
                    match page.continue_token {
                        // A server that hands back the token it was given would page for ever.
                        Some(t) if token.as_deref() == Some(t.as_str()) => {
                            Err(ClusterError::Other {
                                code: 0,
                                message: "the server returned the same continue token twice".into(),
                            })
                        }
                        Some(t) if !t.is_empty() => {
                            token = Some(t);
                            Ok(())
                        }
                        _ => break,
                    }
                }
                Err(e) => Err(e),
            };
            if let Err(e) = outcome {
                // An expired continue token (410), a missing list verb, a transport error:
                // nothing is proven; every owner goes to the GET.
                tracing::warn!(%resource, error = %e, owners = entries.len(), "cannot list to prove owners absent; verifying them one by one");
                self.give_up_listing(resource, &entries);
                done.handed_back = entries.len();
                return done;
            }
        }
        self.proofs.lock().sizes.insert(resource.clone(), objects);
        if !self.cluster.consistent_lists(&resource) {
            // Discovery found the group served by an aggregated server while the list ran: its
            // answer proves nothing (see `Cluster::consistent_lists`).
            tracing::debug!(%resource, "no longer consistently listed; verifying its owners one by one");
            self.give_up_listing(resource, &entries);
            done.handed_back = entries.len();
            return done;
        }
        let mut back = Vec::new();
        for p in entries {
            let current = self
                .graph
                .node(p.key.uid)
                .is_some_and(|n| n.incarnation == p.key.incarnation && n.is_virtual);
            if !current {
                // Observed or re-identified since it was offered: the worker decides what is
                // left (an observed node's item is skipped or decided on its own state).
                back.push(p);
                continue;
            }
            if self.cluster.resource_for(p.identity.ty).ok().as_ref() != Some(&resource) {
                // Discovery maps the owner's kind elsewhere now (or nowhere): the list answered
                // for a resource a GET made now would not read.
                back.push(p);
                continue;
            }
            let uid = p.identity.uid.to_string();
            match &found[&coordinates(&resource, &p.identity)] {
                Some(listed) if *listed == uid => {
                    // Present: the GET path reads it and decides on its owners.
                    self.proofs.lock().declined.insert(p.key);
                    back.push(p);
                }
                _ => {
                    tracing::trace!(owner = %p.identity, "a consistent list does not hold the owner, generating a virtual delete event");
                    self.stats.proven_absent.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    self.enqueue_virtual_delete_event(&p.identity);
                    // Settled: its backoff, kept while the prover held it, goes.
                    self.attempt_to_delete.forget(&p.key);
                    done.proven_absent += 1;
                }
            }
        }
        self.hand_back(&back);
        done.handed_back = back.len();
        tracing::debug!(%resource, pages = done.pages, objects, proven_absent = done.proven_absent, handed_back = done.handed_back, "proof list done");
        done
    }
}
