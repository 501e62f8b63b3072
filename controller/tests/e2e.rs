//! End-to-end and differential tests of kube-gc against a real kube-apiserver v1.20.2
//! (`scripts/testenv`), with upstream's kube-controller-manager garbage collector as the
//! reference.
//!
//! Needs the `e2e` feature (and the testenv binaries, which `scripts/e2e` builds once):
//!
//! ```text
//! scripts/e2e                      # = cargo test -p kube-gc --features e2e --test e2e -- --nocapture
//! ```
//!
//! One test, [`e2e`], so that one control plane serves every scenario and no two collectors
//! ever run at once:
//!
//! 1. **kube-gc**: every differential scenario ([`scenarios::all`]) under kube-gc.
//! 2. **upstream**: the same scenarios, in fresh namespaces, under kube-controller-manager
//!    `--controllers=garbagecollector`; each scenario's recorded states must equal kube-gc's.
//!    Then kube-gc's final states are checked again: upstream must not have changed them.
//! 3. **faults** (kube-gc): `kill -9` mid-cascade, kube-apiserver down / restarted during
//!    warm-up and during a cascade, `kill -9` of either during an `--early-collection`
//!    warm-up, leader election (failover, lost lease); then hostile queries to the debug
//!    endpoint. Then
//!    upstream's final states are checked again: kube-gc must not have changed them.
//!
//! Knobs: `KUBE_GC_E2E_ONLY=a,b` (run scenarios whose name contains one of these),
//! `KUBE_GC_E2E_UPSTREAM=0`, `KUBE_GC_E2E_FAULTS=0`, `KUBE_GC_E2E_TESTENV=<dir>` (use a
//! started testenv), `KUBE_GC_E2E_KEEP=1` (keep the testenv directory and logs).
#![cfg(feature = "e2e")]

#[path = "e2e/bad_input.rs"]
mod bad_input;
#[path = "e2e/cluster.rs"]
mod cluster;
#[path = "e2e/collector.rs"]
mod collector;
#[path = "e2e/debug_endpoint.rs"]
mod debug_endpoint;
#[path = "e2e/env.rs"]
mod env;
#[path = "e2e/explain.rs"]
mod explain;
#[path = "e2e/faults.rs"]
mod faults;
#[path = "e2e/https.rs"]
#[allow(dead_code)] // Trust::Any serves tests/secure_port.rs
mod https;
#[path = "e2e/leader.rs"]
mod leader;
#[path = "e2e/proxy.rs"]
mod proxy;
#[path = "e2e/scenarios.rs"]
mod scenarios;
#[path = "e2e/secure.rs"]
mod secure;
#[path = "e2e/shadow.rs"]
mod shadow;

use std::time::{Duration, Instant};

use cluster::{Ctx, State, diff};
use collector::{Collector, Which};
use env::TestEnv;

/// One scenario's run under one collector.
struct Outcome {
    name: &'static str,
    which: Which,
    result: Result<(), String>,
    secs: f64,
    state: State,
}

fn wanted(name: &str) -> bool {
    match std::env::var("KUBE_GC_E2E_ONLY") {
        Ok(only) if !only.is_empty() => only.split(',').any(|o| name.contains(o.trim())),
        _ => true,
    }
}

fn enabled(var: &str) -> bool {
    std::env::var(var).map_or(true, |v| v != "0")
}

/// Runs `body` as scenario `name` under `collector`, making sure the collector runs first.
async fn run_one<F>(
    client: &kube::Client,
    collector: &mut Collector,
    name: &'static str,
    suffix: &str,
    body: F,
) -> Outcome
where
    F: for<'a, 'b> FnOnce(
        &'b mut Ctx<'a>,
    ) -> std::pin::Pin<
        Box<dyn std::future::Future<Output = anyhow::Result<()>> + 'b>,
    >,
{
    let which = collector.which;
    eprintln!("\n== [{}] {name}", which.name());
    let started = Instant::now();
    if !collector.is_running() {
        if let Err(e) = collector.start(&[]) {
            return Outcome {
                name,
                which,
                result: Err(format!("cannot start the collector: {e:#}")),
                secs: 0.0,
                state: State::default(),
            };
        }
    }
    let mut cx = match Ctx::new(client.clone(), collector, name, suffix).await {
        Ok(cx) => cx,
        Err(e) => {
            return Outcome {
                name,
                which,
                result: Err(format!("{e:#}")),
                secs: 0.0,
                state: State::default(),
            };
        }
    };
    let result = body(&mut cx).await.map_err(|e| format!("{e:#}"));
    if let Err(e) = &result {
        eprintln!("    ✗ {name} FAILED under {}: {e}", which.name());
        eprintln!(
            "    last lines of {}:\n{}",
            cx.collector.log.display(),
            indent(&cx.collector.log_tail(15))
        );
    }
    let secs = started.elapsed().as_secs_f64();
    Outcome { name, which, result, secs, state: cx.st }
}

