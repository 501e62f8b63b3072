use super::*;

#[test]
fn defaults_match_kube_controller_manager() {
    let f = Flags::parse_from(["kube-gc"]);
    assert_eq!(f.concurrent_gc_syncs, 20);
    assert_eq!(f.kube_api_qps, 20.0);
    assert_eq!(f.kube_api_burst, 30);
    assert_eq!(f.collector_qps(), 40.0, "as kube-controller-manager >= v1.23");
    assert!(f.enable_garbage_collector);
    assert!(f.leader_elect, "kube-controller-manager's default");
    assert_eq!(f.leader_elect_lease_duration, Duration::from_secs(15));
    assert_eq!(f.leader_elect_renew_deadline, Duration::from_secs(10));
    assert_eq!(f.leader_elect_retry_period, Duration::from_secs(2));
    assert_eq!(f.gc_ignored_resources, ["events", "events.events.k8s.io"]);
    assert!(f.debug_addr.ip().is_loopback());
    assert_eq!(f.secure_port, 10257, "kube-controller-manager's secure port");
    assert_eq!(f.authorization_always_allow_paths, ["/healthz", "/readyz", "/livez"]);
    assert!(f.early_collection && f.bulk_absence_proof, "kube-gc's departures, on by default");
    assert_eq!(f.kube_api_content_type, ContentType::Protobuf, "kube-controller-manager's");
    assert!(f.list_from_watch_cache, "as client-go's informers list");
    assert_eq!(f.watcher_catch_up_timeout, Duration::from_secs(60));
    assert!(f.validate().is_ok());
}

#[test]
fn bools_are_pflag_style() {
    let f = Flags::parse_from(["kube-gc", "--leader-elect", "--enable-garbage-collector=false"]);
    assert!(f.leader_elect);
    assert!(!f.enable_garbage_collector);
    let f = Flags::parse_from(["kube-gc", "--leader-elect=true"]);
    assert!(f.leader_elect);
    let f = Flags::parse_from(["kube-gc", "--leader-elect=false"]);
    assert!(!f.leader_elect);
}

#[test]
fn bad_values_are_refused_with_a_reason() {
    assert!(Flags::try_parse_from(["kube-gc", "--concurrent-gc-syncs=0"]).is_err());
    assert!(Flags::try_parse_from(["kube-gc", "--kube-api-burst=0"]).is_err());
    // A pool of a hundred thousand threads, or of none, is a typo.
    for threads in ["0", "1025", "100000"] {
        let flag = format!("--ingest-threads={threads}");
        assert!(Flags::try_parse_from(["kube-gc", &flag]).is_err(), "{flag} accepted");
    }
    assert_eq!(Flags::parse_from(["kube-gc", "--ingest-threads=1024"]).ingest_threads, Some(1024));
    let f = Flags::parse_from(["kube-gc", "--shards=3"]);
    assert!(f.validate().unwrap_err().contains("power of two"));
    let f = Flags::parse_from(["kube-gc", "--watcher-catch-up-timeout=25h"]);
    assert!(f.validate().unwrap_err().contains("at most 24h"));
    let f = Flags::parse_from(["kube-gc", "--watcher-catch-up-timeout=0"]);
    assert!(f.validate().is_ok() && f.watcher_catch_up_timeout.is_zero());
    // Its earlier name still works.
    let f = Flags::parse_from(["kube-gc", "--orphan-catch-up-timeout=5s"]);
    assert_eq!(f.watcher_catch_up_timeout, Duration::from_secs(5));
    let f = Flags::parse_from(["kube-gc", "--debug-addr=0.0.0.0:1"]);
    assert!(f.validate().unwrap_err().contains("loopback"));
    let f = Flags::parse_from(["kube-gc", "--debug-addr=0.0.0.0:1", "--debug-addr-any"]);
    assert!(f.validate().is_ok());
    let f = Flags::parse_from(["kube-gc", "--dry-run"]);
    assert!(f.validate().unwrap_err().contains("--leader-elect=false"));
    assert!(Flags::parse_from(["kube-gc", "--dry-run", "--leader-elect=false"]).validate().is_ok());
    let f = Flags::parse_from(["kube-gc", "--tls-cert-file=/c.pem"]);
    assert!(f.validate().unwrap_err().contains("go together"));
    for qps in ["-1", "0", "inf", "NaN"] {
        let f = Flags::parse_from(["kube-gc", &format!("--kube-api-qps={qps}")]);
        assert!(f.validate().unwrap_err().contains("at least 0.001"), "{qps} accepted");
    }
    // A zero period would panic the discovery loop; a tiny one floods the API server.
    for period in ["0s", "0", "999ms"] {
        let f = Flags::parse_from(["kube-gc", &format!("--resync-period={period}")]);
        assert!(f.validate().unwrap_err().contains("at least 1s"), "{period} accepted");
    }
    assert!(Flags::parse_from(["kube-gc", "--resync-period=1s"]).validate().is_ok());
}

