//! The models on the engine's seeded defects (feature `defects`, which turns on the engine's
//! `loom-defects`): each test switches one defect on, runs a real model unchanged, and requires
//! loom to fail it, for the reason the model states. These prove that the models have teeth.

use std::any::Any;
use std::panic;

use kube_gc_engine::loom_support::{Defect, with_defect};

use crate::{absent_owner_cache, dependents, ingest_batch, lagging_watchers, queue, shard};

/// Runs `model` with `defect` on and requires loom to fail it with a message containing one of
/// `reasons` (the assertions the defect can trip first, in loom's order of exploration).
fn caught(defect: Defect, model: fn(), reasons: &[&str]) {
    let outcome = with_defect(defect, || panic::catch_unwind(model));
    let payload = outcome.expect_err(&format!("loom did not catch the seeded defect {defect:?}"));
    let message = message(&*payload);
    assert!(
        reasons.iter().any(|reason| message.contains(reason)),
        "{defect:?}: the model failed for another reason: {message}"
    );
}

fn message(payload: &(dyn Any + Send)) -> &str {
    match payload.downcast_ref::<String>() {
        Some(s) => s,
        None => payload.downcast_ref::<&str>().copied().unwrap_or("(no message)"),
    }
}

#[test]
fn shard_torn_read_is_caught() {
    caught(
        Defect::ShardTornRead,
        shard::readers_see_a_node_before_or_after_an_update_never_between,
        &["torn node"],
    );
}

#[test]
fn dependents_torn_snapshot_is_caught() {
    caught(
        Defect::DependentsTornSnapshot,
        dependents::a_copy_of_dependents_is_whole_while_the_set_grows_from_inline_to_hashed,
        &["half-way through the switch"],
    );
}

#[test]
fn ingest_barrier_skipped_is_caught() {
    caught(
        Defect::IngestBarrierSkipped,
        ingest_batch::phase_one_output_reaches_phase_two_across_threads,
        &["the sequential reference does not"],
    );
}

#[test]
fn ingest_stepwise_apply_is_caught() {
    caught(
        Defect::IngestStepwiseApply,
        ingest_batch::a_worker_reading_during_a_batch_sees_each_shard_before_or_after_it,
        &["half-way through a batch"],
    );
}

#[test]
fn queue_without_processing_set_is_caught() {
    caught(
        Defect::QueueNoProcessingSet,
        queue::an_item_is_never_held_by_two_workers_at_once,
        &["item handed to two workers", "item queued twice"],
    );
}

#[test]
fn queue_done_dropping_a_re_add_is_caught() {
    caught(
        Defect::QueueDoneDropsReAdd,
        queue::an_item_added_while_processing_is_processed_again_after_done,
        &["the re-add was lost"],
    );
}

#[test]
fn absent_owner_cache_split_add_is_caught() {
    caught(
        Defect::AbsentOwnerCacheSplitAdd,
        absent_owner_cache::a_hit_racing_an_add_never_makes_the_add_lost,
        &["was lost"],
    );
}

#[test]
fn lagging_watchers_split_hold_is_caught() {
    caught(
        Defect::LaggingWatchersSplitHold,
        lagging_watchers::an_owner_held_as_the_last_watcher_catches_up_is_released,
        &["stranded"],
    );
}

/// Set in the child process that runs a model expected to deadlock.
const DEADLOCK_CHILD: &str = "KUBE_GC_LOOM_DEADLOCK_CHILD";

/// Loom reports a deadlock by panicking when no thread can run; the unwinding that follows drops
/// loom objects with no active thread and aborts the process. So the model runs in a child
/// process (this test binary, filtered to [`nested_shard_locks_child`]), which must fail and
/// report the deadlock.
#[test]
fn ingest_nested_shard_locks_deadlock_is_caught() {
    let exe = std::env::current_exe().expect("the test binary's path");
    let output = std::process::Command::new(exe)
        .args(["--exact", "defects::nested_shard_locks_child", "--ignored", "--nocapture"])
        .env(DEADLOCK_CHILD, "1")
        .output()
        .expect("the child test runs");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "loom did not catch IngestNestedShardLocks");
    assert!(stderr.contains("deadlock"), "the model failed for another reason:\n{stderr}");
}

/// The model behind [`ingest_nested_shard_locks_deadlock_is_caught`]; does nothing unless run
/// by it.
#[test]
#[ignore = "run in a child process by ingest_nested_shard_locks_deadlock_is_caught"]
fn nested_shard_locks_child() {
    if std::env::var_os(DEADLOCK_CHILD).is_none() {
        return;
    }
    with_defect(
        Defect::IngestNestedShardLocks,
        ingest_batch::phase_one_output_reaches_phase_two_across_threads,
    );
}
