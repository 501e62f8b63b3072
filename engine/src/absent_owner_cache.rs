//! The cache of owners verified absent (upstream's `ReferenceCache`, `uid_cache.go`); GC-SPEC.md §1.4.
//!
//! When a worker's live GET of an owner answers 404 (or finds another UID under that name), the
//! owner's identity is added here; later dependents naming the same identity skip the GET and
//! treat the reference as dangling. The graph builder adds the identity of every owner it sees
//! deleted, and the collector consults the cache in `isDangling`.
//!
//! The key is the owner's whole [`ObjectReference`]: its four coordinates *and* a namespace
//! (the dependent's namespace for namespaced owners, empty for cluster-scoped ones). Upstream
//! keyed by UID alone until v1.19; PR #92743 (v1.20, fixing #65200) moved to coordinates plus
//! namespace so that an invalid reference in one namespace (or of another kind with the same
//! UID) cannot make a valid owner elsewhere look absent. `controller` and `blockOwnerDeletion`
//! are not part of the key, so two references differing only in them share an entry.
//!
//! # Invariants
//!
//! * At most [`AbsentOwnerCache::capacity`] entries; inserting beyond it evicts the least
//!   recently used one. Entries are never removed otherwise.
//! * [`has`](AbsentOwnerCache::has) is an LRU *get*: a hit promotes the entry, a miss changes
//!   nothing. [`add`](AbsentOwnerCache::add) inserts or promotes.
//!
//! # Concurrency
//!
//! Shared by the graph builder and every worker; each method takes one mutex (from
//! `crate::sync`) for its whole duration, so the cache is linearizable.
//!
//! # Upstream
//!
//! `NewReferenceCache(500)` in `NewGarbageCollector`; `Has` and `Add` in `uid_cache.go`.
//!
//! # Examples
//!
//! ```
//! use kube_gc_engine::ObjectReference;
//! use kube_gc_engine::absent_owner_cache::AbsentOwnerCache;
//!
//! let cache = AbsentOwnerCache::new(2);
//! let rc = |name: &str, uid: &str| ObjectReference::new("v1", "ReplicationController", "ns1", name, uid);
//! cache.add(rc("rc1", "1"));
//! cache.add(rc("rc2", "2"));
//! assert!(cache.has(&rc("rc1", "1"))); // promotes rc1
//! cache.add(rc("rc3", "3"));            // evicts rc2, the least recently used
//! assert!(!cache.has(&rc("rc2", "2")));
//! assert_eq!(cache.len(), 2);
//! ```

use std::fmt;

use lru::LruCache;

use crate::identity::ObjectReference;
use crate::sync::Mutex;

/// Upstream's capacity: `NewReferenceCache(500)` in kube-controller-manager.
pub const UPSTREAM_CAPACITY: usize = 500;

/// kube-gc's default capacity, 2^20 entries.
///
/// Divergence from upstream: 500 entries thrash as soon as more than 500 distinct absent owners
/// are being resolved at once (a mass deletion, a namespace teardown): an owner is evicted
/// before the rest of its dependents are processed, and each of them then costs another live
/// GET of that owner. The cache only grows as absent owners are found (an entry is the
/// identity plus the LRU's links and table slot, on the order of 150 bytes plus the name), so
/// a large bound costs nothing until it is used.
pub const DEFAULT_CAPACITY: usize = 1 << 20;

/// A thread-safe LRU set of owner identities verified absent from the cluster.
///
/// See the [module documentation](self) for what goes in and why.
pub struct AbsentOwnerCache {
    /// The bound on entries; never zero.
    capacity: usize,
    /// The entries. Unbounded as far as `lru` knows: [`AbsentOwnerCache::add`] evicts by hand,
    /// because `LruCache::new(capacity)` preallocates its table for the whole capacity.
    entries: Mutex<LruCache<ObjectReference, ()>>,
}

impl AbsentOwnerCache {
    /// An empty cache holding at most `capacity` identities.
    ///
    /// # Panics
    ///
    /// If `capacity` is zero.
    pub fn new(capacity: usize) -> AbsentOwnerCache {
        assert!(capacity > 0, "absent owner cache capacity must be at least 1");
        AbsentOwnerCache { capacity, entries: Mutex::new(LruCache::unbounded()) }
    }

    /// The most identities the cache holds.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Whether `owner` is cached as absent. A hit makes it the most recently used entry.
    pub fn has(&self, owner: &ObjectReference) -> bool {
        self.entries.lock().get(owner).is_some()
    }

    /// Records `owner` as absent (or promotes it if already cached), evicting the least recently
    /// used entry if the cache is over capacity.
    pub fn add(&self, owner: ObjectReference) {
        // Seeded defect for loom-tests; never enabled in real builds: insert and evict in two
        // locked sections, so a concurrent hit can make the eviction take the new entry.
        #[cfg(all(kube_gc_loom, feature = "loom-defects"))]
        if crate::loom_support::defect_active(crate::loom_support::Defect::AbsentOwnerCacheSplitAdd)
        {
            self.entries.lock().put(owner, ());
            let mut entries = self.entries.lock();
            while entries.len() > self.capacity {
                entries.pop_lru();
            }
            return;
        }
        let mut entries = self.entries.lock();
        entries.put(owner, ());
        while entries.len() > self.capacity {
            entries.pop_lru();
        }
    }

