//! Unit tests of the tuning sweep: its flags, the cluster it fills, merging results, the table
//! and the plot.

use super::*;

/// Parses a `tune` command line.
fn parse(argv: &[&str]) -> Result<TuneArgs, clap::Error> {
    #[derive(clap::Parser)]
    struct Wrap {
        #[command(flatten)]
        args: TuneArgs,
    }
    Wrap::try_parse_from(std::iter::once("tune").chain(argv.iter().copied())).map(|w| w.args)
}

fn sample(workers: u32, latency_ms: u64, limit: Limit, seconds: f64, complete: bool) -> Sample {
    Sample {
        workers,
        latency_ms,
        limit,
        dependents: 1000,
        owners: 100,
        sync_seconds: 0.5,
        seconds,
        collected: if complete { 1000 } else { 400 },
        complete,
        calls: Calls::default(),
    }
}

#[test]
fn defaults_should_be_the_issue_matrix() {
    let a = parse(&[]).unwrap();
    assert_eq!(a.dependents, 100_000);
    assert_eq!(a.workers, [1, 2, 5, 10, 20, 50, 100]);
    assert_eq!(a.latency_ms, [0, 5, 20]);
    assert_eq!(a.qps, [Limit::off(), parse_limit("1000:1000").unwrap()]);
}

#[test]
fn lists_should_parse_comma_separated() {
    let a = parse(&["--workers", "3,7", "--latency-ms", "1", "--qps", "20:30,off"]).unwrap();
    assert_eq!((a.workers, a.latency_ms), (vec![3, 7], vec![1]));
    assert_eq!(a.qps[0], Limit { label: "20:30".into(), qps: 20.0, burst: 30 });
    assert_eq!(a.qps[1].label, "off");
    assert!(parse(&["--workers", "x"]).is_err());
}

#[test]
fn parse_limit_should_reject_malformed_limits() {
    for (i, bad) in ["", "20", "20:", ":30", "0:30", "20:0", "-1:5", "a:b"].iter().enumerate() {
        assert!(parse_limit(bad).is_err(), "#{i}: {bad:?} parsed, want an error");
    }
    assert_eq!(parse_limit(" off ").unwrap(), Limit::off());
}

#[test]
fn kube_gc_argv_should_parse_with_kube_gcs_parser() {
    let f = Flags::parse_from(kube_gc_argv(7, &Limit::off(), Duration::from_secs(60)));
    assert_eq!((f.concurrent_gc_syncs, f.kube_api_qps), (7, UNLIMITED));
    assert!(f.validate().is_ok());
}

#[test]
fn fill_should_store_owned_pods_and_their_owners() {
    let store = Store::new(
        kube_gc_simcluster::StoreConfig::default(),
        kube_gc_simcluster::resources::builtin(),
    );
    assert_eq!(fill(&store, 25, 10).unwrap(), 3);
    let pods = store.resolve_api_version("v1", "pods").unwrap();
    assert_eq!(pods_left(&store, &pods, 0).unwrap(), 25);
    let pod: serde_json::Value =
        serde_json::from_slice(&store.get(&pods, Some("default"), "rs-000002-0004").unwrap())
            .unwrap();
    assert_eq!(pod["metadata"]["ownerReferences"][0]["name"], "rs-000002");
    assert_eq!(
        pod["metadata"]["ownerReferences"][0]["uid"],
        "00000000-0000-4000-8000-000000000002"
    );
    assert_eq!(store.len(), 28);
}

#[test]
fn merge_should_replace_the_same_combination_and_keep_the_rest() {
    let mut all =
        vec![sample(1, 0, Limit::off(), 10.0, true), sample(2, 0, Limit::off(), 5.0, true)];
    merge(
        &mut all,
        vec![sample(2, 0, Limit::off(), 4.0, true), sample(2, 5, Limit::off(), 9.0, true)],
    );
    let got: Vec<(u32, u64, f64)> =
        all.iter().map(|s| (s.workers, s.latency_ms, s.seconds)).collect();
    assert_eq!(got, [(1, 0, 10.0), (2, 0, 4.0), (2, 5, 9.0)]);
    let json = serde_json::to_string(&all).unwrap();
    assert_eq!(serde_json::from_str::<Vec<Sample>>(&json).unwrap(), all);
}

#[test]
fn markdown_should_have_a_row_per_limit_and_latency() {
    let on = parse_limit("1000:1000").unwrap();
    let samples = [
        sample(1, 0, Limit::off(), 10.0, true),
        sample(5, 0, Limit::off(), 2.0, true),
        sample(1, 20, on.clone(), 100.0, false),
    ];
    let md = markdown(&samples);
    let lines: Vec<&str> = md.lines().collect();
    assert_eq!(lines.len(), 2 + 4, "{md}");
    assert_eq!(lines[0], "| qps:burst | latency | 1 workers | 5 workers |");
    assert_eq!(lines[2], "| off | 0 ms | 10.0 s (100/s) | 2.0 s (500/s) |");
    assert_eq!(lines[5], "| 1000:1000 | 20 ms | &gt;100 s (4/s) | – |");
}

#[test]
fn plot_should_draw_a_line_per_latency_in_a_panel_per_limit() {
    let on = parse_limit("1000:1000").unwrap();
    let mut samples = Vec::new();
    for limit in [Limit::off(), on] {
        for l in [0, 5, 20] {
            for w in [1, 10, 100] {
                samples.push(sample(w, l, limit.clone(), 100.0 / f64::from(w), true));
            }
        }
    }
    let svg = plot_svg(&samples).unwrap();
    assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
    // Series lines are the only ones 2 px wide: 2 panels × 3 latencies.
    assert_eq!(svg.matches(r#"stroke-width="2""#).count(), 2 * 3, "{svg}");
    assert_eq!(svg.matches("<circle").count(), 2 * 3 * 3);
    for label in ["0 ms latency", "5 ms latency", "20 ms latency", "no client rate limit"] {
        assert!(svg.contains(label), "{label} missing");
    }
    assert!(plot_svg(&[]).is_err());
}