/// client-go's `NewLeaderElector` rules: periods above zero, retry * 1.2 < renew deadline <
/// lease duration; a zero retry period would hammer the Lease (or, unreachable, the log).
#[test]
fn leader_election_periods_follow_client_go() {
    let refused = |args: &[&str], why: &str| {
        let f = Flags::parse_from([&["kube-gc"], args].concat());
        let err = f.validate().expect_err(&format!("{args:?} accepted"));
        assert!(err.contains(why), "{args:?}: {err}");
    };
    refused(&["--leader-elect-retry-period=0s"], "retry-period must be greater than zero");
    refused(&["--leader-elect-lease-duration=0s"], "lease-duration must be greater than zero");
    refused(&["--leader-elect-renew-deadline=15s"], "shorter than --leader-elect-lease-duration");
    refused(&["--leader-elect-retry-period=10s"], "1.2 times");
    // 8.4s <= 1.2 * 7s: a jittered retry would not fit in the deadline.
    refused(
        &["--leader-elect-renew-deadline=8400ms", "--leader-elect-retry-period=7s"],
        "1.2 times",
    );
    // The Lease records whole seconds: a fraction would be cut off where standbys read it.
    for lease in ["900ms", "1500ms"] {
        refused(
            &[
                &format!("--leader-elect-lease-duration={lease}"),
                "--leader-elect-renew-deadline=800ms",
                "--leader-elect-retry-period=100ms",
            ],
            "whole number of seconds",
        );
    }
    refused(&["--leader-elect-resource-name="], "must not be empty");
    refused(&["--leader-elect-resource-namespace="], "must not be empty");
    refused(&["--leader-elect-resource-name=kube-controller-manager"], "own Lease");
    let elsewhere = ["--leader-elect-resource-name=kube-controller-manager"];
    let f = Flags::parse_from(
        [&["kube-gc", "--leader-elect-resource-namespace=gc"], &elsewhere[..]].concat(),
    );
    assert!(f.validate().is_ok(), "another namespace's Lease of that name is kube-gc's own");
    for inner in ["/healthz,/a*b", "/a**"] {
        let f =
            Flags::parse_from(["kube-gc", &format!("--authorization-always-allow-paths={inner}")]);
        assert!(f.validate().expect_err(inner).contains("only a trailing *"), "{inner}");
    }
    let f = Flags::parse_from(["kube-gc", "--authorization-always-allow-paths=/healthz,/debug/*"]);
    assert!(f.validate().is_ok());
    let f = Flags::parse_from(["kube-gc", "--initial-sync-timeout=0s"]);
    assert!(f.validate().expect_err("zero").contains("--initial-sync-timeout"));
    let f = Flags::parse_from([
        "kube-gc",
        "--leader-elect-renew-deadline=8500ms",
        "--leader-elect-retry-period=7s",
    ]);
    assert!(f.validate().is_ok());
    // Without leader election, its flags are not used, so not checked.
    let f =
        Flags::parse_from(["kube-gc", "--leader-elect=false", "--leader-elect-retry-period=0s"]);
    assert!(f.validate().is_ok());
}

#[test]
fn vmodule_raises_the_named_modules_only() {
    let f = Flags::parse_from(["kube-gc", "-v", "2", "--vmodule=collector=5,watchers=0"]);
    assert_eq!(
        f.log_filter(),
        "warn,kube_gc=debug,kube_gc_engine=debug,\
         kube_gc::collector=trace,kube_gc_engine::collector=trace,\
         kube_gc::watchers=info,kube_gc_engine::watchers=info"
    );
    tracing_subscriber::EnvFilter::try_new(f.log_filter()).expect("a valid filter");
    for bad in ["--vmodule=collector", "--vmodule==2", "--vmodule=a b=2", "--vmodule=x=-1"] {
        assert!(Flags::try_parse_from(["kube-gc", bad]).is_err(), "{bad} accepted");
    }
    assert!(Flags::try_parse_from(["kube-gc", "--logging-format=xml"]).is_err());
    assert_eq!(Flags::parse_from(["kube-gc"]).logging_format, "text");
}