fn indent(s: &str) -> String {
    s.lines().map(|l| format!("      | {l}")).collect::<Vec<_>>().join("\n")
}

/// Compares two runs' records phase by phase (as far as both got); `None` when identical.
fn compare(k: &State, u: &State) -> Option<String> {
    let mut out = String::new();
    for ((pk, sk), (pu, su)) in k.record.iter().zip(&u.record) {
        if pk != pu {
            out.push_str(&format!(
                "    kube-gc recorded phase {pk:?} where upstream recorded {pu:?}\n"
            ));
            break;
        }
        if sk != su {
            out.push_str(&format!("    phase {pk:?} (want = upstream's):\n{}", diff(su, sk)));
        }
    }
    if k.record.len() != u.record.len() {
        out.push_str(&format!(
            "    kube-gc recorded {} phases, upstream {} (a run stopped early: see its failure)\n",
            k.record.len(),
            u.record.len()
        ));
    }
    (!out.is_empty()).then_some(out)
}

/// Checks that the objects of earlier runs are still in their last recorded state.
async fn recheck(
    client: &kube::Client,
    collector: &mut Collector,
    runs: &[Outcome],
    label: &str,
    failures: &mut Vec<String>,
) {
    eprintln!("\n== {label}");
    // Only runs that finished: a failed one may have acted after its last recorded state.
    for o in runs.iter().filter(|o| o.result.is_ok()) {
        let Some(want) = o.state.last_objects().cloned() else { continue };
        let cx = Ctx::resume(client.clone(), collector, o.state.clone());
        match cx.snapshot().await {
            Ok(now) if now == want => eprintln!("    ✓ {}", o.name),
            Ok(now) => {
                let msg = format!("{label}: {} changed:\n{}", o.name, diff(&want, &now));
                eprintln!("    ✗ {msg}");
                failures.push(msg);
            }
            Err(e) => failures.push(format!("{label}: {}: {e:#}", o.name)),
        }
    }
}

