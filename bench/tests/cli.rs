//! `kube-gc-bench`'s answers to arguments it cannot run with: clap's one-line refusal and exit
//! status 2, before any workload is generated; never a panic.

use std::process::Command;

#[test]
fn unusable_arguments_are_refused_not_run() {
    let cases: [&[&str]; 9] = [
        &["warmup", "--objects", "0"],
        &["warmup", "--shards", "3"],
        &["warmup", "--batch", "0"],
        &["warmup", "--threads", "0"],
        &["warmup", "--namespaces", "0"],
        &["warmup", "--runs", "1"],
        &["breakdown", "--runs", "0"],
        &["breakdown", "--shards", "0"],
        &["breakdown", "--objects", "many"],
    ];
    for args in cases {
        let out = Command::new(env!("CARGO_BIN_EXE_kube-gc-bench"))
            .args(args)
            .env("RUST_BACKTRACE", "0")
            .output()
            .expect("the binary runs");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        let flag = args[1];
        assert!(
            stderr.starts_with(&format!("error: invalid value '{}' for '{flag} ", args[2])),
            "{args:?}: {stderr}"
        );
        assert!(out.stdout.is_empty(), "{args:?} ran: {}", String::from_utf8_lossy(&out.stdout));
    }
}
