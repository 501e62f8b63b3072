//! Command-line flags, named and defaulted as kube-controller-manager's where it has them.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::{ArgAction, Parser, ValueEnum};

/// Upstream's `DefaultIgnoredResources()`: events are never garbage collected.
pub const DEFAULT_IGNORED_RESOURCES: &str = "events,events.events.k8s.io";

/// `kube-gc --version`: the crate's version and the commit it was built from (`build.rs`).
pub const VERSION: &str =
    concat!(env!("CARGO_PKG_VERSION"), " (commit ", env!("KUBE_GC_GIT_COMMIT"), ")");

/// What the watchers' lists and watches ask for (`--kube-api-content-type`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum ContentType {
    /// `application/json`: JSON metadata.
    #[value(name = "application/json")]
    Json,
    /// `application/vnd.kubernetes.protobuf`: protobuf metadata, as upstream's informers.
    #[value(name = "application/vnd.kubernetes.protobuf")]
    Protobuf,
}

// `--ingest-threads`' help names the ingester's threshold for one-thread batches.
const _: () =
    assert!(kube_gc_engine::Ingester::SMALL_BATCH == 512, "update --ingest-threads' help");

/// kube-gc: the Kubernetes garbage collector (ownerReference cascading deletion).
///
/// Run kube-controller-manager with `--controllers=*,-garbagecollector` (the controller's
/// name up to v1.27, still an alias after; `-garbage-collector-controller` only from v1.28,
/// and refused before) and this in its place.
#[derive(Parser, Debug, Clone)]
// A flag given twice takes its last value, as kube-controller-manager's (pflag) do, so that an
// overlay can append to a Deployment's arguments.
#[command(name = "kube-gc", version = VERSION, about, long_about = None, args_override_self = true)]
pub struct Flags {
    /// Path to a kubeconfig. Without it, the files $KUBECONFIG lists (merged as kubectl merges
    /// them, missing ones skipped), ~/.kube/config, then the in-cluster service account are
    /// tried, in that order.
    #[arg(long)]
    pub kubeconfig: Option<PathBuf>,

    /// Workers for attemptToDelete, and as many for attemptToOrphan
    /// (kube-controller-manager's `--concurrent-gc-syncs`).
    #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u32).range(1..=10_000))]
    pub concurrent_gc_syncs: u32,

    /// Queries per second to the API server (`--kube-api-qps`). The collector's calls run at
    /// twice this rate, as kube-controller-manager applies it to its garbage collector since
    /// v1.23 (see `Flags::collector_qps`); Warning events have a small budget of their own.
    #[arg(long, default_value_t = 20.0)]
    pub kube_api_qps: f64,

    /// Burst of the collector's calls (`--kube-api-burst`), as given.
    #[arg(long, default_value_t = 30, value_parser = clap::value_parser!(u32).range(1..))]
    pub kube_api_burst: u32,

    /// Whether to collect garbage at all (`--enable-garbage-collector`). When false the
    /// process only serves its health endpoints.
    #[arg(long, default_value_t = true, action = ArgAction::Set, num_args = 0..=1, default_missing_value = "true")]
    pub enable_garbage_collector: bool,

    /// Run only while holding a coordination.k8s.io Lease (`--leader-elect`; on by default,
    /// as kube-controller-manager's: `--leader-elect=false` for a single local run).
    #[arg(long, default_value_t = true, action = ArgAction::Set, num_args = 0..=1, default_missing_value = "true")]
    pub leader_elect: bool,

    /// How long a lease is valid after its last renewal.
    #[arg(long, default_value = "15s", value_parser = parse_duration)]
    pub leader_elect_lease_duration: Duration,

    /// How long the leader keeps trying to renew before giving up leadership.
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    pub leader_elect_renew_deadline: Duration,

    /// How often candidates try to acquire or renew.
    #[arg(long, default_value = "2s", value_parser = parse_duration)]
    pub leader_elect_retry_period: Duration,

    /// Name of the Lease.
    #[arg(long, default_value = "kube-gc")]
    pub leader_elect_resource_name: String,

    /// Namespace of the Lease.
    #[arg(long, default_value = "kube-system")]
    pub leader_elect_resource_namespace: String,

