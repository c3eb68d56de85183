//! Summarises `store` runs made at several reader rates (`scripts/reader-rate-sweep.sh`) and
//! plots each row's staleness p99 and largest queue against the readers' operations a second.
//!
//! ```text
//! cargo run --release -p snapinformer-sim --example reader_rate_sweep -- \
//!     <dir> <anchor-row> [<extra run.json> ...]
//! ```
//!
//! Reads every `<dir>/<round>-r<rate>/report.json` (as the script writes them) and every
//! `<dir>/<round>-r<rate>.json` (as runs are committed under `docs/runs/`), plus any further
//! single-run reports named on the command line (a headline set's runs, say), whose reader rate
//! is read from the report itself. A run at duty pacing is refused: it has no rate to place.
//! Prints, per rate and row, the median and range of the p99 and of the queue maximum, the
//! median of the same-run ratios against `<anchor-row>`, and the reads the readers made; writes
//! `reader_rate_staleness_p99.{svg,png}` and `reader_rate_queue_depth.{svg,png}` into `<dir>`
//! (the medians; a row measured at one rate only is left out of the plots).

use std::{collections::BTreeMap, path::Path, process::ExitCode};

use serde_json::Value;
use snapinformer_sim::harness::plot::{self, SweepAxis, SweepLine};

/// One row of one run.
struct RowRun {
    p99_us: f64,
    queue_max: f64,
    reads_per_s: Option<f64>,
}

/// A plotted point: `(reads a second, staleness p99 µs, queue max)`, as [`SweepLine`] takes it.
type Point = (f64, f64, f64);

/// One run: its reader rate and its rows by name.
struct Run {
    rate: f64,
    /// Pods cached and updates a second offered (the plots' subtitle).
    load: (u64, u64),
    rows: BTreeMap<String, RowRun>,
}

fn load(path: &Path) -> Result<Run, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let v: Value =
        serde_json::from_str(&text).map_err(|e| format!("{}: not JSON: {e}", path.display()))?;
    let rate = match &v["params"]["reader_pacing"] {
        Value::Object(o) => o.get("rate").and_then(|r| r["per_s"].as_f64()),
        _ => None,
    }
    .ok_or_else(|| {
        format!("{}: readers paced by duty or not named; no rate to place it at", path.display())
    })?;
    let rows = v["rows"]
        .as_array()
        .ok_or_else(|| format!("{}: not a store report (no rows)", path.display()))?;
    let mut out = BTreeMap::new();
    for r in rows {
        let name = r["name"]
            .as_str()
            .ok_or_else(|| format!("{}: a row without a name", path.display()))?;
        let p99_us = r["staleness_us"]["p99"]
            .as_f64()
            .ok_or_else(|| format!("{}: {name} has no staleness p99", path.display()))?;
        let queue_max = r["queue_depth_max"].as_f64().unwrap_or(0.0);
        let reads_per_s = r["reader_ops_per_s"].as_f64();
        out.insert(name.to_owned(), RowRun { p99_us, queue_max, reads_per_s });
    }
    let load =
        (v["params"]["objects"].as_u64().unwrap_or(0), v["params"]["rate"].as_u64().unwrap_or(0));
    Ok(Run { rate, load, rows: out })
}

fn median(mut xs: Vec<f64>) -> f64 {
    xs.sort_by(f64::total_cmp);
    let n = xs.len();
    if n % 2 == 1 { xs[n / 2] } else { (xs[n / 2 - 1] + xs[n / 2]) / 2.0 }
}

fn range(xs: &[f64]) -> (f64, f64) {
    xs.iter().fold((f64::MAX, f64::MIN), |(lo, hi), &x| (lo.min(x), hi.max(x)))
}

