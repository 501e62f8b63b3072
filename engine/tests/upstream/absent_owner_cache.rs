//! TestAbsentOwnerCache, the collector-level version: with a cache of 2, four
//! attemptToDeleteItem calls resolve rc1 once, promote it on the hit, and evict rc2.
//!
//! <https://github.com/kubernetes/kubernetes/blob/master/pkg/controller/garbagecollector/garbagecollector_test.go>; GC-SPEC.md §9.A, §1.4, §3.3.

use super::attempt_to_delete_item::{pod, rc};
use super::*;

#[test]
fn test_absent_owner_cache() {
    let cluster = Arc::new(MemoryCluster::with_test_resources());
    let objects = [
        pod("rc1Pod1", rc("rc1", "1", Some(true))),
        pod("rc1Pod2", rc("rc1", "1", Some(false))),
        pod("rc2Pod1", rc("rc2", "2", None)),
        pod("rc3Pod1", rc("rc3", "3", None)),
    ];
    for p in &objects {
        cluster.create(&pods(), p.clone()).unwrap();
    }
    // No replication controller exists: every GET of one is a 404.
    let (_, _, gc) = collector(cluster.clone(), 2);
    let node = |name: &str| item(&make_id("v1", "Pod", "ns1", name, "456"), false);
    for name in ["rc1Pod1", "rc2Pod1", "rc1Pod2", "rc3Pod1"] {
        // rc1Pod2: rc1 is cached, no request; the hit promotes rc1. rc3Pod1: evicts rc2.
        block_on(gc.attempt_to_delete_item(&node(name))).unwrap();
    }
    let rc_id = |name: &str, uid: &str| make_id("v1", "ReplicationController", "ns1", name, uid);
    let cached: BTreeSet<String> =
        gc.absent_owners().contents().iter().map(ToString::to_string).collect();
    let want: BTreeSet<String> =
        [rc_id("rc1", "1"), rc_id("rc3", "3")].iter().map(ToString::to_string).collect();
    assert_eq!(cached, want, "expected rc1 and rc3 in the cache, and not rc2");
    let rc1_gets = cluster
        .take_actions()
        .iter()
        .filter(|a| *a == "get /v1, Resource=replicationcontrollers ns=ns1 name=rc1")
        .count();
    assert_eq!(rc1_gets, 1, "expected only 1 GET rc1 request, got {rc1_gets}");
}