    /// Resources never watched nor collected, as `resource.group` (core group: `resource`),
    /// comma-separated; the list replaces the default (upstream's: core and events.k8s.io
    /// events), and an empty one ignores nothing.
    #[arg(long, default_value = DEFAULT_IGNORED_RESOURCES, value_delimiter = ',')]
    pub gc_ignored_resources: Vec<String>,

    /// Graph shards (a power of two). More shards, less lock contention.
    #[arg(long, default_value_t = 64)]
    pub shards: usize,

    /// Most events applied to the graph per batch.
    #[arg(long, default_value_t = 4096, value_parser = clap::value_parser!(u32).range(1..))]
    pub batch_size: u32,

    /// Threads applying each batch, 1 to 1024 (default: the machine's cores); a batch of fewer
    /// than 512 events takes one. More than the cores slows ingestion down (each batch waits
    /// for its slowest thread): a warning says so.
    #[arg(long, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=1024))]
    pub ingest_threads: Option<usize>,

    /// Address of a plain-HTTP server of the same endpoints as `--secure-port`, without
    /// authentication, for local runs and tools on the same host. Loopback by default: it serves
    /// the whole dependency graph, so expose it only on purpose.
    #[arg(long, default_value = "127.0.0.1:10267")]
    pub debug_addr: SocketAddr,

    /// Allow `--debug-addr` on a non-loopback address.
    #[arg(long, default_value_t = false)]
    pub debug_addr_any: bool,

    /// The HTTPS port of `/metrics`, the debug endpoints and the health checks, as
    /// kube-controller-manager's `--secure-port` (0: none). Every path but
    /// `--authorization-always-allow-paths` needs a bearer token the API server authenticates
    /// (TokenReview) and authorizes (SubjectAccessReview).
    #[arg(long, default_value_t = 10257)]
    pub secure_port: u16,

    /// The address of `--secure-port` (all interfaces by default, as upstream's).
    #[arg(long, default_value = "0.0.0.0")]
    pub bind_address: std::net::IpAddr,

    /// The secure port's certificate, PEM (with any intermediates after it). Without it and
    /// `--tls-private-key-file`, a self-signed certificate is generated at start.
    #[arg(long)]
    pub tls_cert_file: Option<PathBuf>,

    /// The private key of `--tls-cert-file`, PEM.
    #[arg(long)]
    pub tls_private_key_file: Option<PathBuf>,

    /// Paths served on the secure port without authentication or authorization: exact, or a
    /// prefix ending in `*` (as upstream's flag).
    #[arg(long, default_value = "/healthz,/readyz,/livez", value_delimiter = ',')]
    pub authorization_always_allow_paths: Vec<String>,

    /// How long to wait for every resource to sync before collecting anyway, with a warning
    /// (upstream since v1.32: 30s).
    #[arg(long, default_value = "30s", value_parser = parse_duration)]
    pub initial_sync_timeout: Duration,

    /// How often to re-run discovery and start / stop watchers (upstream: 30s).
    #[arg(long, default_value = "30s", value_parser = parse_duration)]
    pub resync_period: Duration,

    /// Capacity of the absent-owner cache (upstream: 500).
    #[arg(long, default_value_t = kube_gc_engine::absent_owner_cache::DEFAULT_CAPACITY)]
    pub absent_owner_cache_size: usize,

    /// How many owners orphaned by kube-gc are remembered, so that a dependent observed too late
    /// to be orphaned with the others has its reference removed rather than being collected
    /// (0: upstream's behaviour).
    #[arg(long, default_value_t = kube_gc_engine::collector::orphaned_owners::DEFAULT_CAPACITY)]
    pub orphaned_owners_memory: usize,

