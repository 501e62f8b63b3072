//! The `kube-gc-simcluster` binary's answers to input it cannot use: one line on stderr that
//! names what to fix, and a failing exit status, never a panic or a backtrace.

use std::process::Command;

/// Runs the binary with `args` (and a backtrace asked for, which an error must not print);
/// its exit success and stderr.
fn run(args: &[&str]) -> (bool, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_kube-gc-simcluster"))
        .args(args)
        .env("RUST_BACKTRACE", "1")
        .env("RUST_LOG", "error")
        .output()
        .expect("the binary runs");
    (out.status.success(), String::from_utf8_lossy(&out.stderr).into_owned())
}

#[test]
fn unusable_input_fails_with_one_line_naming_it() {
    // A directory nothing creates.
    let missing = format!("kube-gc-simcluster-test-{}-missing", std::process::id());
    let kubeconfig = std::env::temp_dir().join(missing).join("kubeconfig");
    let kubeconfig = kubeconfig.to_str().expect("a UTF-8 path");
    let cases: [(&[&str], &str); 4] = [
        (&["--resource", "bad"], "invalid resource \"bad\""),
        (&["--listen", "127.0.0.1:0", "--kubeconfig-out", kubeconfig], kubeconfig),
        (&["--listen", "10.0.0.1:6443"], "not a loopback address"),
        (&["--preload", "10", "--shape", "nope"], "unknown shape \"nope\""),
    ];
    for (args, names) in cases {
        let (ok, stderr) = run(args);
        assert!(!ok, "{args:?} succeeded");
        let line = stderr.trim_end();
        assert!(line.starts_with("kube-gc-simcluster: ") && !line.contains('\n'), "{stderr}");
        assert!(line.contains(names), "{args:?}: {stderr}");
    }
}