#[test]
fn durations_parse_as_go_does() {
    assert_eq!(parse_duration("30s"), Ok(Duration::from_secs(30)));
    assert_eq!(parse_duration("1m30s"), Ok(Duration::from_secs(90)));
    assert_eq!(parse_duration("250ms"), Ok(Duration::from_millis(250)));
    assert_eq!(parse_duration("0"), Ok(Duration::ZERO));
    for bad in ["", "s", "10", "10x", "-1s", "1e400s"] {
        assert!(parse_duration(bad).is_err(), "{bad:?} accepted");
    }
    // Go's longest duration, and no longer: the deadlines computed from them must hold.
    assert_eq!(parse_duration("2562047h47m16.854775807s"), Ok(MAX_DURATION));
    for long in ["2562048h", "2600000000000000h", "4000000000000000h4000000000000000h"] {
        let err = parse_duration(long).expect_err(long);
        assert!(err.contains("longest"), "{long}: {err}");
    }
    for flag in ["--initial-sync-timeout", "--resync-period"] {
        let args = ["kube-gc".to_owned(), format!("{flag}=2600000000000000h")];
        assert!(Flags::try_parse_from(args).is_err(), "{flag}");
    }
}

/// A flag given twice takes the last value (pflag's rule); a list flag appends, as pflag's
/// string slices do after the first.
#[test]
fn a_repeated_flag_takes_its_last_value() {
    let f = Flags::parse_from([
        "kube-gc",
        "--leader-elect-resource-name=a",
        "--leader-elect-resource-name=b",
        "--concurrent-gc-syncs=3",
        "--concurrent-gc-syncs=4",
    ]);
    assert_eq!((f.leader_elect_resource_name.as_str(), f.concurrent_gc_syncs), ("b", 4));
    let f = Flags::parse_from([
        "kube-gc",
        "--gc-ignored-resources=events",
        "--gc-ignored-resources=leases.coordination.k8s.io",
    ]);
    assert_eq!(f.gc_ignored_resources, ["events", "leases.coordination.k8s.io"]);
}

#[test]
fn ignored_resources_are_resource_group_names() {
    for bad in ["Pods", "deployments/apps", "foo bar", "=", "pods..apps", ".apps"] {
        let f = Flags::parse_from(["kube-gc", &format!("--gc-ignored-resources={bad}")]);
        let err = f.validate().expect_err(bad);
        assert!(err.contains("resource.group"), "{bad}: {err}");
    }
    for good in ["", "events", "events,events.events.k8s.io", "widgets.example.com, pods"] {
        let f = Flags::parse_from(["kube-gc", &format!("--gc-ignored-resources={good}")]);
        assert!(f.validate().is_ok(), "{good:?}");
    }
}

/// A rate the limiter can hold: a period of over 584 years panicked it.
#[test]
fn the_api_budget_has_a_floor() {
    for qps in ["1e-12", "1e-300", "0.0009", "0", "-1", "NaN", "inf"] {
        let f = Flags::parse_from(["kube-gc", &format!("--kube-api-qps={qps}")]);
        assert!(f.validate().is_err(), "{qps} accepted");
    }
    let f = Flags::parse_from(["kube-gc", "--kube-api-qps=0.001"]);
    assert!(f.validate().is_ok());
    crate::kube_cluster::token_bucket(f.collector_qps(), 1);
    // A burst the limiter's nanosecond arithmetic cannot hold at that rate: refused, and the
    // limiter built anyway (events, tests) neither panics nor wraps to a burst of one.
    for (qps, burst, ok) in [("0.001", "15000000", true), ("0.001", "16000000", false)] {
        let f = Flags::parse_from(["kube-gc", "--kube-api-qps", qps, "--kube-api-burst", burst]);
        assert_eq!(f.validate().is_ok(), ok, "{qps} {burst}");
    }
    let limiter = crate::kube_cluster::token_bucket(0.002, u32::MAX);
    for _ in 0..1000 {
        assert!(limiter.check().is_ok(), "a burst of at least a thousand");
    }
}
