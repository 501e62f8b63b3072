//! Model 5: the absent-owner cache (`engine/src/absent_owner_cache.rs`), an LRU set behind one
//! mutex, whose every method takes the lock once: it must be linearizable.

use kube_gc_engine::ObjectReference;
use kube_gc_engine::absent_owner_cache::AbsentOwnerCache;
use loom::sync::Arc;
use loom::thread;

use crate::fixtures::{model, uid};

fn rc(i: u64) -> ObjectReference {
    ObjectReference::new("v1", "ReplicationController", "default", &format!("rc-{i}"), &uid(i))
}

/// Capacity 1 holding `a`; one thread adds `b` while another asks for `a`. In either order the
/// add evicts `a` and the cache ends holding `b`: a hit on `a` (which promotes it) must never
/// make the add evict `b`, its own entry, instead.
#[test]
pub(crate) fn a_hit_racing_an_add_never_makes_the_add_lost() {
    model(|| {
        let cache = Arc::new(AbsentOwnerCache::new(1));
        cache.add(rc(1));
        let adder = {
            let cache = Arc::clone(&cache);
            thread::spawn(move || cache.add(rc(2)))
        };
        let _hit = cache.has(&rc(1));
        adder.join().unwrap();
        assert_eq!(cache.contents(), [rc(2)], "the completed add of rc-2 was lost");
    });
}

/// Two adds into a cache of capacity 1: it ends with exactly one of them, never more.
#[test]
pub(crate) fn concurrent_adds_respect_the_capacity() {
    model(|| {
        let cache = Arc::new(AbsentOwnerCache::new(1));
        let adders: Vec<_> = [1, 2]
            .into_iter()
            .map(|i| {
                let cache = Arc::clone(&cache);
                thread::spawn(move || cache.add(rc(i)))
            })
            .collect();
        for a in adders {
            a.join().unwrap();
        }
        let contents = cache.contents();
        assert!(contents == [rc(1)] || contents == [rc(2)], "{contents:?}");
    });
}

/// A lookup racing the add of the same owner sees it absent or present, and it is present
/// once the add has returned.
#[test]
pub(crate) fn has_racing_add_of_the_same_owner() {
    model(|| {
        let cache = Arc::new(AbsentOwnerCache::new(2));
        let adder = {
            let cache = Arc::clone(&cache);
            thread::spawn(move || cache.add(rc(1)))
        };
        let _either = cache.has(&rc(1));
        adder.join().unwrap();
        assert!(cache.has(&rc(1)));
        assert_eq!(cache.len(), 1);
    });
}
