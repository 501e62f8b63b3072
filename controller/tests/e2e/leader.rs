//! Leader election against the real server (kube-gc only): candidates started with
//! `--leader-elect=true` on one coordination.k8s.io Lease, short timings (lease 4 s, renew
//! deadline 3 s, retry 1 s). Exactly one leads and collects; the standby takes over after a
//! `kill -9` of the leader; a leader that finds its lease taken (after a freeze past the lease
//! duration, or overwritten by someone else) exits non-zero, as kube-controller-manager does.

use std::time::{Duration, Instant};

use anyhow::{Context, bail, ensure};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, PostParams};

use super::cluster::{Ctx, Kind, OwnerRef, Snapshot, Wait, pod, rc};
use super::collector::{Collector, Which, http_get};

/// The lease timings given to every candidate.
const TIMINGS: [&str; 3] = [
    "--leader-elect-lease-duration=4s",
    "--leader-elect-renew-deadline=3s",
    "--leader-elect-retry-period=1s",
];

/// What kube-gc logs (info) when it starts competing, and when it wins.
const ATTEMPTING: &str = "attempting to acquire leader lease";
const ACQUIRED: &str = "successfully acquired lease";
/// What it logs (error) before exiting on a lost lease.
const LOST: &str = "leaderelection lost";

/// A kube-gc candidate: its own log, and `HOSTNAME=e2e-<tag>`, so that its lease identity is
/// `e2e-<tag>_<random>`.
struct Candidate {
    tag: &'static str,
    gc: Collector,
}

impl Candidate {
    fn new(cx: &Ctx<'_>, tag: &'static str) -> Candidate {
        let te = cx.collector.testenv();
        let mut gc = Collector::new(Which::KubeGc, &te);
        gc.log = te.dir.join(format!("kube-gc-leader-{tag}.log"));
        gc.set_env("HOSTNAME", &format!("e2e-{tag}"));
        Candidate { tag, gc }
    }

    fn holds(&self, holder: &str) -> bool {
        holder.starts_with(&format!("e2e-{}_", self.tag))
    }

    /// Waits until it exits by itself; fails unless it exits non-zero having logged [`LOST`].
    fn expect_exit_on_loss(&mut self, timeout: Duration) -> anyhow::Result<()> {
        let deadline = Instant::now() + timeout;
        let status = loop {
            if let Some(status) = self.gc.exit_status() {
                break status;
            }
            ensure!(
                Instant::now() < deadline,
                "kube-gc {} still runs {timeout:?} after losing its lease:\n{}",
                self.tag,
                self.gc.log_tail(15)
            );
            std::thread::sleep(Duration::from_millis(100));
        };
        ensure!(
            !status.success(),
            "kube-gc {} exited successfully ({status}) on a lost lease",
            self.tag
        );
        ensure!(
            self.gc.log_since_start().contains(LOST),
            "kube-gc {} exited ({status}) without logging {LOST:?}:\n{}",
            self.tag,
            self.gc.log_tail(15)
        );
        eprintln!("    · kube-gc {} exited ({status}) on losing its lease", self.tag);
        Ok(())
    }
}

/// Fails unless `cand` answers as a standby: `/healthz` 200, `/readyz` not 200, an empty
/// graph and no deletion.
fn ensure_standing_by(cand: &Candidate) -> anyhow::Result<()> {
    let port = cand.gc.debug_port;
    let health = http_get(port, "/healthz").map(|(code, _)| code);
    ensure!(
        matches!(health, Ok(200)),
        "standby {} fails its liveness probe: /healthz {health:?}",
        cand.tag
    );
    let ready = http_get(port, "/readyz").map(|(code, _)| code);
    ensure!(matches!(ready, Ok(503)), "standby {}: /readyz {ready:?}, want 503", cand.tag);
    for metric in ["kube_gc_graph_nodes", "kube_gc_deleted_total"] {
        let n = cand.gc.metric(metric)?;
        ensure!(n == 0.0, "standby {}: {metric} {n}, want 0", cand.tag);
    }
    Ok(())
}