    /// How long orphaning, and the steps of a foreground deletion that rest on the graph showing
    /// no dependents, wait for a watcher that fell behind (its watch broke, it is relisting, or
    /// the watch after its list has not yet delivered) to catch up, so that the dependents it
    /// has not delivered are orphaned too (rather than collected later) and gone before their
    /// foreground owner (0s: upstream's behaviour, no wait).
    /// `--orphan-catch-up-timeout`, its name before it covered foreground deletion, still works.
    #[arg(
        long,
        alias = "orphan-catch-up-timeout",
        default_value = "60s",
        value_parser = parse_duration
    )]
    pub watcher_catch_up_timeout: Duration,

    /// Most distinct UIDs that are not UUIDs this process holds, counted over its life (they
    /// are never released; any writer of ownerReferences can invent them); past it, a
    /// reference naming a new one is held as unrepresentable (its object stays in the
    /// graph; no decision goes past that reference), counted in
    /// `kube_gc_unrepresentable_owner_references_total`.
    #[arg(long, default_value_t = kube_gc_engine::identity::DEFAULT_MAX_INTERNED_UIDS)]
    pub max_non_uuid_uids: usize,

    /// Most distinct apiVersion and kind strings, and pairs of them, held, counted over the
    /// process's life, served types included (never released; any writer of ownerReferences
    /// can invent them; every type the cluster serves is held regardless, even past it);
    /// past it, a reference naming a new one, or a string longer than 317 bytes, is held under
    /// one type no server serves (its object stays in the graph; no decision goes past that
    /// reference, as upstream's REST mapping fails on it), counted in
    /// `kube_gc_unrepresentable_owner_references_total`.
    #[arg(long, default_value_t = kube_gc_engine::identity::DEFAULT_MAX_INTERNED_TYPE_STRINGS)]
    pub max_owner_types: usize,

    /// Skip re-verifying a virtual owner once the informer has observed it in place (it would
    /// cost two GETs and can find nothing upstream's other paths do not; see the engine's
    /// `CollectorOptions`). `=false` reproduces upstream's API calls exactly.
    #[arg(long, default_value_t = true, action = ArgAction::Set, num_args = 0..=1, default_missing_value = "true")]
    pub skip_observed_verification: bool,

    /// Collect during warm-up, before every resource has synced: only deletions that live
    /// reads prove (every owner reference absent, background propagation); everything else
    /// waits for sync. `=false`: nothing is collected before sync, as upstream.
    #[arg(long, default_value_t = true, action = ArgAction::Set, num_args = 0..=1, default_missing_value = "true")]
    pub early_collection: bool,

    /// Process likely garbage (unverified virtual owners, dependents of deleted or absent
    /// owners, foreground deletions) before re-checks, with a fairness bound.
    #[arg(long, default_value_t = true, action = ArgAction::Set, num_args = 0..=1, default_missing_value = "true")]
    pub garbage_first: bool,

    /// Each watcher's first list from the API server's watch cache (`resourceVersion=0`, as
    /// client-go's informers do): one whole answer per resource, served from the server's
    /// memory, where a consistent list reads every object from etcd in pages of 500. Relists
    /// are always consistent. The answer is decoded as it arrives, in either
    /// `--kube-api-content-type` (measured at 100k objects on kube-apiserver 1.20: 68-75 MiB
    /// peak with protobuf, 67-70 MiB with JSON; paged, at an earlier build, 97-130 MiB; the
    /// sync 4x sooner, and etcd idle). `=false`: consistent paged lists.
    #[arg(long, default_value_t = true, action = ArgAction::Set, num_args = 0..=1, default_missing_value = "true")]
    pub list_from_watch_cache: bool,

    /// The media type the watchers' lists and watches ask for (kube-controller-manager's
    /// `--kube-api-content-type`): `application/vnd.kubernetes.protobuf`, as upstream's
    /// metadata informers (JSON where the server cannot encode metadata as protobuf), or
    /// `application/json`. The same list/watch loop reads either. GETs, PATCHes and DELETEs
    /// are JSON either way.
    #[arg(long, value_enum, default_value_t = ContentType::Protobuf)]
    pub kube_api_content_type: ContentType,

    /// Decide on an object from the graph's copy of it (ownerReferences and resourceVersion
    /// from its last watch event) instead of a GET; the DELETE carries that resourceVersion
    /// as a precondition, so an object changed since is re-read, never deleted on stale data.
    /// Owners are still read live. `=false`: upstream's GET of every item.
    #[arg(long, default_value_t = true, action = ArgAction::Set, num_args = 0..=1, default_missing_value = "true")]
    pub read_items_from_graph: bool,

    /// Verify virtual owners with one paged consistent LIST of their resource (metadata only,
    /// from etcd) rather than a GET each: an owner the list does not hold is absent, as a GET's
    /// 404 shows. Owners a list cannot answer, and every owner of a list that fails, still take
    /// the GET. `=false`: a GET per owner, as upstream.
    #[arg(long, default_value_t = true, action = ArgAction::Set, num_args = 0..=1, default_missing_value = "true")]
    pub bulk_absence_proof: bool,

    /// Shadow mode: run beside the collector in charge with read-only permissions, decide
    /// everything and write nothing; each would-be write is logged and counted, and
    /// `/debug/controllers/garbagecollector/shadow` compares the would-be deletions with
    /// what happened. Needs `--leader-elect=false` (a Lease is a write).
    #[arg(long, default_value_t = false, action = ArgAction::Set, num_args = 0..=1, default_missing_value = "true")]
    pub dry_run: bool,

    /// Log verbosity, as klog's: 2 (to 4) logs each decision, monitors and syncs, 5
    /// everything (tracing has three levels where klog has V levels).
    #[arg(short = 'v', long = "v", default_value_t = 0)]
    pub verbosity: u8,

    /// Per-module verbosity, as klog's `--vmodule`: comma-separated `MODULE=N`, where MODULE
    /// is a module of kube-gc or its engine (`collector`, `ingest`, `watchers`, `builder`, …,
    /// or a path such as `collector::absence_proofs`), N as `-v`.
    #[arg(long, value_delimiter = ',', value_parser = parse_vmodule)]
    pub vmodule: Vec<(String, u8)>,

    /// Log format, as kube-controller-manager's `--logging-format`: `text` or `json` (klog's
    /// structured shape, one object per line: `ts`, `caller`, `msg`, `v` or `err`, fields).
    #[arg(long, default_value = "text", value_parser = ["text", "json"])]
    pub logging_format: String,
}