async fn run_all(te: &TestEnv, run: &str) -> Vec<String> {
    let client = te.client().await.expect("client");
    let mut failures: Vec<String> = Vec::new();
    let mut summary: Vec<String> = Vec::new();
    let scenarios: Vec<_> = scenarios::all().into_iter().filter(|s| wanted(s.name)).collect();

    // 1. kube-gc
    let mut kgc = Collector::new(Which::KubeGc, te);
    let mut k_runs = Vec::new();
    for s in &scenarios {
        k_runs.push(run_one(&client, &mut kgc, s.name, &format!("k{run}"), s.run).await);
    }
    kgc.stop().expect("stop kube-gc");

    // 2. upstream
    let mut u_runs = Vec::new();
    // Scenarios of one collector alone (kube-gc's faults, shadow mode beside upstream).
    let mut f_runs = Vec::new();
    if enabled("KUBE_GC_E2E_UPSTREAM")
        && (!scenarios.is_empty() || wanted("shadow_mode_beside_upstream"))
    {
        let mut kcm = Collector::new(Which::Upstream, te);
        // kube-gc in shadow mode beside upstream's collector, through all its scenarios.
        let through = wanted(shadow::THROUGH_THE_SCENARIOS) && !scenarios.is_empty();
        let audit_from = shadow::audit_len(te);
        let started = Instant::now();
        let mut beside = through.then(|| shadow::start_beside(te));
        for s in &scenarios {
            u_runs.push(run_one(&client, &mut kcm, s.name, &format!("u{run}"), s.run).await);
        }
        if let Some(beside) = beside.as_mut() {
            eprintln!("\n== [upstream] {}", shadow::THROUGH_THE_SCENARIOS);
            let result = match beside {
                Ok(gc) => shadow::check_through_the_scenarios(gc, te, audit_from).await,
                Err(e) => Err(anyhow::anyhow!("cannot start kube-gc in shadow: {e:#}")),
            };
            if let Ok(gc) = beside {
                if let Err(e) = &result {
                    eprintln!(
                        "    ✗ {e:#}\n    last lines of its log:\n{}",
                        indent(&gc.log_tail(15))
                    );
                }
                gc.stop().expect("stop kube-gc in shadow");
            }
            f_runs.push(Outcome {
                name: shadow::THROUGH_THE_SCENARIOS,
                which: Which::Upstream,
                result: result.map_err(|e| format!("{e:#}")),
                secs: started.elapsed().as_secs_f64(),
                state: State::default(),
            });
        }
        if wanted("shadow_mode_beside_upstream") {
            f_runs.push(
                run_one(
                    &client,
                    &mut kcm,
                    "shadow_mode_beside_upstream",
                    &format!("u{run}"),
                    |cx| Box::pin(shadow::shadow_mode_beside_upstream(cx)),
                )
                .await,
            );
        }
        recheck(
            &client,
            &mut kcm,
            &k_runs,
            "kube-gc's final states after upstream ran over them",
            &mut failures,
        )
        .await;
        kcm.stop().expect("stop kube-controller-manager");
    }

    summary
        .push(format!("{:<46} {:<12} {:<12} {}", "scenario", "kube-gc", "upstream", "same states"));
    for k in &k_runs {
        let u = u_runs.iter().find(|u| u.name == k.name);
        let status = |o: &Outcome| match &o.result {
            Ok(()) => format!("ok {:.0}s", o.secs),
            Err(_) => format!("FAIL {:.0}s", o.secs),
        };
        let same = match u {
            None => "-".to_owned(),
            Some(u) => match compare(&k.state, &u.state) {
                None => "yes".to_owned(),
                Some(d) => {
                    failures.push(format!("differential: {} differs from upstream:\n{d}", k.name));
                    "NO".to_owned()
                }
            },
        };
        summary.push(format!(
            "{:<46} {:<12} {:<12} {same}",
            k.name,
            status(k),
            u.map(status).unwrap_or_else(|| "-".into())
        ));
        for o in std::iter::once(k).chain(u) {
            if let Err(e) = &o.result {
                failures.push(format!("{} under {}: {e}", o.name, o.which.name()));
            }
        }
    }

    // 3. faults, kube-gc only
    if enabled("KUBE_GC_E2E_FAULTS") {
        let suffix = format!("k{run}");
        if wanted("kill_9_mid_cascade_resumes_after_restart") {
            f_runs.push(
                run_one(
                    &client,
                    &mut kgc,
                    "kill_9_mid_cascade_resumes_after_restart",
                    &suffix,
                    |cx| Box::pin(faults::kill_9_mid_cascade_resumes_after_restart(cx)),
                )
                .await,
            );
        }
        if wanted("apiserver_down_during_warm_up") {
            f_runs.push(
                run_one(&client, &mut kgc, "apiserver_down_during_warm_up", &suffix, |cx| {
                    Box::pin(faults::apiserver_down_during_warm_up(cx))
                })
                .await,
            );
        }
        if wanted("apiserver_restart_during_warm_up") {
            f_runs.push(
                run_one(&client, &mut kgc, "apiserver_restart_during_warm_up", &suffix, |cx| {
                    Box::pin(faults::apiserver_restart_during_warm_up(cx))
                })
                .await,
            );
        }
        if wanted("apiserver_restart_during_cascade") {
            f_runs.push(
                run_one(&client, &mut kgc, "apiserver_restart_during_cascade", &suffix, |cx| {
                    Box::pin(faults::apiserver_restart_during_cascade(cx))
                })
                .await,
            );
        }
        if wanted("apiserver_restart_during_cascade_json_watchers") {
            f_runs.push(
                run_one(
                    &client,
                    &mut kgc,
                    "apiserver_restart_during_cascade_json_watchers",
                    &suffix,
                    |cx| Box::pin(faults::apiserver_restart_during_cascade_json_watchers(cx)),
                )
                .await,
            );
        }
        if wanted("early_collection_apiserver_kill_9_during_warm_up") {
            f_runs.push(
                run_one(
                    &client,
                    &mut kgc,
                    "early_collection_apiserver_kill_9_during_warm_up",
                    &suffix,
                    |cx| Box::pin(faults::early_collection_apiserver_kill_9_during_warm_up(cx)),
                )
                .await,
            );
        }
        if wanted("early_collection_kube_gc_kill_9_during_warm_up") {
            f_runs.push(
                run_one(
                    &client,
                    &mut kgc,
                    "early_collection_kube_gc_kill_9_during_warm_up",
                    &suffix,
                    |cx| Box::pin(faults::early_collection_kube_gc_kill_9_during_warm_up(cx)),
                )
                .await,
            );
        }
        if wanted("unlistable_crd_added_while_running") {
            f_runs.push(
                run_one(&client, &mut kgc, "unlistable_crd_added_while_running", &suffix, |cx| {
                    Box::pin(faults::unlistable_crd_added_while_running(cx))
                })
                .await,
            );
        }
        if wanted("leader_election_single_leader_failover_and_loss") {
            f_runs.push(
                run_one(
                    &client,
                    &mut kgc,
                    "leader_election_single_leader_failover_and_loss",
                    &suffix,
                    |cx| Box::pin(leader::leader_election_single_leader_failover_and_loss(cx)),
                )
                .await,
            );
        }
        if wanted("leader_election_blocked_renewals_and_clock_skew") {
            f_runs.push(
                run_one(
                    &client,
                    &mut kgc,
                    "leader_election_blocked_renewals_and_clock_skew",
                    &suffix,
                    |cx| Box::pin(leader::leader_election_blocked_renewals_and_clock_skew(cx)),
                )
                .await,
            );
        }
        if wanted("debug_endpoint_hostile_uids") {
            f_runs.push(
                run_one(&client, &mut kgc, "debug_endpoint_hostile_uids", &suffix, |cx| {
                    Box::pin(debug_endpoint::debug_endpoint_hostile_uids(cx))
                })
                .await,
            );
        }
        if wanted("explain_and_blast_radius_match_the_cluster") {
            f_runs.push(
                run_one(
                    &client,
                    &mut kgc,
                    "explain_and_blast_radius_match_the_cluster",
                    &suffix,
                    |cx| Box::pin(explain::explain_and_blast_radius_match_the_cluster(cx)),
                )
                .await,
            );
        }
        if wanted("secure_port_authenticates_and_authorizes") {
            f_runs.push(
                run_one(
                    &client,
                    &mut kgc,
                    "secure_port_authenticates_and_authorizes",
                    &suffix,
                    |cx| Box::pin(secure::secure_port_authenticates_and_authorizes(cx)),
                )
                .await,
            );
        }
        if !u_runs.is_empty() {
            if !kgc.is_running() {
                kgc.start(&[]).expect("start kube-gc");
            }
            recheck(
                &client,
                &mut kgc,
                &u_runs,
                "upstream's final states after kube-gc ran over them",
                &mut failures,
            )
            .await;
        }
    }
    for o in &f_runs {
        let status = match &o.result {
            Ok(()) => format!("ok {:.0}s", o.secs),
            Err(_) => format!("FAIL {:.0}s", o.secs),
        };
        let (k, u) = match o.which {
            Which::KubeGc => (status, "-".to_owned()),
            Which::Upstream => ("-".to_owned(), status),
        };
        summary.push(format!("{:<46} {k:<12} {u:<12} -", o.name));
        if let Err(e) = &o.result {
            failures.push(format!("{} under {}: {e}", o.name, o.which.name()));
        }
    }
    kgc.stop().expect("stop kube-gc");

    eprintln!("\n== summary\n{}", summary.join("\n"));
    failures
}

/// The suite's wall-clock budget on a 2-core machine (exceeding it only warns).
const BUDGET: Duration = Duration::from_secs(12 * 60);

#[test]
fn e2e() {
    let started = Instant::now();
    let nanos =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().subsec_nanos();
    let run = format!("{:05x}", nanos & 0xfffff);
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("e2e-{run}"));
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let te = TestEnv::start(&dir).expect("start the testenv (scripts/testenv start)");
    let failures = runtime.block_on(run_all(&te, &run));
    let logs = te.dir.clone();
    drop(te);
    let secs = started.elapsed().as_secs_f64();
    eprintln!("\n== e2e finished in {secs:.0} s; logs in {}", logs.display());
    if secs > BUDGET.as_secs_f64() {
        eprintln!("== WARNING: over the suite's budget of {} s", BUDGET.as_secs());
    }
    if failures.is_empty() && std::env::var("KUBE_GC_E2E_KEEP").is_err() && logs == dir {
        let _ = std::fs::remove_dir_all(&dir);
    }
    runtime.shutdown_timeout(Duration::from_secs(1));
    assert!(failures.is_empty(), "{} failure(s):\n\n{}", failures.len(), failures.join("\n\n"));
}