/// `SIGCONT` on drop: a frozen process must not outlive a failed scenario (its `SIGTERM`
/// would wait for the thaw).
struct Frozen(u32);

impl Frozen {
    fn freeze(pid: u32) -> anyhow::Result<Frozen> {
        signal("-STOP", pid)?;
        Ok(Frozen(pid))
    }
}

impl Drop for Frozen {
    fn drop(&mut self) {
        let _ = signal("-CONT", self.0);
    }
}

fn signal(sig: &str, pid: u32) -> anyhow::Result<()> {
    let status = std::process::Command::new("kill").arg(sig).arg(pid.to_string()).status()?;
    ensure!(status.success(), "kill {sig} {pid} failed");
    Ok(())
}

/// The lease's holder identity and transitions (`None` before anyone created it).
async fn lease(api: &Api<Lease>, name: &str) -> anyhow::Result<Option<(String, i32)>> {
    Ok(api.get_opt(name).await?.map(|l| {
        let spec = l.spec.unwrap_or_default();
        (spec.holder_identity.unwrap_or_default(), spec.lease_transitions.unwrap_or(0))
    }))
}

/// Waits until `cand` holds the lease; returns its transitions.
async fn wait_holder(
    api: &Api<Lease>,
    name: &str,
    cand: &Candidate,
    timeout: Duration,
) -> anyhow::Result<i32> {
    let started = Instant::now();
    loop {
        let got = lease(api, name).await?;
        if let Some((holder, transitions)) = &got {
            if cand.holds(holder) {
                eprintln!(
                    "    · kube-gc {} holds the lease ({:.1} s, transitions {transitions})",
                    cand.tag,
                    started.elapsed().as_secs_f64()
                );
                return Ok(*transitions);
            }
        }
        ensure!(
            started.elapsed() < timeout,
            "kube-gc {} did not take the lease within {timeout:?} (lease: {got:?})",
            cand.tag
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Every object: garbage (`garbage-*`, dangling owner) gone, the control group (`live-rc`
/// and its pods) intact.
fn wanted(cx: &Ctx<'_>) -> Snapshot {
    cx.named("")
        .into_iter()
        .map(|l| {
            let state = if l.starts_with("garbage-") {
                "gone"
            } else if l == "live-rc" {
                "live"
            } else {
                "live owners=[ReplicationController/live-rc]"
            };
            (l, state.to_owned())
        })
        .collect()
}

async fn garbage(cx: &mut Ctx<'_>, round: u32, ghost: &OwnerRef) -> anyhow::Result<()> {
    let items = (0..10)
        .map(|i| {
            (format!("garbage-{round}-{i:02}"), Kind::pod(), pod(std::slice::from_ref(ghost), &[]))
        })
        .collect();
    cx.create_many(items).await
}

/// Two candidates at once: exactly one takes the lease and serves (the other stays a
/// candidate that neither serves nor collects); the leader collects. `kill -9` of the leader:
/// the standby takes the lease (transitions +1) and collects garbage created after the kill.
/// A third candidate; the leader frozen (`SIGSTOP`) past the lease duration: the third takes
/// the lease, and the thawed old leader exits non-zero. The lease overwritten to another
/// identity: the leader exits non-zero and leaves the lease to it.
pub async fn leader_election_single_leader_failover_and_loss(
    cx: &mut Ctx<'_>,
) -> anyhow::Result<()> {
    cx.collector.stop()?;
    let name = format!("kube-gc-{}", cx.suffix);
    let mut flags = vec![
        "--leader-elect=true".to_owned(),
        format!("--leader-elect-resource-name={name}"),
        format!("--leader-elect-resource-namespace={}", cx.ns),
    ];
    flags.extend(TIMINGS.iter().map(|s| s.to_string()));
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    let api: Api<Lease> = Api::namespaced(cx.client.clone(), &cx.ns);
    // Dropped (every process stopped) on every way out, panics included.
    let mut cands = [Candidate::new(cx, "a"), Candidate::new(cx, "b"), Candidate::new(cx, "c")];

    cx.create("live-rc", Kind::rc(), rc(&[], &[])).await?;
    let live = cx.owner("live-rc");
    let items =
        (0..5).map(|i| (format!("live-{i}"), Kind::pod(), pod(std::slice::from_ref(&live), &[])));
    cx.create_many(items.collect()).await?;
    let ghost = OwnerRef::new("v1", "ReplicationController", "ghost", &cx.fake_uuid("ghost"));
    garbage(cx, 1, &ghost).await?;

    // 1. a and b at once: one leads.
    cands[0].gc.spawn(&flags)?;
    cands[1].gc.spawn(&flags)?;
    let deadline = Instant::now() + Duration::from_secs(90);
    let (l, s) = loop {
        for c in &mut cands[..2] {
            ensure!(c.gc.is_running(), "kube-gc {} exited:\n{}", c.tag, c.gc.log_tail(15));
        }
        match (cands[0].gc.is_ready(), cands[1].gc.is_ready()) {
            (true, true) => bail!("both candidates serve /readyz: two leaders"),
            (true, false) => break (0, 1),
            (false, true) => break (1, 0),
            (false, false) => {}
        }
        ensure!(Instant::now() < deadline, "no candidate became ready within 90 s");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let (holder, transitions) = lease(&api, &name).await?.context("no lease after a leader")?;
    ensure!(
        cands[l].holds(&holder),
        "kube-gc {} leads but the lease names {holder:?}",
        cands[l].tag
    );
    ensure!(transitions == 0, "first acquisition counted {transitions} transitions");
    eprintln!("    · kube-gc {} leads ({holder}), {} stands by", cands[l].tag, cands[s].tag);
    // Three retry periods: the standby keeps trying and never takes the lease; it is alive
    // (its liveness probe passes), not ready, and watches and collects nothing.
    let watch = Instant::now();
    while watch.elapsed() < Duration::from_secs(3) {
        ensure!(cands[s].gc.is_running(), "standby exited:\n{}", cands[s].gc.log_tail(15));
        ensure_standing_by(&cands[s])?;
        ensure!(cands[l].gc.is_ready(), "the leader stopped serving /readyz");
        let now = lease(&api, &name).await?.map(|(h, _)| h);
        ensure!(now.as_deref() == Some(holder.as_str()), "the lease moved to {now:?}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // leader_election_master_status{name=<lease>}: 1 on the leader, 0 on the standby.
    let status = format!("leader_election_master_status{{name=\"{name}\"}}");
    for (c, want) in [(l, 1.0), (s, 0.0)] {
        let got = cands[c].gc.metric(&status)?;
        ensure!(got == want, "kube-gc {}: {status} = {got}, want {want}", cands[c].tag);
    }
    let standby_log = cands[s].gc.log_since_start();
    ensure!(standby_log.contains(ATTEMPTING), "the standby never tried to acquire the lease");
    ensure!(!standby_log.contains(ACQUIRED), "the standby logged acquiring the lease");
    let want = wanted(cx);
    cx.expect_snapshot("collected by the leader", want, Wait::DEFAULT).await?;

    // 2. kill -9 of the leader: the standby takes over and collects.
    cands[l].gc.kill9()?;
    eprintln!("    · kill -9 of the leader {}", cands[l].tag);
    garbage(cx, 2, &ghost).await?;
    let t = wait_holder(&api, &name, &cands[s], Duration::from_secs(30)).await?;
    ensure!(t == transitions + 1, "lease transitions {transitions} -> {t} on failover");
    cands[s].gc.wait_ready(Duration::from_secs(60))?;
    let want = wanted(cx);
    cx.expect_snapshot("collected by the new leader", want, Wait::DEFAULT).await?;

    // 3. The leader frozen past the lease duration: a new candidate takes over; the thawed
    // leader finds the lease taken and exits.
    let c = 2;
    cands[c].gc.spawn(&flags)?;
    let deadline = Instant::now() + Duration::from_secs(30);
    while !cands[c].gc.log_since_start().contains(ATTEMPTING) {
        ensure!(cands[c].gc.is_running(), "kube-gc c exited:\n{}", cands[c].gc.log_tail(15));
        ensure!(Instant::now() < deadline, "kube-gc c did not start competing within 30 s");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    ensure_standing_by(&cands[c])?;
    let frozen = Frozen::freeze(cands[s].gc.pid().context("no pid")?)?;
    eprintln!("    · SIGSTOP of the leader {}", cands[s].tag);
    let t2 = wait_holder(&api, &name, &cands[c], Duration::from_secs(30)).await?;
    ensure!(t2 == t + 1, "lease transitions {t} -> {t2} on failover");
    cands[c].gc.wait_ready(Duration::from_secs(60))?;
    drop(frozen);
    eprintln!("    · SIGCONT of {}", cands[s].tag);
    cands[s].expect_exit_on_loss(Duration::from_secs(20))?;
    garbage(cx, 3, &ghost).await?;
    let want = wanted(cx);
    cx.expect_snapshot("collected by the third leader", want, Wait::DEFAULT).await?;

    // 4. The lease overwritten to another identity: the leader exits and leaves it.
    const USURPER: &str = "e2e-usurper";
    let mut tries = 0;
    loop {
        let mut l = api.get(&name).await?;
        let spec = l.spec.get_or_insert_with(Default::default);
        spec.holder_identity = Some(USURPER.to_owned());
        spec.lease_duration_seconds = Some(60);
        spec.renew_time = Some(MicroTime(Timestamp::now()));
        // The resourceVersion makes this a compare-and-swap with the leader's renewals.
        match api.replace(&name, &PostParams::default(), &l).await {
            Ok(_) => break,
            Err(kube::Error::Api(e)) if e.code == 409 && tries < 10 => tries += 1,
            Err(e) => return Err(e).context("overwrite the lease"),
        }
    }
    eprintln!("    · lease overwritten to {USURPER}");
    cands[c].expect_exit_on_loss(Duration::from_secs(20))?;
    let now = lease(&api, &name).await?.map(|(h, _)| h);
    ensure!(now.as_deref() == Some(USURPER), "the exiting leader rewrote the lease: {now:?}");

    drop(cands);
    cx.collector.start(&[])
}

/// The lease flags of a candidate on the Lease `name` in `cx`'s namespace.
fn lease_flags(cx: &Ctx<'_>, name: &str) -> Vec<String> {
    let mut flags = vec![
        "--leader-elect=true".to_owned(),
        format!("--leader-elect-resource-name={name}"),
        format!("--leader-elect-resource-namespace={}", cx.ns),
    ];
    flags.extend(TIMINGS.iter().map(|s| s.to_string()));
    flags
}

/// Issue #11's one-writer checks against the real server.
///
/// 1. A leader whose renewals are blocked (its connections to the API server cut by a proxy,
///    as by a network partition) exits before a standby can take the lease: its own
///    watchdog ends it once the renew deadline (3 s) has passed since its last renewal began,
///    while the standby must see the lease unchanged for the lease duration (4 s). The exit is
///    observed before the standby holds the lease.
/// 2. Candidates with clocks an hour apart never both lead: a standby whose wall clock runs an
///    hour ahead (libfaketime) sees the leader's renewTimes an hour old, which is what made
///    the old expiry check take over a lease being renewed; it judges expiry by the record
///    changing on its own clock, so it stands by as long as the leader renews, and takes over
///    once the leader is gone.
pub async fn leader_election_blocked_renewals_and_clock_skew(
    cx: &mut Ctx<'_>,
) -> anyhow::Result<()> {
    cx.collector.stop()?;
    let name = format!("kube-gc-1w-{}", cx.suffix);
    let flags = lease_flags(cx, &name);
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    let api: Api<Lease> = Api::namespaced(cx.client.clone(), &cx.ns);
    let mut cands = [Candidate::new(cx, "p"), Candidate::new(cx, "q"), Candidate::new(cx, "r")];

    // 1. p reaches the API server through a proxy; q directly.
    let te = cx.collector.testenv();
    let kubeconfig = std::fs::read_to_string(&te.kubeconfig)?;
    let server = kubeconfig
        .lines()
        .find_map(|l| l.trim().strip_prefix("server: https://"))
        .context("no server in the testenv's kubeconfig")?
        .to_owned();
    let upstream: std::net::SocketAddr = server.parse()?;
    let proxy = super::proxy::Proxy::start(upstream).await?;
    let proxied = te.dir.join(format!("kubeconfig-proxied-{}", cx.suffix));
    std::fs::write(&proxied, kubeconfig.replace(&server, &proxy.addr.to_string()))?;
    cands[0].gc.set_kubeconfig(proxied);
    cands[0].gc.spawn(&flags)?;
    wait_holder(&api, &name, &cands[0], Duration::from_secs(60)).await?;
    cands[1].gc.spawn(&flags)?;
    let deadline = Instant::now() + Duration::from_secs(30);
    while !cands[1].gc.log_since_start().contains(ATTEMPTING) {
        ensure!(Instant::now() < deadline, "kube-gc q did not start competing within 30 s");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    proxy.block();
    eprintln!("    · the leader p's connections cut");
    let (mut p_exited, mut q_holds) = (None, None);
    let started = Instant::now();
    while p_exited.is_none() || q_holds.is_none() {
        if p_exited.is_none() && cands[0].gc.exit_status().is_some() {
            p_exited = Some(started.elapsed());
        }
        if q_holds.is_none() && lease(&api, &name).await?.is_some_and(|(h, _)| cands[1].holds(&h)) {
            q_holds = Some(started.elapsed());
        }
        ensure!(
            started.elapsed() < Duration::from_secs(30),
            "after the cut: p exited {p_exited:?}, q holds {q_holds:?}:\n{}",
            cands[0].gc.log_tail(10)
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let (p_exited, q_holds) = (p_exited.unwrap(), q_holds.unwrap());
    eprintln!("    · p exited after {p_exited:?}, q took the lease after {q_holds:?}");
    ensure!(
        p_exited < q_holds,
        "two writers: the standby took the lease ({q_holds:?}) before the cut-off leader exited ({p_exited:?})"
    );
    cands[0].expect_exit_on_loss(Duration::from_secs(1))?;
    drop(proxy);

    // 2. r, an hour ahead, stands by while q renews; takes over once q is gone.
    let Ok(libfaketime) = std::env::var("KUBE_GC_LIBFAKETIME") else {
        eprintln!(
            "    · SKIPPED the clock-skew half: KUBE_GC_LIBFAKETIME is unset (scripts/install-test-clients installs it)"
        );
        drop(cands);
        return cx.collector.start(&[]);
    };
    cands[2].gc.set_env("LD_PRELOAD", &libfaketime);
    cands[2].gc.set_env("FAKETIME", "+1h");
    // Its timers and expiry judgement run on the real monotonic clock.
    cands[2].gc.set_env("FAKETIME_DONT_FAKE_MONOTONIC", "1");
    cands[2].gc.spawn(&flags)?;
    let watch = Instant::now();
    while watch.elapsed() < Duration::from_secs(12) {
        ensure!(cands[2].gc.is_running(), "kube-gc r exited:\n{}", cands[2].gc.log_tail(15));
        let holder = lease(&api, &name).await?.map(|(h, _)| h).unwrap_or_default();
        ensure!(
            cands[1].holds(&holder),
            "the lease moved to {holder:?} while its holder renewed: two leaders"
        );
        ensure!(cands[1].gc.is_running(), "q exited:\n{}", cands[1].gc.log_tail(15));
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    ensure!(cands[2].gc.log_since_start().contains(ATTEMPTING), "r never competed for the lease");
    let renew_time = api.get(&name).await?.spec.and_then(|s| s.renew_time);
    eprintln!("    · r (+1 h) stood by for 12 s while q renewed (renewTime {renew_time:?})");
    cands[1].gc.kill9()?;
    wait_holder(&api, &name, &cands[2], Duration::from_secs(30)).await?;

    drop(cands);
    cx.collector.start(&[])
}