/// Parses one `--vmodule` entry, `MODULE=N`.
fn parse_vmodule(text: &str) -> Result<(String, u8), String> {
    let err = || format!("invalid --vmodule entry {text:?} (expected MODULE=N, e.g. collector=4)");
    let (module, level) = text.split_once('=').ok_or_else(err)?;
    let valid = !module.is_empty()
        && module.split("::").all(|part| {
            !part.is_empty() && part.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        });
    if !valid {
        return Err(err());
    }
    Ok((module.to_owned(), level.parse().map_err(|_| err())?))
}

/// The tracing directive of a klog level: V(0-1) `info`, V(2-4) `debug` (decisions, syncs),
/// V(5+) `trace`.
pub fn level_directive(verbosity: u8) -> &'static str {
    match verbosity {
        0..=1 => "info",
        2..=4 => "debug",
        _ => "trace",
    }
}

impl Flags {
    /// The log filter `-v` and `--vmodule` call for: other crates at `warn`, kube-gc's at `-v`'s
    /// level, each `--vmodule` module (in kube-gc and in its engine) at its own.
    pub fn log_filter(&self) -> String {
        let ours = level_directive(self.verbosity);
        let mut filter = format!("warn,kube_gc={ours},kube_gc_engine={ours}");
        for (module, level) in &self.vmodule {
            let level = level_directive(*level);
            filter
                .push_str(&format!(",kube_gc::{module}={level},kube_gc_engine::{module}={level}"));
        }
        filter
    }
}

impl Flags {
    /// The collector's steady rate: twice `--kube-api-qps`, as kube-controller-manager has built
    /// its garbage collector's metadata client since v1.23 (kubernetes#104966: `QPS *= 2`,
    /// burst unchanged), so that the flag means what it means to the newest release.
    pub fn collector_qps(&self) -> f64 {
        self.kube_api_qps * 2.0
    }

