use super::{OwnerClasses, Verdict};

fn classes(solid: usize, dangling: usize, waiting: usize) -> OwnerClasses {
    OwnerClasses { solid, dangling, waiting_for_dependents_deletion: waiting }
}

#[test]
fn a_verdict_for_each_row_of_the_spec() {
    use Verdict::*;
    // (solid, dangling, waiting), has dependents, GC finalizers: synced, warming up.
    let rows = [
        ((1, 0, 0), false, false, Keep, Keep),
        ((2, 0, 0), true, true, Keep, Keep),
        ((1, 1, 0), false, false, RemoveReferences, DeferUntilSynced),
        ((1, 0, 1), true, false, RemoveReferences, DeferUntilSynced),
        ((0, 1, 0), false, false, Delete { foreground: false }, Delete { foreground: false }),
        ((0, 2, 0), true, false, Delete { foreground: false }, Delete { foreground: false }),
        ((0, 1, 0), false, true, Delete { foreground: false }, DeferUntilSynced),
        ((0, 0, 1), true, false, Delete { foreground: true }, DeferUntilSynced),
        ((0, 1, 1), false, false, Delete { foreground: false }, DeferUntilSynced),
    ];
    for ((s, d, w), has_dependents, finalizers, synced, warming) in rows {
        let c = classes(s, d, w);
        assert_eq!(c.verdict(has_dependents, finalizers, false), synced, "{c:?} synced");
        assert_eq!(c.verdict(has_dependents, finalizers, true), warming, "{c:?} warming up");
    }
}
