//! Phase 3, the warm-up: progress per resource until kube-gc is ready, then time to synced,
//! graph nodes (counted when the last initial-list event is applied) and memory.

use super::*;

/// Phase 3: Watches the warm-up until kube-gc is ready; `None` if it never was.
pub(super) async fn warm_up(
    demo: &Demo<'_>,
    preloaded: &Preloaded,
    gc: &Running,
    report: &mut Report,
) -> Option<Synced> {
    let (ui, timeout) = (&demo.ui, demo.timeout);
    let Preloaded { garbage, before, .. } = preloaded;
    let Running { pages, graph, ready, metrics, calls, batch_size, started, .. } = gc;
    let (batch_size, started) = (*batch_size, *started);
    let rss_before = report.warm_up.rss_before;
    let expected_events = report.listed;
    report.warm_up.expected_nodes = expected_events + garbage.len() as u64;
    // A thread that polls closely near the end reads the graph's nodes when the last
    // initial-list event is applied (before ready, so before any worker can change the graph),
    // then the moment kube-gc turns ready and the collector's calls then.
    let stop_catcher = Arc::new(AtomicBool::new(false));
    let catcher = {
        let (graph, metrics, ready, calls, stop) =
            (graph.clone(), metrics.clone(), ready.clone(), calls.clone(), stop_catcher.clone());
        std::thread::spawn(move || {
            let mut caught = Caught::default();
            let catch_nodes = |caught: &mut Caught| {
                if caught.nodes.is_none() && metrics.ingest_events.get() >= expected_events {
                    let nodes = graph.len() as u64;
                    // The collector changes the graph only after an API call of its own (a
                    // virtual delete follows a GET; a Pod's delete, a DELETE): none yet, the
                    // count is the warm-up's.
                    caught.nodes = Some((nodes, Calls::read(&calls).total() > 0));
                }
            };
            while !stop.load(Ordering::Relaxed) {
                let ingested = metrics.ingest_events.get();
                catch_nodes(&mut caught);
                if ready.load(Ordering::Acquire) {
                    // The last batch may have landed between the two reads (this thread
                    // preempted on a loaded machine): it is counted before kube-gc turns ready.
                    catch_nodes(&mut caught);
                    caught.ready = Some((Instant::now(), Calls::read(&calls)));
                    break;
                }
                if ingested + 2 * batch_size >= expected_events {
                    std::thread::yield_now();
                } else {
                    std::thread::sleep(Duration::from_millis(1));
                }
            }
            caught
        })
    };
    let overall = ui.bar(expected_events, "events ingested", BAR);
    let mut bars: Vec<(String, u64, ProgressBar)> = before
        .iter()
        .map(|(key, n)| (key.clone(), *n, ui.bar(*n, &format!("{key} listed"), BAR)))
        .collect();
    let mut synced_resources: BTreeMap<String, f64> = BTreeMap::new();
    let deadline = started + timeout;
    let mut last_tick = Instant::now();
    let mut window = (Instant::now(), 0u64, 0.0f64);
    let synced = loop {
        let now = Instant::now();
        let is_ready = ready.load(Ordering::Acquire);
        let ingested = metrics.ingest_events.get();
        let dt = now.duration_since(window.0).as_secs_f64();
        if dt >= 1.0 {
            window = (now, ingested, (ingested - window.1) as f64 / dt);
        }
        synced_resources.extend(metrics.warmup_seconds());
        let nodes = graph.len();
        overall.set_position(ingested.min(expected_events));
        overall.set_message(format!(
            "graph {} nodes · {} events/s · {} resources synced · {:.1} s",
            thousands(nodes as u64),
            thousands(window.2 as u64),
            synced_resources.len(),
            started.elapsed().as_secs_f64()
        ));
        for (key, n, pb) in &mut bars {
            match synced_resources.get(key.as_str()) {
                Some(s) => {
                    if !pb.is_finished() {
                        pb.set_position(*n);
                        pb.finish_with_message(format!("synced in {s:.2} s"));
                    }
                }
                None => pb.set_position((pages.get(key).saturating_sub(1) * LIST_PAGE).min(*n)),
            }
        }
        if last_tick.elapsed() >= Duration::from_secs(2) && !ui.bars() {
            last_tick = Instant::now();
            ui.tick(format!(
                "  warm-up {:>6.1} s: {}/{} events ingested, graph {} nodes, {} events/s, {} resources synced",
                started.elapsed().as_secs_f64(),
                thousands(ingested),
                thousands(expected_events),
                thousands(nodes as u64),
                thousands(window.2 as u64),
                synced_resources.len()
            ));
        }
        if is_ready {
            break Ok(started.elapsed().as_secs_f64());
        }
        if now >= deadline {
            break Err(format!(
                "not synced after {} s ({} of {} events ingested)",
                timeout.as_secs(),
                ingested,
                expected_events
            ));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    stop_catcher.store(true, Ordering::Relaxed);
    let caught = catcher.join().unwrap_or_default();
    let (rss_synced, rss_peak) = rss();
    overall.finish_and_clear();
    for (_, _, pb) in bars.drain(..) {
        pb.finish_and_clear();
    }
    let (synced_at, calls_at_synced) =
        caught.ready.unwrap_or_else(|| (Instant::now(), Calls::read(calls)));
    let synced = synced.map(|_| synced_at.duration_since(started).as_secs_f64());
    let w = &mut report.warm_up;
    w.rss_peak = rss_peak;
    w.rss_synced = rss_synced;
    w.seconds_to_synced = *synced.as_ref().unwrap_or(&timeout.as_secs_f64());
    w.events_per_second = expected_events as f64 / w.seconds_to_synced.max(1e-9);
    let warm_verdict = match (&synced, caught.nodes) {
        (Err(e), _) => Err(e.clone()),
        (Ok(_), None) => Err("the initial lists were never all ingested".into()),
        (Ok(_), Some((nodes, late))) => {
            w.graph_nodes = nodes;
            w.graph_nodes_exact = !late;
            if nodes == w.expected_nodes || (late && nodes < w.expected_nodes) {
                // (Counted after collection had started: a lower bound only.)
                Ok(())
            } else {
                Err(format!("graph has {nodes} nodes, expected {}", w.expected_nodes))
            }
        }
    };
    ui.say(format!(
        "synced in {:.2} s: graph {} nodes (expected {}), {} events/s; peak RSS {:.0} MiB, {:.0} B per object above the preloaded simcluster",
        w.seconds_to_synced,
        thousands(w.graph_nodes),
        thousands(w.expected_nodes),
        thousands(w.events_per_second as u64),
        rss_peak as f64 / 1048576.0,
        rss_peak.saturating_sub(rss_before) as f64 / report.listed.max(1) as f64
    ));
    report.phases.push(Phase {
        name: "warm-up",
        objects: report.listed,
        seconds: w.seconds_to_synced,
        calls: Some(calls_at_synced),
        verdict: warm_verdict,
    });
    synced.ok().map(|_| Synced { at: synced_at, calls: calls_at_synced })
}

/// What the warm-up's close observer saw.
#[derive(Debug, Default)]
pub(super) struct Caught {
    /// Graph nodes once every initial-list event was applied, and whether the collector had
    /// made API calls already when they were counted.
    pub(super) nodes: Option<(u64, bool)>,
    /// When kube-gc turned ready, and the collector's calls then.
    pub(super) ready: Option<(Instant, Calls)>,
}