    /// Checks values clap cannot.
    pub fn validate(&self) -> Result<(), String> {
        if !self.shards.is_power_of_two() || self.shards > kube_gc_engine::graph::MAX_SHARDS {
            return Err(format!(
                "--shards must be a power of two up to 65536, got {}",
                self.shards
            ));
        }
        if !(self.kube_api_qps >= MIN_KUBE_API_QPS && self.kube_api_qps.is_finite()) {
            return Err(format!(
                "--kube-api-qps must be a finite number of at least {MIN_KUBE_API_QPS} (a call every {} s), got {}",
                1.0 / MIN_KUBE_API_QPS,
                self.kube_api_qps
            ));
        }
        // The rate limiter counts nanoseconds in a u64: a full bucket's refill must fit.
        let refill_seconds =
            f64::from(self.kube_api_burst.saturating_sub(1)) / self.collector_qps();
        if refill_seconds >= MAX_REFILL_SECONDS {
            return Err(format!(
                "--kube-api-burst {} at --kube-api-qps {} takes over 250 years to refill; \
                 lower the burst or raise the rate",
                self.kube_api_burst, self.kube_api_qps
            ));
        }
        if self.initial_sync_timeout.is_zero() {
            return Err(
                "--initial-sync-timeout must be more than zero: at zero, orphanings and foreground \
                 deletions would go ahead before any dependent was listed"
                    .into(),
            );
        }
        if self.resync_period < MIN_RESYNC_PERIOD {
            return Err(format!(
                "--resync-period must be at least 1s (discovery runs this often), got {:?}",
                self.resync_period
            ));
        }
        if !self.debug_addr.ip().is_loopback() && !self.debug_addr_any {
            return Err(format!(
                "--debug-addr {} is not a loopback address; pass --debug-addr-any to serve the graph there",
                self.debug_addr
            ));
        }
        if self.tls_cert_file.is_some() != self.tls_private_key_file.is_some() {
            return Err("--tls-cert-file and --tls-private-key-file go together".into());
        }
        if self.dry_run && self.leader_elect {
            return Err(
                "--dry-run writes nothing, a Lease included: run it with --leader-elect=false"
                    .into(),
            );
        }
        if self.watcher_catch_up_timeout > MAX_WATCHER_CATCH_UP_TIMEOUT {
            return Err(format!(
                "--watcher-catch-up-timeout must be at most 24h, got {:?}",
                self.watcher_catch_up_timeout
            ));
        }
        if let Some(bad) = self.gc_ignored_resources.iter().find(|r| !is_resource_key(r.trim())) {
            return Err(format!(
                "--gc-ignored-resources takes resource.group names (core group: resource), lower case, comma-separated, such as {DEFAULT_IGNORED_RESOURCES}; got {bad:?}"
            ));
        }
        // Upstream's rule: a rule that is not a prefix ending in `*` is matched exactly, so a
        // `*` elsewhere would never match, silently.
        let paths = self.authorization_always_allow_paths.iter().map(|p| p.trim());
        if let Some(bad) =
            paths.into_iter().find(|p| p.strip_suffix('*').unwrap_or(p).contains('*'))
        {
            return Err(format!(
                "--authorization-always-allow-paths: only a trailing * is allowed, got {bad:?}"
            ));
        }
        if self.absent_owner_cache_size == 0 {
            return Err("--absent-owner-cache-size must be at least 1".into());
        }
        if self.leader_elect {
            self.validate_leader_election()?;
        }
        Ok(())
    }

    /// client-go's rules for a leader elector (`NewLeaderElector`): every period positive, the
    /// lease longer than the renew deadline, and the deadline longer than 1.2 retry periods
    /// (a retry jittered by up to 20% must fit in it); and a Lease with a name and namespace.
    fn validate_leader_election(&self) -> Result<(), String> {
        for (flag, period) in [
            ("--leader-elect-lease-duration", self.leader_elect_lease_duration),
            ("--leader-elect-renew-deadline", self.leader_elect_renew_deadline),
            ("--leader-elect-retry-period", self.leader_elect_retry_period),
        ] {
            if period.is_zero() {
                return Err(format!("{flag} must be greater than zero"));
            }
        }
        // The Lease records whole seconds (`leaseDurationSeconds`), and a standby judges the
        // lease by the record: 900ms would be written as 0, a lease every standby takes at
        // once, and 1.5s as 1, shorter than a renew deadline of 1.2s.
        let lease = self.leader_elect_lease_duration;
        if lease.subsec_nanos() != 0 || lease.as_secs() > i32::MAX as u64 {
            return Err(format!(
                "--leader-elect-lease-duration must be a whole number of seconds (the Lease records seconds), got {lease:?}"
            ));
        }
        if self.leader_elect_renew_deadline >= self.leader_elect_lease_duration {
            return Err(
                "--leader-elect-renew-deadline must be shorter than --leader-elect-lease-duration"
                    .into(),
            );
        }
        if self.leader_elect_renew_deadline.as_secs_f64()
            <= 1.2 * self.leader_elect_retry_period.as_secs_f64()
        {
            return Err(format!(
                "--leader-elect-renew-deadline ({:?}) must be longer than 1.2 times --leader-elect-retry-period ({:?})",
                self.leader_elect_renew_deadline, self.leader_elect_retry_period
            ));
        }
        if self.leader_elect_resource_name.is_empty()
            || self.leader_elect_resource_namespace.is_empty()
        {
            return Err(
                "--leader-elect-resource-name and --leader-elect-resource-namespace must not be empty"
                    .into(),
            );
        }
        // kube-controller-manager's own Lease: held by kube-gc, every other controller would
        // stop; held by kube-controller-manager, kube-gc would never start.
        if self.leader_elect_resource_name == "kube-controller-manager"
            && self.leader_elect_resource_namespace == "kube-system"
        {
            return Err(
                "--leader-elect-resource-name=kube-controller-manager in kube-system is kube-controller-manager's own Lease: \
                 kube-gc needs one of its own (the default, kube-gc)"
                    .into(),
            );
        }
        Ok(())
    }
}

