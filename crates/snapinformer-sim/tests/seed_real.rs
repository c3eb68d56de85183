//! `seed --mode real` end to end at a tiny scale: our snapshot row and the real
//! kube-controller-manager, each on a fresh real control plane (etcd, kube-apiserver, kwok),
//! counted from the server's side.
//!
//! Where `scripts/real-cluster build` has not cached the binaries this prints `SKIPPED: ...`
//! and passes, unless `SNAPINFORMER_REQUIRE_REAL_CLUSTER=1`, which turns the skip into a
//! failure (as the real-cluster tests of `snapinformer-kube` do).

use std::{io::Write, process::Command};

use snapinformer_sim::scenarios::seed::{KCM_ROW, real};

/// The environment variable that turns a skip into a failure.
const REQUIRE_ENV: &str = "SNAPINFORMER_REQUIRE_REAL_CLUSTER";

/// Whether the real control plane can run here; prints `SKIPPED: <reason>` when it cannot and
/// is not required, and fails when it is required.
fn available() -> bool {
    match real::find_binaries() {
        Ok(_) => true,
        Err(why) => {
            let required = std::env::var(REQUIRE_ENV).is_ok_and(|v| v == "1");
            assert!(
                !required,
                "the real cluster is required ({REQUIRE_ENV}=1) but cannot run: {why}"
            );
            // Straight to stderr: libtest captures `eprintln!` of passing tests.
            let _ = writeln!(std::io::stderr(), "SKIPPED: {why}");
            false
        }
    }
}

#[test]
fn on_the_real_control_plane_every_pod_runs_without_duplicates_and_the_server_counts_the_controller_manager()
 {
    if !available() {
        return;
    }
    let out =
        std::env::temp_dir().join(format!("snapinformer-seed-real-test-{}", std::process::id()));
    let output = Command::new(env!("CARGO_BIN_EXE_snapinformer-sim"))
        .args(["seed", "--mode", "real", "--sets", "2", "--replicas", "5", "--nodes", "3"])
        .args(["--rows", &format!("snapshot-bg+ryw,{KCM_ROW}"), "--max-time", "40s"])
        .arg("--out")
        .arg(&out)
        .output()
        .expect("run snapinformer-sim");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "seed --mode real failed:\n{stdout}\n{stderr}");
    println!("{stdout}");
    let report: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("report.json")).expect("report written"))
            .expect("report is JSON");
    let mode = &report["modes"][0];
    assert_eq!(mode["mode"], "real");
    let rows = mode["rows"].as_array().expect("rows");
    let names: Vec<&str> = rows.iter().filter_map(|r| r["name"].as_str()).collect();
    assert_eq!(names, ["snapshot-bg+ryw", KCM_ROW]);
    for row in rows {
        let name = &row["name"];
        assert!(
            row["time_to_all_running_s"].as_f64().is_some(),
            "{name}: not every pod ran: {row:#}"
        );
        assert_eq!(row["duplicate_daemon_pods"], 0, "{name}: {row:#}");
        let server = &row["server"];
        assert_eq!(server["pod_creates"], 2 * 5 + 3, "{name}: every pod created once: {row:#}");
        assert_eq!(server["pod_create_failures"], 0, "{name}: {row:#}");
    }
    let ours = &rows[0];
    assert_eq!(ours["conflicts_409"], 0, "read-your-writes: no stale creates: {ours:#}");
    assert_eq!(ours["server"]["controller_clients"][0], "snapinformer-seed");
    assert_eq!(ours["cache_pods"], ours["cluster_pods"]);
    let kcm = &rows[1]["server"]["kcm"];
    let queues = kcm["queues"].as_array().expect("kcm queues");
    for name in ["statefulset", "daemonset"] {
        let queue = queues.iter().find(|q| q["name"] == name).expect("queue reported");
        assert!(queue["adds"].as_u64() > Some(0), "the {name} queue had work: {kcm:#}");
    }
    assert!(kcm["rss_peak_bytes"].as_u64().is_some_and(|b| b > 10 << 20), "{kcm:#}");
    std::fs::remove_dir_all(&out).expect("remove the output");
}
