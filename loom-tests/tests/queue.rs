//! Model 4: the work queue (`engine/src/queue/`), client-go's `workqueue`: one lock over
//! the dirty and processing sets, the FIFO and the waiters; blocking getters on a condition
//! variable, async getters as wakers. All with [`RateLimiterConfig::immediate`] (loom does not
//! model time, so the delay thread is not built; see the README).

use kube_gc_engine::{RateLimiterConfig, WorkQueue};
use loom::sync::atomic::{AtomicBool, Ordering};
use loom::sync::{Arc, Notify};
use loom::thread;

use crate::fixtures::model;

fn queue() -> Arc<WorkQueue<u32>> {
    Arc::new(WorkQueue::with_rate_limiter("loom", RateLimiterConfig::immediate()))
}

/// Two workers each take the item, re-add it while they hold it, and mark it done: the second
/// worker gets it only after the first is done with it (invariant 2), and the re-add of the
/// second leaves it queued once more.
#[test]
pub(crate) fn an_item_is_never_held_by_two_workers_at_once() {
    model(|| {
        let q = queue();
        let held = Arc::new(AtomicBool::new(false));
        q.add(1);
        let workers: Vec<_> = (0..2)
            .map(|_| {
                let (q, held) = (Arc::clone(&q), Arc::clone(&held));
                thread::spawn(move || {
                    let item = q.get().expect("the item is re-added before each done");
                    assert!(!held.swap(true, Ordering::SeqCst), "item handed to two workers");
                    q.add(item);
                    held.store(false, Ordering::SeqCst);
                    q.done(&item);
                })
            })
            .collect();
        for w in workers {
            w.join().unwrap();
        }
        assert_eq!(q.stats().processing, 0);
        assert_eq!(q.pending(), [1], "item queued twice, or lost");
    });
}

/// An add that lands after a worker took the item is not lost: if the worker still holds the
/// item, `done` queues it again; if not, the add queues it. Either way the worker's next `get`
/// returns it, even after a shutdown (queued items drain).
#[test]
pub(crate) fn an_item_added_while_processing_is_processed_again_after_done() {
    model(|| {
        let q = queue();
        // Set, then notified, once the worker holds the item (loom's `Notify` may wake
        // spuriously, hence the flag).
        let taken = Arc::new((AtomicBool::new(false), Notify::new()));
        q.add(1);
        let worker = {
            let (q, taken) = (Arc::clone(&q), Arc::clone(&taken));
            thread::spawn(move || {
                let item = q.get().unwrap();
                taken.0.store(true, Ordering::SeqCst);
                taken.1.notify();
                q.done(&item);
                let again = q.get();
                if let Some(again) = again {
                    q.done(&again);
                }
                again
            })
        };
        while !taken.0.load(Ordering::SeqCst) {
            taken.1.wait();
        }
        q.add(1);
        q.shut_down();
        assert_eq!(worker.join().unwrap(), Some(1), "the re-add was lost");
        assert_eq!(q.stats().processing, 0);
    });
}

/// Whatever the interleaving of an add with a worker's get/done, the add is counted only if it
/// made the item dirty, and then the item ends up queued once.
#[test]
pub(crate) fn an_add_racing_get_and_done_is_counted_once_and_queued_once() {
    model(|| {
        let q = queue();
        q.add(1);
        let worker = {
            let q = Arc::clone(&q);
            thread::spawn(move || {
                let item = q.get().unwrap();
                q.done(&item);
            })
        };
        let adder = {
            let q = Arc::clone(&q);
            thread::spawn(move || q.add(1))
        };
        worker.join().unwrap();
        adder.join().unwrap();
        let stats = q.stats();
        assert_eq!(stats.processing, 0);
        // 2 adds counted: the second came after the get, so the item is queued again.
        // 1: it collapsed into the first, before the get.
        assert_eq!(q.len(), if stats.adds_total == 2 { 1 } else { 0 }, "{stats:?}");
    });
}

/// Two threads adding the same item collapse into one queued item and one counted add.
#[test]
pub(crate) fn concurrent_duplicate_adds_collapse() {
    model(|| {
        let q = queue();
        let adders: Vec<_> = (0..2)
            .map(|_| {
                let q = Arc::clone(&q);
                thread::spawn(move || q.add(7))
            })
            .collect();
        for a in adders {
            a.join().unwrap();
        }
        assert_eq!(q.pending(), [7]);
        assert_eq!(q.stats().adds_total, 1);
    });
}

/// One queued item, two getters, then shutdown: the item goes to exactly one of them (queued
/// items drain after shutdown), and the other is woken with `None`.
#[test]
pub(crate) fn shut_down_drains_one_item_to_exactly_one_of_two_getters() {
    model(|| {
        let q = queue();
        q.add(1);
        let getters: Vec<_> = (0..2)
            .map(|_| {
                let q = Arc::clone(&q);
                thread::spawn(move || q.get())
            })
            .collect();
        q.shut_down();
        let got: Vec<_> = getters.into_iter().map(|g| g.join().unwrap()).collect();
        assert_eq!(got.iter().flatten().count(), 1, "{got:?}");
    });
}

/// Shutdown wakes every blocked getter, and each returns `None`.
#[test]
pub(crate) fn shut_down_wakes_every_blocked_getter() {
    model(|| {
        let q = queue();
        let getters: Vec<_> = (0..2)
            .map(|_| {
                let q = Arc::clone(&q);
                thread::spawn(move || q.get())
            })
            .collect();
        q.shut_down();
        for g in getters {
            assert_eq!(g.join().unwrap(), None);
        }
    });
}