/// The shortest `--resync-period`: discovery lists every API group, so it should not run more
/// often than this.
const MIN_RESYNC_PERIOD: Duration = Duration::from_secs(1);

/// The longest `--watcher-catch-up-timeout`: a day is "until the watcher is back" in practice,
/// and keeps every deadline representable.
const MAX_WATCHER_CATCH_UP_TIMEOUT: Duration = Duration::from_secs(24 * 3600);

/// Whether `text` can name a resource as `resource.group` (or nothing, in an empty list): a
/// lower-case plural and a DNS subdomain, as discovery spells them.
fn is_resource_key(text: &str) -> bool {
    text.is_empty()
        || text.split('.').all(|label| {
            !label.is_empty()
                && label.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        })
}

/// The lowest `--kube-api-qps`: one call every 1000 s (a lower rate is no budget at all, and
/// its period would pass what the rate limiter can hold).
const MIN_KUBE_API_QPS: f64 = 0.001;
/// The longest a full `--kube-api-burst` may take to refill: the rate limiter counts
/// nanoseconds in a u64 (584 years), and adds the time since it started to a full bucket's:
/// half of it.
const MAX_REFILL_SECONDS: f64 = 250.0 * 365.25 * 86400.0;

/// The longest duration Go's `time.Duration` holds (2^63 - 1 ns, about 292 years), and so the
/// longest any of kube-controller-manager's duration flags takes; longer ones overflow the
/// deadlines computed from them.
const MAX_DURATION: Duration = Duration::new(9_223_372_036, 854_775_807);

/// Parses Go-style durations: `30s`, `1m`, `500ms`, `1h`, `1m30s`, up to Go's longest
/// (2562047h47m16.854775807s).
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let err = || format!("invalid duration {text:?} (examples: 30s, 500ms, 1m30s)");
    if text == "0" {
        return Ok(Duration::ZERO);
    }
    let mut total = Duration::ZERO;
    let mut rest = text;
    if rest.is_empty() {
        return Err(err());
    }
    while !rest.is_empty() {
        let digits = rest.find(|c: char| !(c.is_ascii_digit() || c == '.')).ok_or_else(err)?;
        let value: f64 = rest[..digits].parse().map_err(|_| err())?;
        rest = &rest[digits..];
        let unit_len = rest.find(|c: char| c.is_ascii_digit()).unwrap_or(rest.len());
        let scale = match &rest[..unit_len] {
            "ns" => 1e-9,
            "us" | "µs" => 1e-6,
            "ms" => 1e-3,
            "s" => 1.0,
            "m" => 60.0,
            "h" => 3600.0,
            _ => return Err(err()),
        };
        let term = Duration::try_from_secs_f64(value * scale).map_err(|_| err())?;
        total = total.checked_add(term).filter(|t| *t <= MAX_DURATION).ok_or_else(|| {
            format!("duration {text:?} is longer than the longest one Go holds (2562047h47m16s)")
        })?;
        rest = &rest[unit_len..];
    }
    Ok(total)
}

#[cfg(test)]
mod tests;
