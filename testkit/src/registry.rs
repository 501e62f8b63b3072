//! The generic registry store's deletion rules for the garbage-collection finalizers
//! (`store.go`, GC-SPEC.md §5.6), shared by the in-memory cluster and the HTTP emulator.

use std::collections::HashSet;

use kube_gc_engine::cluster::PropagationPolicy;
use kube_gc_engine::meta::{FINALIZER_DELETE_DEPENDENTS, FINALIZER_ORPHAN};

/// `deletionFinalizersForGarbageCollection` of the generic registry store: the finalizers an
/// object should have after a delete with `policy`, or `None` if their *set* is unchanged.
///
/// Both GC finalizers are removed, then `orphan` is appended if the delete orphans and
/// `foregroundDeletion` if it deletes dependents in the foreground. Each is decided by the
/// explicit `policy` if any, else by the finalizer the object already has, else by the resource's
/// default (`default_orphan` for legacy kinds; never foreground).
pub fn deletion_finalizers_for_garbage_collection(
    finalizers: &[String],
    policy: Option<PropagationPolicy>,
    default_orphan: bool,
) -> Option<Vec<String>> {
    let existing = finalizers.iter().find_map(|f| match f.as_str() {
        FINALIZER_ORPHAN => Some(PropagationPolicy::Orphan),
        FINALIZER_DELETE_DEPENDENTS => Some(PropagationPolicy::Foreground),
        _ => None,
    });
    let (should_orphan, should_delete_dependents) = match policy.or(existing) {
        Some(PropagationPolicy::Orphan) => (true, false),
        Some(PropagationPolicy::Foreground) => (false, true),
        Some(PropagationPolicy::Background) => (false, false),
        None => (default_orphan, false),
    };
    let mut next: Vec<String> = finalizers
        .iter()
        .filter(|f| *f != FINALIZER_ORPHAN && *f != FINALIZER_DELETE_DEPENDENTS)
        .cloned()
        .collect();
    if should_orphan {
        next.push(FINALIZER_ORPHAN.to_owned());
    }
    if should_delete_dependents {
        next.push(FINALIZER_DELETE_DEPENDENTS.to_owned());
    }
    let old: HashSet<&str> = finalizers.iter().map(String::as_str).collect();
    let new: HashSet<&str> = next.iter().map(String::as_str).collect();
    (old != new).then_some(next)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn deletion_finalizers_report_only_set_changes() {
        let f = |v: &[&str]| strings(v);
        assert_eq!(deletion_finalizers_for_garbage_collection(&f(&["orphan"]), None, false), None);
        assert_eq!(
            deletion_finalizers_for_garbage_collection(
                &f(&["orphan", "a"]),
                Some(PropagationPolicy::Orphan),
                false
            ),
            None
        );
        assert_eq!(
            deletion_finalizers_for_garbage_collection(&f(&["a"]), None, true),
            Some(f(&["a", "orphan"]))
        );
        assert_eq!(
            deletion_finalizers_for_garbage_collection(
                &f(&["foregroundDeletion", "orphan"]),
                Some(PropagationPolicy::Background),
                false
            ),
            Some(f(&[]))
        );
    }
}