    /// The number of cached identities.
    pub fn len(&self) -> usize {
        self.entries.lock().len()
    }

    /// Whether the cache is empty.
    pub fn is_empty(&self) -> bool {
        self.entries.lock().is_empty()
    }

    /// A snapshot of the cached identities, most recently used first, without promoting any.
    /// Meant for tests and debugging (TestConflictingData asserts the exact contents).
    pub fn contents(&self) -> Vec<ObjectReference> {
        self.entries.lock().iter().map(|(k, ())| k.clone()).collect()
    }
}

impl Default for AbsentOwnerCache {
    /// A cache of [`DEFAULT_CAPACITY`] entries.
    fn default() -> Self {
        AbsentOwnerCache::new(DEFAULT_CAPACITY)
    }
}

impl fmt::Debug for AbsentOwnerCache {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AbsentOwnerCache")
            .field("capacity", &self.capacity)
            .field("len", &self.len())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rc(name: &str, uid: &str) -> ObjectReference {
        ObjectReference::new("v1", "ReplicationController", "ns1", name, uid)
    }

    /// TestAbsentOwnerCache's eviction pattern, at the cache level: with capacity 2, rc1 and rc2
    /// are added, rc1 is hit (promoted), rc3 is added: rc2, the least recently used, goes.
    #[test]
    fn absent_owner_cache_evicts_least_recently_used() {
        let cache = AbsentOwnerCache::new(2);
        cache.add(rc("rc1", "1"));
        cache.add(rc("rc2", "2"));
        assert!(cache.has(&rc("rc1", "1")));
        cache.add(rc("rc3", "3"));
        assert!(cache.has(&rc("rc1", "1")));
        assert!(cache.has(&rc("rc3", "3")));
        assert!(!cache.has(&rc("rc2", "2")));
        assert_eq!(cache.len(), 2);
    }

    #[test]
    fn miss_does_not_promote_or_insert() {
        let cache = AbsentOwnerCache::new(2);
        cache.add(rc("rc1", "1"));
        assert!(!cache.has(&rc("rc9", "9")));
        assert_eq!(cache.contents(), vec![rc("rc1", "1")]);
    }

    #[test]
    fn add_of_cached_entry_promotes_it() {
        let cache = AbsentOwnerCache::new(2);
        cache.add(rc("rc1", "1"));
        cache.add(rc("rc2", "2"));
        cache.add(rc("rc1", "1"));
        cache.add(rc("rc3", "3"));
        assert_eq!(cache.contents(), vec![rc("rc3", "3"), rc("rc1", "1")]);
    }

    #[test]
    fn key_includes_namespace_and_every_coordinate() {
        let cache = AbsentOwnerCache::new(10);
        cache.add(ObjectReference::new("v1", "Pod", "ns1", "podname2", "poduid2"));
        let other_namespace = ObjectReference::new("v1", "Pod", "ns2", "podname2", "poduid2");
        let cluster_scoped = ObjectReference::new("v1", "Pod", "", "podname2", "poduid2");
        let other_kind = ObjectReference::new("v1", "Secret", "ns1", "podname2", "poduid2");
        let other_version = ObjectReference::new("v2", "Pod", "ns1", "podname2", "poduid2");
        let other_name = ObjectReference::new("v1", "Pod", "ns1", "podname3", "poduid2");
        for (i, r) in [other_namespace, cluster_scoped, other_kind, other_version, other_name]
            .iter()
            .enumerate()
        {
            assert!(!cache.has(r), "#{i}: got hit for {r}, want miss");
        }
        assert!(cache.has(&ObjectReference::new("v1", "Pod", "ns1", "podname2", "poduid2")));
    }

    #[test]
    fn capacity_one_keeps_only_the_newest() {
        let cache = AbsentOwnerCache::new(1);
        cache.add(rc("rc1", "1"));
        cache.add(rc("rc2", "2"));
        assert_eq!(cache.contents(), vec![rc("rc2", "2")]);
        assert!(!cache.is_empty());
    }

    #[test]
    fn default_capacity_is_large_and_does_not_preallocate() {
        let cache = AbsentOwnerCache::default();
        assert_eq!(cache.capacity(), DEFAULT_CAPACITY);
        assert!(cache.is_empty());
        const { assert!(DEFAULT_CAPACITY > UPSTREAM_CAPACITY) };
    }

    #[test]
    #[should_panic(expected = "at least 1")]
    fn zero_capacity_panics() {
        let _ = AbsentOwnerCache::new(0);
    }

    #[test]
    fn concurrent_adds_respect_capacity() {
        let cache = std::sync::Arc::new(AbsentOwnerCache::new(64));
        let handles: Vec<_> = (0..4)
            .map(|t| {
                let cache = cache.clone();
                std::thread::spawn(move || {
                    for i in 0..1000 {
                        let r = rc(&format!("rc-{t}-{i}"), &format!("{t}-{i}"));
                        cache.add(r.clone());
                        let _ = cache.has(&r);
                    }
                })
            })
            .collect();
        for h in handles {
            h.join().unwrap();
        }
        assert_eq!(cache.len(), 64);
    }
}
