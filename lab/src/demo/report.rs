//! What the demo measured: API calls, one row per phase, the warm-up's figures, the summary
//! table, and this process's memory.

use super::*;

/// API calls the collector made, by verb (kube-gc's `kube_gc_api_calls_total`); also the
/// tuning runs' figures (`tune`, which saves them as JSON).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, Deserialize)]
pub struct Calls {
    /// GETs.
    pub get: u64,
    /// LIST pages read to prove owners absent (`--bulk-absence-proof`; absent from figures
    /// saved before it).
    #[serde(default)]
    pub list: u64,
    /// PATCHes.
    pub patch: u64,
    /// DELETEs.
    pub delete: u64,
    /// Events created.
    pub event: u64,
}

impl Calls {
    pub(crate) fn read(c: &ApiCallCounts) -> Calls {
        Calls {
            get: c.get.load(Ordering::Relaxed),
            list: c.list.load(Ordering::Relaxed),
            patch: c.patch.load(Ordering::Relaxed),
            delete: c.delete.load(Ordering::Relaxed),
            event: c.event.load(Ordering::Relaxed),
        }
    }

    pub(crate) fn since(self, before: Calls) -> Calls {
        Calls {
            get: self.get - before.get,
            list: self.list - before.list,
            patch: self.patch - before.patch,
            delete: self.delete - before.delete,
            event: self.event - before.event,
        }
    }

    /// All calls together.
    pub fn total(&self) -> u64 {
        self.get + self.list + self.patch + self.delete + self.event
    }
}

/// One row of the summary.
#[derive(Clone, Debug)]
pub struct Phase {
    /// `preload`, `warm-up`, `garbage`, `background`, `foreground`, `orphan`.
    pub name: &'static str,
    /// Objects the phase is about (listed, collected, or in the sample families).
    pub objects: u64,
    /// Wall-clock seconds.
    pub seconds: f64,
    /// The collector's API calls during the phase (none for the preload).
    pub calls: Option<Calls>,
    /// `Ok`, or what was wrong.
    pub verdict: Result<(), String>,
}

/// Warm-up figures.
#[derive(Clone, Debug, Default)]
pub struct WarmUp {
    /// Seconds from `Controller::start` to ready (every resource synced).
    pub seconds_to_synced: f64,
    /// Graph nodes when the initial lists were all ingested.
    pub graph_nodes: u64,
    /// Whether `graph_nodes` was counted before the collector's first API call (on a loaded
    /// machine the observer may count only after: then it is a lower bound).
    pub graph_nodes_exact: bool,
    /// What WORKLOAD.md predicts: listed objects + virtual owners.
    pub expected_nodes: u64,
    /// Events applied per second over the warm-up.
    pub events_per_second: f64,
    /// Resident memory before kube-gc started (simcluster with its preloaded store), bytes.
    pub rss_before: u64,
    /// Peak resident memory from kube-gc's start to synced (VmHWM), bytes.
    pub rss_peak: u64,
    /// Resident memory once synced, bytes.
    pub rss_synced: u64,
}

/// What the demo measured and checked.
#[derive(Clone, Debug, Default)]
pub struct Report {
    /// The rows of the summary table, in order.
    pub phases: Vec<Phase>,
    /// Warm-up figures.
    pub warm_up: WarmUp,
    /// Objects listed by kube-gc (the store's objects when it started).
    pub listed: u64,
    /// The collector's `stats().deleted` at the end.
    pub collector_deleted: u64,
    /// kube-gc's argv.
    pub kube_gc_argv: Vec<String>,
    /// Remarks for the reader (what bounded a phase).
    pub notes: Vec<String>,
}

impl Report {
    /// Whether every phase's verdict is ok.
    pub fn ok(&self) -> bool {
        !self.phases.is_empty() && self.phases.iter().all(|p| p.verdict.is_ok())
    }

    /// The summary: a plain-text table, then the warm-up figures.
    pub fn table(&self) -> String {
        let mut rows: Vec<[String; 9]> = vec![[
            "phase".into(),
            "objects".into(),
            "seconds".into(),
            "get".into(),
            "list".into(),
            "patch".into(),
            "delete".into(),
            "event".into(),
            "verdict".into(),
        ]];
        for p in &self.phases {
            let c = |v: fn(&Calls) -> u64| p.calls.as_ref().map_or("-".into(), |c| thousands(v(c)));
            rows.push([
                p.name.into(),
                thousands(p.objects),
                format!("{:.2}", p.seconds),
                c(|c| c.get),
                c(|c| c.list),
                c(|c| c.patch),
                c(|c| c.delete),
                c(|c| c.event),
                match &p.verdict {
                    Ok(()) => "ok".into(),
                    Err(e) => format!("FAILED: {e}"),
                },
            ]);
        }
        let widths: Vec<usize> =
            (0..8).map(|i| rows.iter().map(|r| r[i].len()).max().unwrap_or(0)).collect();
        let mut out = String::new();
        for r in &rows {
            let _ = write!(out, "{:<w$}", r[0], w = widths[0]);
            for i in 1..8 {
                let _ = write!(out, "  {:>w$}", r[i], w = widths[i]);
            }
            let _ = writeln!(out, "  {}", r[8]);
        }
        let w = &self.warm_up;
        let mib = |b: u64| b as f64 / (1024.0 * 1024.0);
        let per = |b: u64| b as f64 / self.listed.max(1) as f64;
        let _ = writeln!(out);
        let _ = writeln!(
            out,
            "time to synced      {:.2} s ({} events/s ingested)",
            w.seconds_to_synced,
            thousands(w.events_per_second as u64)
        );
        let _ = writeln!(
            out,
            "graph nodes         {} (expected {}: {} listed + virtual owners){}",
            thousands(w.graph_nodes),
            thousands(w.expected_nodes),
            thousands(self.listed),
            if w.graph_nodes_exact { "" } else { "; counted after collection started" }
        );
        let _ = writeln!(
            out,
            "peak RSS            {:.0} MiB (VmHWM, simcluster + kube-gc in one process); {:.0} MiB before kube-gc started",
            mib(w.rss_peak),
            mib(w.rss_before)
        );
        let _ = writeln!(
            out,
            "RSS per object      {:.0} B at peak, {:.0} B once synced (above the preloaded simcluster, per listed object)",
            per(w.rss_peak.saturating_sub(w.rss_before)),
            per(w.rss_synced.saturating_sub(w.rss_before))
        );
        let _ = writeln!(out, "collector deleted   {}", thousands(self.collector_deleted));
        let _ = writeln!(out, "kube-gc flags       {}", self.kube_gc_argv[1..].join(" "));
        for n in &self.notes {
            let _ = writeln!(out, "note: {n}");
        }
        out
    }
}

/// `1234567` → `1,234,567`.
pub(super) fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// `VmRSS` and `VmHWM` of this process, bytes (0 where /proc is not there).
pub(super) fn rss() -> (u64, u64) {
    kube_gc::metrics::process::Memory::myself().map_or((0, 0), |m| (m.resident_bytes, m.peak_bytes))
}

/// Resets VmHWM to the current RSS (Linux ≥ 4.0), so that the peak measured is kube-gc's.
pub(super) fn reset_peak_rss() {
    let _ = std::fs::write("/proc/self/clear_refs", "5");
}
