//! What every report records about where and how it ran, and the targets it checks.

/// Where and how a run happened.
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
pub struct Environment {
    /// UTC start time, RFC 3339.
    pub started_at: String,
    /// Logical CPUs.
    pub cpus: usize,
    /// The command line.
    pub command: String,
    /// The global allocator every row ran on.
    pub allocator: String,
    /// The load average (1, 5 and 15 minutes) when the run started: other work on the machine.
    #[serde(default)]
    pub load_average: Option<[f64; 3]>,
}

impl Environment {
    /// This process's environment, the run having started at `started_at`.
    pub fn capture(started_at: String, allocator: &str) -> Self {
        Environment {
            started_at,
            cpus: std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1),
            command: std::env::args().collect::<Vec<_>>().join(" "),
            allocator: allocator.to_owned(),
            load_average: load_average(),
        }
    }
}

/// `/proc/loadavg`'s three averages.
pub fn load_average() -> Option<[f64; 3]> {
    let text = std::fs::read_to_string("/proc/loadavg").ok()?;
    let mut it = text.split_whitespace().map(|v| v.parse::<f64>().ok());
    Some([it.next()??, it.next()??, it.next()??])
}

/// Writes `value` as pretty JSON to `path`.
pub fn write_json<T: serde::Serialize>(path: &std::path::Path, value: &T) -> Result<(), String> {
    let json = serde_json::to_string_pretty(value).map_err(|e| e.to_string())?;
    std::fs::write(path, json).map_err(|e| format!("writing {}: {e}", path.display()))
}

/// The current UTC time, RFC 3339 to the second.
pub fn now_rfc3339() -> String {
    humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string()
}

/// One target with the measured value.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct TargetCheck {
    /// What is compared.
    pub target: String,
    /// Measured value.
    pub measured: f64,
    /// The bound.
    pub bound: f64,
    /// Whether the bound is met.
    pub met: bool,
}

/// Microseconds for a table cell: `812us`, `1.9ms`, `2.3s`.
pub fn fmt_us(us: u64) -> String {
    if us >= 1_000_000 {
        format!("{:.1}s", us as f64 / 1e6)
    } else if us >= 1000 {
        format!("{:.1}ms", us as f64 / 1e3)
    } else {
        format!("{us}us")
    }
}

/// Bytes as MiB for a table cell.
pub fn fmt_mib(bytes: u64) -> String {
    format!("{:.0}", bytes as f64 / (1024.0 * 1024.0))
}
