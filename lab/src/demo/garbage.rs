//! Phase 4, the garbage: the Pods whose ReplicaSet never existed go, and nothing else.

use super::*;

/// Phase 4: Waits until the garbage Pods are gone, and checks that nothing else went.
pub(super) async fn collect_garbage(
    demo: &Demo<'_>,
    preloaded: &Preloaded,
    gc: &Running,
    synced: Synced,
    report: &mut Report,
) {
    let (args, ui, timeout) = (demo.args, &demo.ui, demo.timeout);
    let Preloaded { store, res, garbage, before } = preloaded;
    let Running { graph, collector, calls, .. } = gc;
    let (synced_at, calls_at_synced) = (synced.at, synced.calls);
    // 4. Garbage: the Pods whose ReplicaSet never existed (timed from ready, when the workers
    // start).
    let calls_before = calls_at_synced;
    let bar = ui.bar(garbage.len() as u64, "garbage Pods collected", BAR);
    let mut remaining = garbage.clone();
    let deadline = synced_at + timeout;
    let mut last_tick = Instant::now();
    let garbage_verdict = loop {
        remaining.retain(|(ns, name)| store.get(&res.pods, Some(ns), name).is_ok());
        let deleted = collector.stats().deleted.load(Ordering::Relaxed);
        bar.set_position((garbage.len() - remaining.len()) as u64);
        bar.set_message(format!("collector deleted {}", thousands(deleted)));
        if last_tick.elapsed() >= Duration::from_secs(2) && !ui.bars() {
            last_tick = Instant::now();
            ui.tick(format!(
                "  garbage {:>6.1} s: {}/{} collected",
                synced_at.elapsed().as_secs_f64(),
                thousands((garbage.len() - remaining.len()) as u64),
                thousands(garbage.len() as u64)
            ));
        }
        if remaining.is_empty() {
            break Ok(());
        }
        if Instant::now() >= deadline {
            break Err(format!(
                "{} of {} garbage Pods left after {} s",
                remaining.len(),
                garbage.len(),
                timeout.as_secs()
            ));
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let garbage_seconds = synced_at.elapsed().as_secs_f64();
    bar.finish_and_clear();
    let garbage_calls = Calls::read(calls).since(calls_before);
    // Nothing but the garbage went, and the graph followed (its virtual owners removed).
    let garbage_verdict = garbage_verdict.and_then(|()| {
        let mut expected = before.clone();
        if let Some(p) = expected.get_mut("pods") {
            *p -= garbage.len() as u64;
        }
        let now = counts(store).map_err(|e| e.to_string())?;
        if now != expected {
            return Err(format!(
                "objects other than the garbage changed: {now:?}, expected {expected:?}"
            ));
        }
        Ok(())
    });
    let nodes_expected = report.listed - garbage.len() as u64;
    let graph_deadline = Instant::now() + timeout;
    while (graph.len() as u64) != nodes_expected && Instant::now() < graph_deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let garbage_verdict = garbage_verdict.and_then(|()| match graph.len() as u64 {
        n if n == nodes_expected => Ok(()),
        n => Err(format!("graph has {n} nodes after collection, expected {nodes_expected}")),
    });
    // A token bucket of `qps` lets through at most burst + qps × t calls in t seconds; the
    // collector's runs at twice --kube-api-qps, and events have their own (not counted).
    let collector_qps = 2.0 * args.kube_api_qps;
    let collector_calls = garbage_calls.total() - garbage_calls.event;
    let floor =
        collector_calls.saturating_sub(u64::from(args.kube_api_burst)) as f64 / collector_qps;
    if floor > 0.5 * garbage_seconds {
        report.notes.push(format!(
            "the garbage phase is bounded by the collector's budget (twice --kube-api-qps {}): its {} calls take at least {floor:.1} s",
            args.kube_api_qps,
            thousands(collector_calls)
        ));
    }
    ui.say(format!(
        "garbage: {} Pods collected in {garbage_seconds:.2} s ({} API calls)",
        thousands(garbage.len() as u64),
        thousands(garbage_calls.total())
    ));
    report.phases.push(Phase {
        name: "garbage",
        objects: garbage.len() as u64,
        seconds: garbage_seconds,
        calls: Some(garbage_calls),
        verdict: garbage_verdict,
    });
}
