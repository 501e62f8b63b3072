//! The demo (`kube-gc-lab demo`) at a small size: kube-gc warms up on a preloaded
//! simcluster, collects the virtual-owner Pods and honours each propagation policy; every
//! phase's verdict must be ok. (Timings are reported, never asserted.)

use kube_gc_lab::demo::{self, DemoArgs, Progress};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn demo_should_pass_every_check_at_two_thousand_objects() {
    let args = DemoArgs { samples: 1, timeout: 30, ..DemoArgs::new(2_000) };
    let report = demo::run(&args, Progress::Hidden).await.expect("the demo runs");
    let table = report.table();
    assert!(report.ok(), "a phase failed:\n{table}");
    let names: Vec<&str> = report.phases.iter().map(|p| p.name).collect();
    assert_eq!(names, ["preload", "warm-up", "garbage", "background", "foreground", "orphan"]);
    // WORKLOAD.md at N = 2000: 158 families, 20 virtual-owner Pods (and 20 virtual owners).
    assert_eq!(report.phases[2].objects, 20);
    let w = &report.warm_up;
    assert_eq!(w.expected_nodes, report.listed + 20);
    if w.graph_nodes_exact {
        assert_eq!(w.graph_nodes, w.expected_nodes, "\n{table}");
    } else {
        // A loaded machine: counted only once collection had started.
        assert!(w.graph_nodes <= w.expected_nodes, "\n{table}");
    }
    // (On a loaded machine the first deletions may be counted in the warm-up's row.)
    let deletes: u64 = report.phases[1..3].iter().map(|p| p.calls.expect("counted").delete).sum();
    assert_eq!(deletes, 20, "one DELETE per garbage Pod:\n{table}");
    assert!(report.collector_deleted >= 20 + 2 * 9, "\n{table}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn demo_should_refuse_more_samples_than_deployments() {
    let args = DemoArgs { samples: 100, ..DemoArgs::new(1_000) };
    let err = demo::run(&args, Progress::Hidden).await.expect_err("79 Deployments < 300");
    assert!(err.to_string().contains("--samples"), "{err}");
}
