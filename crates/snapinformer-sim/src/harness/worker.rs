//! Worker processes: each row of a report runs in its own process (clean heap and RSS), started
//! by the parent with `--worker <row> --worker-out <file>`.
//!
//! The protocol, which any worker program follows (this executable, or the Go `client-go`
//! worker): progress goes to stderr as lines starting with `phase: `; anything else on stderr is
//! kept for the error message; the result is one JSON document written to the `--worker-out`
//! file; exit status 0 means success.

use std::{
    io::{BufRead, BufReader, IsTerminal},
    path::Path,
    process::Command,
    time::Duration,
};

use indicatif::{ProgressBar, ProgressStyle};

/// Prints a phase message as a worker does (`phase: <msg>` on stderr).
pub fn phase_line(msg: &str) {
    eprintln!("phase: {msg}");
}

/// A progress bar over `len` items named `unit` ("rows").
pub fn progress_bar(len: u64, unit: &str) -> ProgressBar {
    let bar = ProgressBar::new(len);
    let template = format!("{{elapsed_precise}} [{{bar:30}}] {{pos}}/{{len}} {unit}  {{msg}}");
    bar.set_style(
        ProgressStyle::with_template(&template).expect("valid template").progress_chars("=> "),
    );
    bar.enable_steady_tick(Duration::from_millis(200));
    bar
}

/// Runs a worker process built by `cmd`, which writes its JSON to `out`: relays its `phase: `
/// lines to the progress bar (and to stderr as plain lines when stderr is not a terminal),
/// keeps its other output for the error message, and parses its JSON.
pub fn run_child<T: serde::de::DeserializeOwned>(
    mut cmd: Command,
    out: &Path,
    label: &str,
    bar: &ProgressBar,
) -> Result<T, String> {
    cmd.stdout(std::process::Stdio::null()).stderr(std::process::Stdio::piped());
    let mut child = cmd.spawn().map_err(|e| format!("starting worker for {label}: {e}"))?;
    let plain = !std::io::stderr().is_terminal();
    let mut tail = Vec::new();
    if let Some(stderr) = child.stderr.take() {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if let Some(msg) = line.strip_prefix("phase: ") {
                if plain {
                    eprintln!("[{label}] {msg}");
                }
                bar.set_message(format!("{label}: {msg}"));
            } else {
                tail.push(line);
            }
        }
    }
    let status = child.wait().map_err(|e| format!("waiting for worker {label}: {e}"))?;
    if !status.success() {
        return Err(format!("worker for {label} failed ({status}):\n{}", tail.join("\n")));
    }
    let bytes = std::fs::read(out).map_err(|e| format!("reading {}: {e}", out.display()))?;
    let _ = std::fs::remove_file(out);
    serde_json::from_slice(&bytes).map_err(|e| format!("parsing worker output for {label}: {e}"))
}

/// The rest before each row when a command is not given `--rest` (none with `--quick`).
///
/// On the project machine, a virtual machine whose host takes freed guest memory back (the
/// balloon device's free page reporting), touching fresh memory costs about 2.6 s of CPU per GiB
/// when it is cold and about 0.12 s right after another process freed it, and freed memory
/// goes cold over about 12 s (8 GiB touched again after 0, 1, 3, 6 and 12 s of rest: 1.0, 4.7,
/// 4.5, 11.6 and 20.3 s, against 21.1 s cold; BENCHMARKS.md). A row that starts right after
/// another therefore grows its heap on the memory the other just freed: measured in `seed`,
/// the same two rows spent 35.1 and 22.6 s in the kernel in one order and 39.3 and 20.4 s in
/// the other, the second row cheaper each time. A rest longer than that puts every row on
/// the same footing.
pub const DEFAULT_REST: Duration = Duration::from_secs(15);

/// The rest a command runs with: `given` (`--rest`), else none with `--quick` and
/// [`DEFAULT_REST`] otherwise, in seconds.
pub fn rest_seconds(given: Option<Duration>, quick: bool) -> f64 {
    given.unwrap_or(if quick { Duration::ZERO } else { DEFAULT_REST }).as_secs_f64()
}

/// Waits `rest` before a row's worker starts (see [`DEFAULT_REST`]), saying so on the progress
/// bar.
pub fn rest_before_row(rest: Duration, label: &str, bar: &ProgressBar) {
    if rest.is_zero() {
        return;
    }
    bar.set_message(format!(
        "{label}: resting {:.0} s, so that the machine takes back the last row's memory",
        rest.as_secs_f64()
    ));
    std::thread::sleep(rest);
}

/// The value of a clap `ValueEnum` as written on the command line.
pub fn arg_name<V: clap::ValueEnum>(v: &V) -> String {
    v.to_possible_value().expect("no skipped variants").get_name().to_owned()
}

/// A duration given in seconds, as a `humantime` flag value to the microsecond (`1500us`).
pub fn duration_arg(seconds: f64) -> String {
    format!("{}us", (seconds * 1e6).round() as u64)
}
