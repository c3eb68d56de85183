//! `store` and `seed` with `--repeat N --row-order`: each run starts one row later unless the
//! order is fixed, and every run's report lists its rows in `--rows` order whatever order they
//! ran in.

use std::{path::Path, process::Command};

use serde_json::Value;

/// Runs a tiny `store` (two Rust rows, `repeat` runs, no rest) with `extra` flags into a
/// scratch directory named after `label`; returns the median report and each run's report.
fn store_runs(label: &str, repeat: usize, extra: &[&str]) -> (Value, Vec<Value>) {
    let out = std::env::temp_dir()
        .join(format!("snapinformer-store-order-{label}-test-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&out);
    let output = Command::new(env!("CARGO_BIN_EXE_snapinformer-sim"))
        .args(["store", "--quick", "--rows", "snapshot,locked", "--repeat", &repeat.to_string()])
        .args(["--objects", "400", "--nodes", "4", "--readers", "1", "--reader-warmup", "0s"])
        .args(["--duration", "300ms", "--rate", "1000", "--updates", "2000"])
        .args(extra)
        .arg("--out")
        .arg(&out)
        .output()
        .expect("run snapinformer-sim");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "store {extra:?} failed:\n{stderr}");
    let read = |p: &Path| -> Value {
        serde_json::from_slice(&std::fs::read(p).expect("report written")).expect("JSON")
    };
    let median = read(&out.join("report.json"));
    let runs = median["repeat"]["files"]
        .as_array()
        .expect("the median lists its runs")
        .iter()
        .map(|f| read(&out.join(f.as_str().expect("a file name"))))
        .collect();
    let _ = std::fs::remove_dir_all(&out);
    (median, runs)
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
    let out =
        std::env::temp_dir().join(format!("snapinformer-seed-order-test-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&out);
    let rows = ["locked+ryw", "snapshot-bg+ryw"];
    let output = Command::new(env!("CARGO_BIN_EXE_snapinformer-sim"))
        .args(["seed", "--mode", "inproc", "--rows", &rows.join(","), "--repeat", "2"])
        .args(["--sets", "2", "--replicas", "10", "--nodes", "3", "--rate", "2000"])
        .args(["--max-time", "30s", "--rest", "0s"])
        .arg("--out")
        .arg(&out)
        .output()
        .expect("run snapinformer-sim");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "seed failed:\n{stderr}");
    let read = |p: &Path| -> Value {
        serde_json::from_slice(&std::fs::read(p).expect("report written")).expect("JSON")
    };
    let median = read(&out.join("report.json"));
    let files = median["repeat"]["files"].as_array().expect("the median lists its runs").clone();
    assert_eq!(files.len(), 2);
    for (i, file) in files.iter().enumerate() {
        let run = read(&out.join(file.as_str().expect("a file name")));
        let mode = &run["modes"][0];
        let mut ran = rows.to_vec();
        ran.rotate_left(i);
        assert_eq!(names(&mode["run_order"]), ran, "run {i} starts {i} rows later");
        assert_eq!(names(&mode["rows"]), rows, "run {i} lists its rows as asked");
    }
    assert!(median["modes"][0].get("run_order").is_none(), "{:#}", median["modes"][0]);
    let _ = std::fs::remove_dir_all(&out);
}
