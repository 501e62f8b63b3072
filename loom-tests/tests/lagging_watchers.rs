//! Model 6: the watchers behind and the decisions they hold
//! (`engine/src/collector/lagging_watchers.rs`): one mutex over both, so that an owner held
//! just as the last watcher catches up is released with the others, never left waiting for the
//! catch-up timeout.

use std::time::{Duration, Instant};

use kube_gc_engine::Uid;
use kube_gc_engine::collector::{Admission, HeldDecision, LaggingWatchers};
use kube_gc_engine::graph::NodeKey;
use loom::sync::Arc;
use loom::thread;

use crate::fixtures::model;

/// One watcher is behind. A worker asks to orphan an owner while the watcher catches up: the
/// worker goes ahead, or it is held and the catch-up releases it to the same decision.
#[test]
pub(crate) fn an_owner_held_as_the_last_watcher_catches_up_is_released() {
    model(|| {
        let lag = Arc::new(LaggingWatchers::new(Duration::from_secs(60)));
        let now = Instant::now();
        lag.fall_behind("pods", now);
        let owner = NodeKey { uid: Uid::from_u128(1), incarnation: 0 };
        let catching_up = {
            let lag = Arc::clone(&lag);
            thread::spawn(move || lag.catch_up("pods", now))
        };
        let admitted = lag.admit(owner, HeldDecision::Orphaning, now);
        let released = catching_up.join().unwrap();
        match admitted {
            Admission::Proceed => assert!(released.is_empty(), "released an owner never held"),
            Admission::Hold(_) => {
                let held = (owner, HeldDecision::Orphaning);
                assert!(released.contains(&held), "the held owner was stranded until the timeout")
            }
            other => panic!("no watcher was past the timeout: {other:?}"),
        }
    });
}
