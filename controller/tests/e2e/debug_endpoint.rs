//! kube-gc's debug graph (`/debug/controllers/garbagecollector/graph?uid=…`, GC-SPEC.md §7)
//! under hostile `uid` values: every request is answered (200, or 414 past the length limit;
//! 400 for a request line that is not a valid URI), the process stays up and healthy, and
//! repeated hostile queries do not grow its memory without bound.

use std::time::Duration;

use anyhow::{bail, ensure};

use super::cluster::Ctx;
use super::collector::{http_get, http_get_raw};

const GRAPH: &str = "/debug/controllers/garbagecollector/graph";

/// The hostile queries: (description, request target, accepted statuses).
fn cases() -> Vec<(String, Vec<u8>, &'static [u16])> {
    let ok: &[u16] = &[200];
    let ok_or_long: &[u16] = &[200, 414];
    let any_answer: &[u16] = &[200, 400, 414, 431];
    let q = |s: &str| format!("{GRAPH}?{s}").into_bytes();
    vec![
        ("quotes and brackets".into(), q("uid=%22%27%3C%3E%5C%7B%7D"), ok),
        ("a NUL".into(), q("uid=%00"), ok),
        ("NUL inside a UUID".into(), q("uid=0000000%00-0000-0000-0000-000000000000"), ok),
        ("CR LF".into(), q("uid=%0D%0Ainjected:%20header"), ok),
        ("invalid percent-encoding %zz".into(), q("uid=%zz"), ok),
        ("a lone %".into(), q("uid=%"), ok),
        ("truncated %4".into(), q("uid=%4"), ok),
        ("invalid UTF-8".into(), q("uid=%ff%fe%80"), ok),
        ("truncated UTF-8".into(), q("uid=%E2%82"), ok),
        ("an empty uid".into(), q("uid="), ok),
        ("uid without =".into(), q("uid"), ok),
        ("upper-case UUID".into(), q("uid=AAAAAAAA-AAAA-4AAA-8AAA-AAAAAAAAAAAA"), ok),
        ("10 KB uid".into(), q(&format!("uid={}", "a".repeat(10 * 1024))), ok_or_long),
        ("10 KB of %25".into(), q(&format!("uid={}", "%25".repeat(3500))), ok_or_long),
        ("2000 uid parameters".into(), q(&"uid=x&".repeat(2000)), ok_or_long),
        ("70 KB uid".into(), q(&format!("uid={}", "b".repeat(70 * 1024))), ok_or_long),
        ("1 MB uid".into(), q(&format!("uid={}", "c".repeat(1024 * 1024))), any_answer),
        ("raw quotes".into(), q("uid=\"quoted\""), any_answer),
        ("raw space".into(), q("uid=a b"), any_answer),
        ("raw non-UTF-8 byte".into(), [q("uid="), vec![0xff, 0xfe]].concat(), any_answer),
        ("path traversal".into(), format!("{GRAPH}/../graph?uid=a").into_bytes(), &[200, 400, 404]),
    ]
}

/// Every hostile query answered, the process healthy after each, and its memory bounded.
pub async fn debug_endpoint_hostile_uids(cx: &mut Ctx<'_>) -> anyhow::Result<()> {
    let port = cx.collector.debug_port;
    let mut failures = Vec::new();
    for (what, target, allowed) in cases() {
        match http_get_raw(port, &target) {
            Ok((code, _)) if allowed.contains(&code) => eprintln!("    ✓ {what}: {code}"),
            Ok((code, body)) => failures
                .push(format!("{what}: status {code}, want one of {allowed:?}: {body:.200}")),
            // The server may close the connection on a request line it refuses outright.
            Err(e) if allowed.contains(&400) => eprintln!("    ✓ {what}: connection closed ({e})"),
            Err(e) => failures.push(format!("{what}: no answer: {e:#}")),
        }
        if !cx.collector.is_running() {
            bail!("kube-gc died after {what}:\n{}", cx.collector.log_tail(20));
        }
        match http_get(port, "/healthz") {
            Ok((200, _)) => {}
            other => failures.push(format!("after {what}: /healthz answered {other:?}")),
        }
    }
    // A real query still works.
    let (code, body) = http_get(port, GRAPH)?;
    ensure!(
        code == 200 && body.starts_with("strict digraph full {"),
        "full graph: {code} {body:.200}"
    );
    cx.note("hostile queries", "failures", failures.join("; "));

    // Memory: batches of 300 distinct 60 KB uid values (18 MB of text each). The first
    // batch warms the allocator up; a collector that keeps what it was asked about grows by
    // about 18 MB with each further batch, one that does not stays flat.
    let batch = |b: usize| -> anyhow::Result<()> {
        for i in 0..300 {
            let uid = format!("{b:02}{i:08}{}", "d".repeat(60 * 1024));
            let (code, _) = http_get(port, &format!("{GRAPH}?uid={uid}"))?;
            ensure!(code == 200, "60 KB uid #{i}: status {code}");
        }
        std::thread::sleep(Duration::from_millis(300));
        Ok(())
    };
    batch(0)?;
    let warm = cx.collector.rss_kib().unwrap_or(0);
    batch(1)?;
    batch(2)?;
    let after = cx.collector.rss_kib().unwrap_or(0);
    let grown_mib = after.saturating_sub(warm) as f64 / 1024.0;
    eprintln!(
        "    · RSS {warm} KiB -> {after} KiB over 600 more distinct 60 KB uid queries (+{grown_mib:.1} MiB)"
    );
    cx.note("memory", "bounded", (grown_mib <= 12.0).to_string());
    if grown_mib > 12.0 {
        failures.push(format!(
            "memory grows with each hostile query: RSS {warm} KiB -> {after} KiB (+{grown_mib:.1} MiB) \
             over 600 distinct 60 KB uid values (36 MB of text): the queried uids are kept \
             (Uid::parse interns every non-UUID string, forever)"
        ));
    }
    ensure!(cx.collector.is_running(), "kube-gc died");
    if !failures.is_empty() {
        bail!("{}", failures.join("\n"));
    }
    Ok(())
}
