//! The families read at scrape time from counts that already exist: the work queues' stats,
//! the graph's size, the controller's and the collector's counters, the API calls by purpose,
//! the Warning events, and the watchers' warm-up.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;

use super::{Metrics, Sources};

/// Label sets as (name, value) pairs.
type Labels = Vec<(&'static str, String)>;

/// See the module docs.
#[derive(Debug)]
pub(super) struct ScrapeTime {
    pub(super) metrics: Arc<Metrics>,
    pub(super) sources: Sources,
}

/// Writes one family: a gauge or a counter (its name given without `_total`, which the
/// encoder appends), one sample per label set.
fn family(
    encoder: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    kind: MetricType,
    samples: &[(Labels, f64)],
) -> std::fmt::Result {
    let mut family = encoder.encode_descriptor(name, help, None, kind)?;
    for (labels, value) in samples {
        let sample = family.encode_family(labels)?;
        match kind {
            MetricType::Counter => ConstCounter::new(*value).encode(sample)?,
            _ => ConstGauge::new(*value).encode(sample)?,
        }
    }
    Ok(())
}

/// One unlabelled sample.
fn one(value: f64) -> [(Labels, f64); 1] {
    [(Vec::new(), value)]
}

/// The GETs that read an item, of `all_gets` sent: those that are not proofs. A proof GET is
/// counted as one when it is decided, before it waits for the budget, and among all GETs once
/// it is sent, so the difference dips while proofs wait; a counter that goes down is a reset
/// to Prometheus. The difference never exceeds the reads sent, so the largest yet
/// (`exported`) is a count of them.
fn read_gets(all_gets: u64, proof_gets: u64, exported: &AtomicU64) -> u64 {
    let reads = all_gets.saturating_sub(proof_gets);
    exported.fetch_max(reads, Ordering::Relaxed).max(reads)
}

fn load(c: &AtomicU64) -> f64 {
    c.load(Ordering::Relaxed) as f64
}

impl Collector for ScrapeTime {
    fn encode(&self, mut encoder: DescriptorEncoder) -> std::fmt::Result {
        let e = &mut encoder;
        let (gauge, counter) = (MetricType::Gauge, MetricType::Counter);
        let Sources { graph, queues, calls, collector, events } = &self.sources;
        let m = &self.metrics;

        // client-go's workqueue families, labelled with the queue's name.
        let stats: Vec<_> = queues.iter().map(|q| (q.name().to_owned(), q.stats())).collect();
        let by_queue = |f: &dyn Fn(&kube_gc_engine::queue::QueueStats) -> f64| {
            stats.iter().map(|(name, s)| (vec![("name", name.clone())], f(s))).collect::<Vec<_>>()
        };
        family(
            e,
            "workqueue_depth",
            "Current depth of workqueue",
            gauge,
            &by_queue(&|s| s.depth as f64),
        )?;
        family(
            e,
            "workqueue_adds",
            "Total number of adds handled by workqueue",
            counter,
            &by_queue(&|s| s.adds_total as f64),
        )?;
        family(
            e,
            "workqueue_retries",
            "Total number of retries handled by workqueue",
            counter,
            &by_queue(&|s| s.retries_total as f64),
        )?;
        family(
            e,
            "workqueue_unfinished_work_seconds",
            "How many seconds of work has been done that is in progress and hasn't been observed by work_duration. Large values indicate stuck threads. One can deduce the number of stuck threads by observing the rate at which this increases",
            gauge,
            &by_queue(&|s| s.unfinished_work.as_secs_f64()),
        )?;
        family(
            e,
            "workqueue_longest_running_processor_seconds",
            "How many seconds has the longest running processor for workqueue been running",
            gauge,
            &by_queue(&|s| s.longest_running.as_secs_f64()),
        )?;
        family(
            e,
            "kube_gc_workqueue_urgent_depth",
            "Of workqueue_depth, the items in the urgent lane: likely garbage (virtual owners to verify, dependents of absent owners, foreground deletions) ahead of re-checks",
            gauge,
            &by_queue(&|s| s.urgent as f64),
        )?;
        family(
            e,
            "kube_gc_workqueue_processing",
            "Items being processed",
            gauge,
            &by_queue(&|s| s.processing as f64),
        )?;
        family(
            e,
            "kube_gc_workqueue_waiting",
            "Items waiting for their backoff to pass",
            gauge,
            &by_queue(&|s| s.waiting as f64),
        )?;

        // Upstream's own.
        family(
            e,
            "garbagecollector_controller_resources_sync_error",
            "Number of garbage collector resources sync errors",
            counter,
            &one(m.resources_sync_errors.get() as f64),
        )?;

        // The graph and its ingestion.
        family(
            e,
            "kube_gc_graph_nodes",
            "Nodes in the dependency graph",
            gauge,
            &one(graph.len() as f64),
        )?;
        family(
            e,
            "kube_gc_ingest_batches",
            "Batches applied to the graph",
            counter,
            &one(m.ingest_batches.get() as f64),
        )?;
        family(
            e,
            "kube_gc_ingest_events",
            "Events applied to the graph",
            counter,
            &one(m.ingest_events.get() as f64),
        )?;
        family(
            e,
            "kube_gc_ingest_rejected_events",
            "Malformed events rejected",
            counter,
            &one(m.ingest_rejected.get() as f64),
        )?;
        family(
            e,
            "kube_gc_unrepresentable_owner_references",
            "ownerReferences held as (unrepresentable), once per event carrying one: a type longer than any served one, or a new type or non-UUID UID past --max-owner-types or --max-non-uuid-uids; no decision goes past one",
            counter,
            &one(kube_gc_engine::identity::unrepresentable_owner_references() as f64),
        )?;
        // What ingestion holds for the process's life from text any writer of objects chose,
        // against the caps past which it holds no new value.
        use kube_gc_engine::identity as held;
        let sets = [
            ("non_uuid_uids", held::interned_uids(), held::max_interned_uids()),
            (
                "owner_type_strings",
                held::interned_type_strings(),
                held::max_interned_type_strings(),
            ),
            ("owner_type_pairs", held::interned_type_pairs(), held::max_interned_type_strings()),
        ];
        let by_set = |f: fn(usize, usize) -> usize| -> Vec<(Labels, f64)> {
            let sample = |&(set, n, max): &(&str, usize, usize)| {
                (vec![("set", set.to_owned())], f(n, max) as f64)
            };
            sets.iter().map(sample).collect()
        };
        family(
            e,
            "kube_gc_interned",
            "Values interned for the life of the process (--max-non-uuid-uids, --max-owner-types)",
            gauge,
            &by_set(|n, _| n),
        )?;
        family(
            e,
            "kube_gc_interned_limit",
            "The cap on each interned set: past it, an ownerReference naming a new value is held as (unrepresentable)",
            gauge,
            &by_set(|_, max| max),
        )?;
        family(
            e,
            "kube_gc_ingest_seconds",
            "Time spent applying batches (events_total / this = events per second)",
            counter,
            &one(m.ingest_micros.get() as f64 / 1e6),
        )?;
        family(
            e,
            "kube_gc_watch_errors",
            "Watch stream errors, each retried",
            counter,
            &one(m.watch_errors.get() as f64),
        )?;
        let warmup: Vec<_> =
            m.warmup_seconds().into_iter().map(|(r, s)| (vec![("resource", r)], s)).collect();
        family(
            e,
            "kube_gc_warmup_seconds",
            "Seconds from a watcher's start to the end of its initial list",
            gauge,
            &warmup,
        )?;
        let unsynced: Vec<_> = m
            .unsynced
            .lock()
            .expect("metrics lock")
            .iter()
            .map(|r| (vec![("resource", r.clone())], 1.0))
            .collect();
        family(
            e,
            "kube_gc_unsynced_resource",
            "1 for each resource whose watcher has not synced while the collector proceeds without it (past --initial-sync-timeout)",
            gauge,
            &unsynced,
        )?;

        let behind: Vec<_> = (collector.watchers_behind().into_iter())
            .map(|(r, for_how_long)| (vec![("resource", r)], for_how_long.as_secs_f64()))
            .collect();
        family(
            e,
            "kube_gc_watcher_behind_seconds",
            "For each resource whose watcher synced and is behind since (its watch broken, relisting, or its watch after a list not yet back), for how long; orphanings and foreground deletions wait for it up to --watcher-catch-up-timeout",
            gauge,
            &behind,
        )?;

        // The collector's API calls, by verb and purpose: a GET proves an owner absent (or
        // present), or reads an item.
        let stats = collector.stats();
        let (all_gets, proof_gets) = (load(&calls.get), load(&stats.proof_gets));
        let proof_gets = proof_gets.min(all_gets);
        let reads = read_gets(all_gets as u64, proof_gets as u64, &m.read_gets_exported);
        let by_purpose = [
            ("get", "proof", proof_gets),
            ("get", "read", reads as f64),
            ("list", "proof", load(&calls.list)),
            ("patch", "patch", load(&calls.patch)),
            ("delete", "delete", load(&calls.delete)),
            ("create", "event", load(&calls.event)),
        ];
        let series: Vec<_> = by_purpose
            .iter()
            .map(|(v, p, n)| (vec![("verb", v.to_string()), ("purpose", p.to_string())], *n))
            .collect();
        family(
            e,
            "kube_gc_api_calls",
            "API calls made by the collector, by verb and purpose (proof: showing owners absent or present; read: an item's GET; event: Warning events, on their own budget)",
            counter,
            &series,
        )?;
        let collector_calls: f64 = by_purpose.iter().filter(|c| c.1 != "event").map(|c| c.2).sum();
        // In shadow mode the collector's deletions were not sent: no deletion metric then.
        let deleting = !m.dry_run();
        let deleted = load(&stats.deleted);
        if deleting && deleted > 0.0 {
            family(
                e,
                "kube_gc_api_calls_per_collected_object",
                "The collector's API calls (events and watch lists not counted) per object it deleted",
                gauge,
                &one(collector_calls / deleted),
            )?;
        }

        // The collector's decisions.
        for (name, help, value) in [
            (
                "kube_gc_deleted",
                "Objects the collector deleted (or started deleting)",
                &stats.deleted,
            ),
            (
                "kube_gc_verifications_skipped",
                "Virtual-owner verifications skipped because the owner was observed since",
                &stats.verifications_skipped,
            ),
            (
                "kube_gc_deferred_until_synced",
                "Items deferred during warm-up because their decision needs the synced graph",
                &stats.deferred_until_synced,
            ),
            (
                "kube_gc_orphans_held_for_watchers",
                "Orphanings held while a watcher was behind (its watch broken, relisting, or its watch after a list not yet back), until it caught up (--watcher-catch-up-timeout)",
                &stats.orphans_held_for_watchers,
            ),
            (
                "kube_gc_orphans_past_catch_up_timeout",
                "Orphanings that went ahead with a watcher behind for longer than --watcher-catch-up-timeout (its undelivered dependents keep their reference)",
                &stats.orphans_past_catch_up_timeout,
            ),
            (
                "kube_gc_foreground_deletions_held_for_watchers",
                "Steps of a foreground deletion resting on the graph showing no dependents (removing foregroundDeletion, deleting a dependent in the background) held while a watcher was behind, until it caught up (--watcher-catch-up-timeout)",
                &stats.foreground_deletions_held_for_watchers,
            ),
            (
                "kube_gc_foreground_deletions_past_catch_up_timeout",
                "Steps of a foreground deletion that went ahead with a watcher behind for longer than --watcher-catch-up-timeout (a dependent it has not delivered may outlive the owner)",
                &stats.foreground_deletions_past_catch_up_timeout,
            ),
            (
                "kube_gc_late_orphans",
                "References to owners this collector orphaned, removed from dependents seen too late to be orphaned with the others (--orphaned-owners-memory)",
                &stats.late_orphans,
            ),
            (
                "kube_gc_created_after_orphaning",
                "Dependents seen too late to be orphaned but created after their orphaned owners' deletion, decided as upstream decides them (collected)",
                &stats.created_after_orphaning,
            ),
            (
                "kube_gc_stale_view_conflicts",
                "Writes decided from the graph's copy of an object refused because it had changed or gone (decided again from a live read)",
                &stats.stale_view_conflicts,
            ),
            (
                "kube_gc_proven_absent",
                "Owners a consistent LIST of their resource proved absent (--bulk-absence-proof)",
                &stats.proven_absent,
            ),
            (
                "kube_gc_proof_lists_failed",
                "Proof LISTs that failed; their owners were verified by GET",
                &stats.proof_lists_failed,
            ),
            (
                "kube_gc_item_reads_saved",
                "Item GETs replaced by the graph's observed copy (--read-items-from-graph)",
                &stats.item_reads_saved,
            ),
        ] {
            if name == "kube_gc_deleted" && !deleting {
                continue;
            }
            family(e, name, help, counter, &one(load(value)))?;
        }
        let times = *stats.deletion_times.lock().unwrap_or_else(|e| e.into_inner());
        let times = times.filter(|_| deleting);
        if let (Some((first, last)), Some(since)) = (times, m.collecting_since.get()) {
            let after = |t: std::time::Instant| t.saturating_duration_since(*since).as_secs_f64();
            family(
                e,
                "kube_gc_first_deletion_seconds",
                "Seconds from when this process started collecting (after winning the Lease) to its first deletion",
                gauge,
                &one(after(first)),
            )?;
            family(
                e,
                "kube_gc_last_deletion_seconds",
                "Seconds from when this process started collecting (after winning the Lease) to its latest deletion",
                gauge,
                &one(after(last)),
            )?;
        }

        // What became of the Warning events.
        let outcomes: Vec<_> =
            [("sent", &events.sent), ("folded", &events.folded), ("dropped", &events.dropped)]
                .into_iter()
                .map(|(outcome, n)| (vec![("outcome", outcome.to_owned())], load(n)))
                .collect();
        family(
            e,
            "kube_gc_events",
            "Warning events recorded, by what became of them: sent (a create sent to the API server; a failed one is logged, not retried), folded into an identical one of the last 10 minutes, or dropped (the queue full)",
            counter,
            &outcomes,
        )
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicU64;

    /// Proofs decided and waiting for the budget do not make the read series go down.
    #[test]
    fn the_read_gets_never_go_down() {
        let exported = AtomicU64::new(0);
        // (GETs sent, proofs decided) at each scrape: two proofs wait at the second.
        let scrapes = [(10, 2), (10, 4), (12, 4), (13, 4)];
        let reads: Vec<u64> =
            scrapes.iter().map(|&(all, proofs)| super::read_gets(all, proofs, &exported)).collect();
        assert_eq!(reads, [8, 8, 8, 9]);
    }
}
