//! `kube-gc-lab`'s answers to arguments it cannot run with: clap's one-line refusal and exit
//! status 2, before anything runs; never a panic, and never a chaos run that passes having
//! checked nothing.

use std::process::Command;

/// Runs the binary with `args`, which it must refuse without running; what it said.
fn refusal(args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_kube-gc-lab"))
        .args(args)
        .env("RUST_BACKTRACE", "0")
        .output()
        .expect("the binary runs");
    let said = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!((out.status.code(), out.stdout.len()), (Some(2), 0), "{args:?}: {said}");
    said
}

#[test]
fn empty_or_unbounded_runs_are_refused() {
    for args in [
        &["chaos", "--seeds", "0"][..],
        &["chaos", "--scenarios", "0"],
        &["chaos", "--chaos-secs=1e30"],
        &["chaos", "--chaos-secs=-1"],
        &["tune", "--dependents", "0"],
        &["tune", "--pods-per-owner", "0"],
        &["tune", "--workers", "1,0"],
    ] {
        let said = refusal(args);
        let value = args.last().and_then(|a| a.rsplit(['=', ',']).next()).unwrap_or_default();
        assert!(said.starts_with(&format!("error: invalid value '{value}'")), "{args:?}: {said}");
    }
}