/// `shut_down_with_drain` returns only once the item handed out before it is done.
#[test]
pub(crate) fn shut_down_with_drain_waits_for_done() {
    model(|| {
        let q = queue();
        q.add(1);
        let item = q.get().unwrap();
        let drainer = {
            let q = Arc::clone(&q);
            thread::spawn(move || {
                q.shut_down_with_drain();
                q.stats().processing
            })
        };
        q.done(&item);
        assert_eq!(drainer.join().unwrap(), 0, "drain returned while the item was processing");
    });
}

/// A rate-limited add (the immediate limiter: no delay) wakes a getter blocked on the empty
/// queue.
#[test]
pub(crate) fn a_rate_limited_add_wakes_a_blocked_getter() {
    model(|| {
        let q = queue();
        let getter = {
            let q = Arc::clone(&q);
            thread::spawn(move || q.get())
        };
        q.add_rate_limited(5);
        assert_eq!(getter.join().unwrap(), Some(5));
    });
}

/// The retry path: whichever of two workers gets the item first re-adds it rate-limited before
/// `done`; the other worker receives that retry. A lost retry leaves it blocked for ever.
#[test]
pub(crate) fn rate_limited_re_adds_are_not_lost() {
    model(|| {
        let q = queue();
        let retried = Arc::new(AtomicBool::new(false));
        q.add(1);
        let workers: Vec<_> = (0..2)
            .map(|_| {
                let (q, retried) = (Arc::clone(&q), Arc::clone(&retried));
                thread::spawn(move || {
                    let item = q.get().unwrap();
                    if !retried.swap(true, Ordering::SeqCst) {
                        q.add_rate_limited(item);
                    } else {
                        q.forget(&item);
                    }
                    q.done(&item);
                    item
                })
            })
            .collect();
        for w in workers {
            assert_eq!(w.join().unwrap(), 1);
        }
        assert!(q.is_empty());
        assert_eq!(q.num_requeues(&1), 0, "forgotten after the successful retry");
    });
}

/// An async getter pending on the empty queue is woken by an add and resolves to the item.
#[test]
pub(crate) fn an_add_wakes_an_async_getter() {
    model(|| {
        let q = queue();
        let getter = {
            let q = Arc::clone(&q);
            thread::spawn(move || loom::future::block_on(q.get_async()))
        };
        q.add(3);
        assert_eq!(getter.join().unwrap(), Some(3));
    });
}

/// An async and a blocking getter, two adds: each gets one item; no wakeup is lost whichever
/// kind is waiting when an item is pushed.
#[test]
pub(crate) fn async_and_blocking_getters_share_two_items() {
    model(|| {
        let q = queue();
        let a = {
            let q = Arc::clone(&q);
            thread::spawn(move || loom::future::block_on(q.get_async()))
        };
        let b = {
            let q = Arc::clone(&q);
            thread::spawn(move || q.get())
        };
        q.add(1);
        q.add(2);
        let mut got = [a.join().unwrap(), b.join().unwrap()];
        got.sort();
        assert_eq!(got, [Some(1), Some(2)]);
    });
}

/// Shutdown wakes a pending async getter, which resolves to `None`.
#[test]
pub(crate) fn shut_down_wakes_an_async_getter() {
    model(|| {
        let q = queue();
        let getter = {
            let q = Arc::clone(&q);
            thread::spawn(move || loom::future::block_on(q.get_async()))
        };
        q.shut_down();
        assert_eq!(getter.join().unwrap(), None);
    });
}

/// The urgent lane (`add_urgent`, kube-gc's garbage-first ordering) keeps the queue's
/// guarantees: with one worker holding an item, an urgent re-add and a normal add racing from
/// another thread never hand the item out twice, never lose it, and leave exactly one copy
/// queued across both lanes.
#[test]
pub(crate) fn urgent_and_normal_adds_never_duplicate_or_lose_an_item() {
    model(|| {
        let q = queue();
        q.add(1);
        let held = q.get().unwrap();
        let adder = {
            let q = Arc::clone(&q);
            thread::spawn(move || {
                q.add_urgent(1);
                q.add(2);
            })
        };
        q.add(1);
        q.done(&held);
        adder.join().unwrap();
        let mut pending = q.pending();
        pending.sort_unstable();
        assert_eq!(pending, [1, 2], "an item was duplicated or lost across the lanes");
        assert_eq!(q.stats().processing, 0);
    });
}

/// The front of the urgent lane (`add_urgent_first`, garbage found before waiting
/// verifications) racing with `add_urgent` and a worker's `done`: still exactly one copy of
/// each item, none lost.
#[test]
pub(crate) fn urgent_first_and_urgent_adds_never_duplicate_or_lose_an_item() {
    model(|| {
        let q = queue();
        q.add_urgent(1);
        let held = q.get().unwrap();
        let adder = {
            let q = Arc::clone(&q);
            thread::spawn(move || {
                q.add_urgent_first(1);
                q.add_urgent(2);
            })
        };
        q.add_urgent(1);
        q.done(&held);
        adder.join().unwrap();
        let mut pending = q.pending();
        pending.sort_unstable();
        assert_eq!(pending, [1, 2], "an item was duplicated or lost in the urgent lane");
        assert_eq!(q.stats().processing, 0);
    });
}
