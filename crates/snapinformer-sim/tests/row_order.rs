//! `store` and `seed` with `--repeat N --row-order`: each run starts one row later unless the
//! order is fixed, and every run's report lists its rows in `--rows` order whatever order they
//! ran in (and, for `store`, how fast the machine was before each row).

use std::{path::Path, process::Command};

use serde_json::Value;

fn read_json(p: &Path) -> Value {
    serde_json::from_slice(&std::fs::read(p).expect("report written")).expect("report is JSON")
}

/// Runs the simulator with `args` into a scratch directory named after `label`; checks that it
/// succeeded and returns the median report and each run's report.
fn sim_runs(label: &str, args: &[&str]) -> (Value, Vec<Value>) {
    let out = std::env::temp_dir()
        .join(format!("snapinformer-row-order-{label}-test-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&out);
    let output = Command::new(env!("CARGO_BIN_EXE_snapinformer-sim"))
        .args(args)
        .arg("--out")
        .arg(&out)
        .output()
        .expect("run snapinformer-sim");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{args:?} failed:\n{stderr}");
    let median = read_json(&out.join("report.json"));
    let runs = median["repeat"]["files"]
        .as_array()
        .expect("the median lists its runs")
        .iter()
        .map(|f| read_json(&out.join(f.as_str().expect("a file name"))))
        .collect();
    let _ = std::fs::remove_dir_all(&out);
    (median, runs)
}

/// A tiny `store` (two Rust rows, `repeat` runs, no rest) with `extra` flags.
fn store_runs(label: &str, repeat: usize, extra: &[&str]) -> (Value, Vec<Value>) {
    let repeat = repeat.to_string();
    let mut args = vec!["store", "--quick", "--rows", "snapshot,locked", "--repeat", &repeat];
    args.extend(["--objects", "400", "--nodes", "4", "--readers", "1", "--reader-warmup", "0s"]);
    args.extend(["--duration", "300ms", "--rate", "1000", "--updates", "2000"]);
    args.extend(extra);
    sim_runs(label, &args)
}

fn names(v: &Value) -> Vec<String> {
    v.as_array()
        .expect("an array")
        .iter()
        .map(|x| x.as_str().or_else(|| x["name"].as_str()).expect("a name").to_owned())
        .collect()
}

#[test]
fn repeated_runs_rotate_the_rows_and_report_them_in_the_order_asked() {
    let (median, runs) = store_runs("rotate", 3, &[]);
    let expected = [["snapshot", "locked"], ["locked", "snapshot"], ["snapshot", "locked"]];
    let orders: Vec<Vec<String>> =
        median["run_orders"].as_array().expect("run_orders").iter().map(names).collect();
    assert_eq!(orders, expected.map(|o| o.map(str::to_owned).to_vec()));
    assert_eq!(runs.len(), 3);
    for (i, run) in runs.iter().enumerate() {
        assert_eq!(names(&run["run_order"]), orders[i], "run {i} records the order it ran in");
        assert_eq!(names(&run["rows"]), ["snapshot", "locked"], "run {i} lists rows as asked");
        for row in run["rows"].as_array().expect("rows") {
            let speed = &row["machine_speed"];
            for figure in ["pod_build_ns", "memory_load_ns"] {
                let v = speed[figure].as_f64().unwrap_or(f64::NAN);
                assert!(
                    v > 0.0,
                    "run {i} {}: the machine timed before it, {figure} {v}",
                    row["name"]
                );
            }
            assert_eq!(speed["cycle_mib"], 4, "--quick times the small probe: {speed}");
        }
    }
    assert_eq!(names(&median["rows"]), ["snapshot", "locked"]);
    assert!(median.get("run_order").is_none(), "the median ran in no one order: {median:#}");
}

#[test]
fn a_fixed_row_order_runs_every_repeat_as_asked() {
    let (median, runs) = store_runs("fixed", 2, &["--row-order", "fixed"]);
    for (i, run) in runs.iter().enumerate() {
        assert_eq!(names(&run["run_order"]), ["snapshot", "locked"], "run {i}");
    }
    assert_eq!(median["run_orders"].as_array().map(Vec::len), Some(2));
}

#[test]
fn repeated_seed_runs_rotate_the_rows_of_a_mode_and_report_them_in_the_order_asked() {
    let rows = ["locked+ryw", "snapshot-bg+ryw"];
    let joined = rows.join(",");
    let mut args = vec!["seed", "--mode", "inproc", "--rows", &joined, "--repeat", "2"];
    args.extend(["--sets", "2", "--replicas", "10", "--nodes", "3", "--rate", "2000"]);
    args.extend(["--max-time", "30s", "--rest", "0s"]);
    let (median, runs) = sim_runs("seed", &args);
    assert_eq!(runs.len(), 2);
    for (i, run) in runs.iter().enumerate() {
        let mode = &run["modes"][0];
        let mut ran = rows.to_vec();
        ran.rotate_left(i);
        assert_eq!(names(&mode["run_order"]), ran, "run {i} starts {i} rows later");
        assert_eq!(names(&mode["rows"]), rows, "run {i} lists its rows as asked");
        for row in mode["rows"].as_array().expect("rows") {
            let speed = &row["machine_speed"];
            assert!(speed["pod_build_ns"].as_f64().is_some_and(|v| v > 0.0), "run {i}: {row:#}");
            assert_eq!(speed["cycle_mib"], 128, "without --quick, the whole probe: {speed}");
        }
    }
    assert!(median["modes"][0].get("run_order").is_none(), "{:#}", median["modes"][0]);
}
