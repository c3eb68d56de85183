//! `seed --prefault-gib`: the worker touches and frees heap before its row and keeps it, so
//! that the row grows its heap on memory the process already holds.

use std::process::Command;

fn sim() -> Command {
    Command::new(env!("CARGO_BIN_EXE_snapinformer-sim"))
}

/// Runs `seed` in process on a small world (2 sets of 10 replicas, 3 nodes, 2,000 events/s,
/// one run, no rest) with `rows` and `extra` arguments, into a scratch directory (named after
/// `label`); checks that it succeeded, and returns its report and standard error.
fn seed_report(label: &str, rows: &str, extra: &[&str]) -> (serde_json::Value, String) {
    let small = [
        "--mode",
        "inproc",
        "--rows",
        rows,
        "--repeat",
        "1",
        "--sets",
        "2",
        "--replicas",
        "10",
        "--nodes",
        "3",
        "--rate",
        "2000",
        "--max-time",
        "30s",
        "--rest",
        "0s",
    ];
    let args: Vec<&str> = small.iter().chain(extra).copied().collect();
    let out =
        std::env::temp_dir().join(format!("snapinformer-seed-{label}-test-{}", std::process::id()));
    let output = sim()
        .arg("seed")
        .args(&args)
        .arg("--out")
        .arg(&out)
        .output()
        .expect("run snapinformer-sim");
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert!(output.status.success(), "seed {args:?} failed:\n{stderr}");
    let report: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("report.json")).expect("report written"))
            .expect("report is JSON");
    let _ = std::fs::remove_dir_all(&out);
    (report, stderr)
}

#[test]
fn a_prefaulted_worker_keeps_the_memory_through_its_row() {
    let (report, stderr) = seed_report("prefault", "snapshot-bg+ryw", &["--prefault-gib", "0.25"]);
    assert!(stderr.contains("prefaulted 0.25 GiB of heap"), "{stderr}");
    assert_eq!(report["params"]["prefault_gib"], 0.25);
    assert_eq!(report["params"]["rest_s"], 0.0);
    let row = &report["modes"][0]["rows"][0];
    assert!(row["time_to_all_running_s"].as_f64().is_some(), "the row converged: {row:#}");
    // The row runs for seconds (it settles for 2 s after converging), longer than the second
    // after which mimalloc would purge freed memory: the last sample still holds the prefault.
    let series = row["memory_trace"]["series"].as_array().expect("a memory series");
    let (last_s, last_rss) = series
        .last()
        .map(|s| (s[0].as_f64().unwrap_or(0.0), s[2].as_u64().unwrap_or(0)))
        .expect("at least one sample");
    assert!(last_s >= 1.5, "sampled for {last_s} s only");
    assert!(last_rss >= 256 << 20, "RSS {last_rss} B at {last_s} s: the prefault was given back");
    // The prefault's own peak is not the row's: the peak heap is the largest sample.
    let heap = row["peak_heap_bytes"].as_u64().expect("peak heap");
    assert!(heap < 256 << 20, "peak heap {heap} B counts the prefault");
}

#[test]
fn prefaulting_is_refused_in_real_mode_before_anything_runs() {
    let output = sim()
        .args(["seed", "--mode", "real", "--prefault-gib", "1", "--out"])
        .arg(std::env::temp_dir().join("snapinformer-seed-prefault-real-refused"))
        .output()
        .expect("run snapinformer-sim");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success());
    assert!(
        stderr.contains("--prefault-gib applies to the inproc and http modes only"),
        "{stderr}"
    );
}

#[test]
fn with_pod_arenas_every_row_gets_its_pods_in_arenas_and_still_converges() {
    let (report, _) = seed_report("arena", "snapshot-bg+ryw,locked-batch+ryw", &["--pod-arena"]);
    assert_eq!(report["params"]["pod_arena"], true);
    let rows = report["modes"][0]["rows"].as_array().expect("rows");
    assert_eq!(rows.len(), 2);
    for row in rows {
        assert!(row["time_to_all_running_s"].as_f64().is_some(), "the row converged: {row:#}");
        // 20 pods and 3 daemon pods created, each started: at least one arena pod per event
        // delivered for them (and one per refresh).
        let delivered = row["stream_events"]["writes"].as_u64().unwrap_or(0)
            + row["stream_events"]["starts"].as_u64().unwrap_or(0)
            + row["stream_events"]["refreshes"].as_u64().unwrap_or(0);
        let built = row["arena_objects"].as_u64().expect("arena objects counted");
        assert!(delivered >= 46, "{row:#}");
        assert!(built >= delivered, "{built} pods in arenas for {delivered} events: {row:#}");
    }
}
