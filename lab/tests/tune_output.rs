//! `kube-gc-lab tune`'s output files: a path it cannot write is named on stderr and fails the
//! run, and the table (minutes of measurements) is still printed.

use std::process::Command;

#[test]
fn an_unwritable_output_is_named_and_the_table_still_printed() {
    let data = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/tuning.json");
    let missing = format!("kube-gc-lab-test-{}-missing", std::process::id());
    let svg = std::env::temp_dir().join(missing).join("tuning.svg");
    let out = Command::new(env!("CARGO_BIN_EXE_kube-gc-lab"))
        .args(["tune", "--from-json", data, "--out-svg"])
        .arg(&svg)
        .env("RUST_BACKTRACE", "1")
        .output()
        .expect("the binary runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(!out.status.success(), "a file it could not write, and success");
    let expected = format!("kube-gc-lab tune: cannot write {}: ", svg.display());
    assert!(stderr.starts_with(&expected) && stderr.lines().count() == 1, "{stderr}");
    assert!(stdout.starts_with("| qps:burst | latency |"), "no table: {stdout}");
}
