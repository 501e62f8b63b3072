//! TestOrphanDependentsFailure: a dependent's PATCH conflicts, orphanDependents fails.
//!
//! <https://github.com/kubernetes/kubernetes/blob/master/pkg/controller/garbagecollector/garbagecollector_test.go>; GC-SPEC.md §9.A, §4.

use super::*;

/// PATCH of the dependent answers 409: orphanDependents fails with the server's conflict.
#[test]
fn test_orphan_dependents_failure() {
    let cluster = Arc::new(MemoryCluster::with_test_resources());
    cluster.fail_next(Verb::Patch, "pods", "pod", ClusterError::Conflict(String::new()));
    let (_, _, gc) = collector(cluster, 500);
    let dependents = [make_id("v1", "Pod", "ns1", "pod", "")];
    let owner = make_id("", "", "", "", "");
    let expected = "the server reported a conflict";
    match block_on(gc.orphan_dependents(&owner, &dependents)) {
        Err(err) => assert!(
            err.to_string().contains(expected),
            "expected error contains text {expected:?}, got {:?}",
            err.to_string()
        ),
        Ok(()) => panic!("expected error contains text {expected:?}, got nil"),
    }
}