fn ms(us: f64) -> String {
    if us >= 1e6 {
        format!("{:.2} s", us / 1e6)
    } else if us >= 1e4 {
        format!("{:.0} ms", us / 1e3)
    } else {
        format!("{:.1} ms", us / 1e3)
    }
}

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("reader_rate_sweep: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run() -> Result<(), String> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [dir, anchor, extra @ ..] = args.as_slice() else {
        return Err("usage: reader_rate_sweep <dir> <anchor-row> [<extra run.json> ...]".into());
    };
    let dir = Path::new(dir);
    let mut runs = Vec::new();
    let entries = std::fs::read_dir(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    for entry in entries {
        let path = entry.map_err(|e| format!("{}: {e}", dir.display()))?.path();
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or_default().to_owned();
        let Some((round, rest)) = name.split_once("-r") else { continue };
        if round.parse::<u32>().is_err() {
            continue;
        }
        if path.is_dir() && path.join("report.json").is_file() {
            runs.push(load(&path.join("report.json"))?);
        } else if rest.ends_with(".json") && path.is_file() {
            runs.push(load(&path)?);
        }
    }
    for path in extra {
        runs.push(load(Path::new(path))?);
    }
    if runs.is_empty() {
        return Err(format!("no runs under {} (<round>-r<rate>/report.json)", dir.display()));
    }
    // rate (as bits, for ordering) -> row -> runs
    let mut by_rate: BTreeMap<u64, Vec<&Run>> = BTreeMap::new();
    for r in &runs {
        by_rate.entry(r.rate.to_bits()).or_default().push(r);
    }
    let mut names: Vec<&str> = Vec::new();
    for r in &runs {
        for n in r.rows.keys() {
            if !names.contains(&n.as_str()) {
                names.push(n);
            }
        }
    }
    // The anchor first, as every table of BENCHMARKS.md has it.
    names.sort_by_key(|n| *n != anchor.as_str());
    let mut rates: Vec<(f64, Vec<&Run>)> = by_rate.into_values().map(|v| (v[0].rate, v)).collect();
    rates.sort_by(|a, b| a.0.total_cmp(&b.0));

    println!(
        "| reads/s | row | runs | staleness p99, median [min-max] | x lower than {anchor} | queue max | reads made/s |"
    );
    println!("|---:|---|---:|---:|---:|---:|---:|");
    let mut lines: Vec<(String, Vec<Point>)> =
        names.iter().map(|n| ((*n).to_owned(), Vec::new())).collect();
    for (rate, rs) in &rates {
        for (i, name) in names.iter().enumerate() {
            let rows: Vec<&RowRun> = rs.iter().filter_map(|r| r.rows.get(*name)).collect();
            if rows.is_empty() {
                continue;
            }
            let p99: Vec<f64> = rows.iter().map(|r| r.p99_us).collect();
            let queue: Vec<f64> = rows.iter().map(|r| r.queue_max).collect();
            let ratios: Vec<f64> = rs
                .iter()
                .filter_map(|r| Some(r.rows.get(anchor)?.p99_us / r.rows.get(*name)?.p99_us))
                .collect();
            let reads: Vec<f64> = rows.iter().filter_map(|r| r.reads_per_s).collect();
            let (lo, hi) = range(&p99);
            let (qlo, qhi) = range(&queue);
            let ratio = if *name == anchor.as_str() || ratios.is_empty() {
                String::new()
            } else {
                let (rlo, rhi) = range(&ratios);
                format!("{:.1}x [{rlo:.1}-{rhi:.1}]", median(ratios.clone()))
            };
            let reads = if reads.is_empty() {
                String::new()
            } else {
                let (a, b) = range(&reads);
                format!("{a:.1}-{b:.1}")
            };
            println!(
                "| {rate} | {name} | {} | {} [{}-{}] | {ratio} | {:.0} [{qlo:.0}-{qhi:.0}] | {reads} |",
                rows.len(),
                ms(median(p99.clone())),
                ms(lo),
                ms(hi),
                median(queue.clone()),
            );
            lines[i].1.push((*rate, median(p99), median(queue)));
        }
    }
    // A row measured at one rate only (an extra report's other rows) has no line to draw.
    for (name, pts) in lines.iter().filter(|(_, pts)| pts.len() == 1) {
        eprintln!("{name}: measured at {} reads/s only; in the table, not in the plots", pts[0].0);
    }
    let sweep: Vec<SweepLine<'_>> = lines
        .iter()
        .filter(|(_, pts)| pts.len() >= 2)
        .map(|(name, pts)| SweepLine { name, points: pts.clone() })
        .collect();
    let axis = SweepAxis {
        stem: "reader_rate",
        what: "reads a second",
        desc: "reader operations/s, all readers together",
    };
    let (pods, offered) = runs[0].load;
    let subtitle = if runs.iter().all(|r| r.load == runs[0].load) {
        format!("{pods} pods, {offered} updates/s, median of runs")
    } else {
        "runs of different loads; median of runs".to_owned()
    };
    match plot::write_plots_against(dir, &sweep, &subtitle, &axis) {
        Ok(files) => {
            for f in files {
                eprintln!("wrote {}", f.display());
            }
        }
        Err(e) => eprintln!("reader_rate_sweep: no plots: {e}"),
    }
    Ok(())
}
