//! The Go rows of the `store` scenario: real, unmodified `k8s.io/client-go` `tools/cache`, driven
//! from Go with the workload the Rust rows get.
//!
//! The Go module lives in `baselines/client-go/` at the workspace root. Its worker binary speaks
//! the `store` worker protocol (the same flags, `phase:` lines on stderr, a JSON
//! [`StoreRowReport`](crate::scenarios::store::StoreRowReport) written to `--worker-out`), with
//! Go-only figures in [`GoRuntimeReport`]. Two rows:
//! - `client-go`: `cache.NewSharedIndexInformer` with its whole pipeline (reflector, `RealFIFO`,
//!   batched pops applied in one `Transaction`, distribution to a registered event handler); an
//!   update is visible when that handler receives it. Its peer is our `snapinformer` row.
//! - `client-go-indexer`: the bare `cache.NewIndexer` store written in transactions of up to
//!   1000 updates; an update is visible when its transaction returns. Its peers are our
//!   `snapshot` and `snapshot-bg` rows.
//!
//! [`worker_binary`] builds the module with `go build` once per content of its sources (and Go
//! version) and caches the binary under `${XDG_CACHE_HOME:-$HOME/.cache}/snapinformer/client-go/`.
//! The first build compiles client-go, which takes a couple of minutes; later runs find the
//! binary in the cache after hashing the module's sources.

use std::{
    collections::BTreeMap,
    ffi::OsStr,
    path::{Path, PathBuf},
    process::Command,
};

/// Where the Go module is, relative to this crate (compiled in; see [`MODULE_DIR_ENV`]).
const MODULE_DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../baselines/client-go");

/// The environment variable that names the Go module's directory (`baselines/client-go` of a
/// checkout) for a simulator binary that was built in, or copied from, another checkout: the
/// compiled-in path is that checkout's.
pub const MODULE_DIR_ENV: &str = "SNAPINFORMER_CLIENT_GO_MODULE";

/// Name of the worker binary in the cache.
const BINARY_NAME: &str = "snapinformer-client-go";

/// The environment variable that makes a missing Go toolchain an error where it would otherwise
/// be a reason to skip (the tests of the Go rows; CI sets it).
pub const REQUIRE_GO_ENV: &str = "SNAPINFORMER_REQUIRE_GO";

/// What only a Go row reports: the Go runtime's view of memory and collection, and how the row
/// was configured. Every field defaults, so reports from older workers still parse.
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
#[serde(default)]
pub struct GoRuntimeReport {
    /// `runtime.Version()`.
    pub go_version: String,
    /// The `k8s.io/client-go` module version built in.
    pub client_go_version: String,
    /// `runtime.GOMAXPROCS(0)`.
    pub gomaxprocs: u32,
    /// The `GOGC` environment variable (empty: the default, 100).
    pub gogc: String,
    /// client-go's informer feature gates as the worker saw them.
    pub feature_gates: BTreeMap<String, bool>,
    /// `MemStats.HeapAlloc` at the end of the run (garbage not yet collected included).
    pub heap_alloc_bytes: u64,
    /// `MemStats.HeapInuse` at the end of the run.
    pub heap_inuse_bytes: u64,
    /// Largest sampled `HeapAlloc` (also the row's `memory_trace.heap_peak_bytes`).
    pub peak_heap_alloc_bytes: u64,
    /// Largest sampled `HeapInuse` (`HeapAlloc` plus free space in used spans).
    pub peak_heap_inuse_bytes: u64,
    /// Largest sampled live heap (as marked by the last completed collection).
    pub peak_heap_live_bytes: u64,
    /// Garbage collections in the run (`MemStats.NumGC`).
    pub gc_cycles: u32,
    /// Of which forced (the memory phase forces one per measurement).
    pub gc_forced_cycles: u32,
    /// Total stop-the-world pause time of the collections, microseconds.
    pub gc_pause_total_us: u64,
    /// Fraction of the CPU time the collector used (`MemStats.GCCPUFraction`).
    pub gc_cpu_fraction: f64,
    /// How the placement was applied to the Go process's threads.
    pub placement: String,
    /// How the row maps the scenario onto client-go.
    pub notes: Vec<String>,
}

/// Why the Go worker could not be had.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// `go` is not on `PATH`.
    #[error(
        "the client-go rows need the Go toolchain (1.26 or newer) to build baselines/client-go, and `go` was not found on PATH. Install Go from https://go.dev/dl/ (e.g. `curl -LO https://go.dev/dl/go1.26.8.linux-amd64.tar.gz && sudo tar -C /usr/local -xzf go1.26.8.linux-amd64.tar.gz && export PATH=$PATH:/usr/local/go/bin`) and run again, or leave the client-go rows out with --rows"
    )]
    GoMissing,
    /// The module directory has no `go.mod`.
    #[error(
        "the Go worker's module is not at {dir} (no go.mod there). This simulator looks for the baselines/client-go directory of the checkout it was built from; for a binary built elsewhere or copied, set {env_var} to the baselines/client-go directory of a checkout, or leave the client-go rows out with --rows",
        env_var = MODULE_DIR_ENV
    )]
    ModuleMissing {
        /// Where it was looked for.
        dir: PathBuf,
    },
    /// The module's sources could not be read.
    #[error("reading the Go worker's sources in {dir}: {source}")]
    Sources {
        /// The module directory.
        dir: PathBuf,
        /// What went wrong.
        source: std::io::Error,
    },
    /// `go` failed.
    #[error("{what} failed: {detail}")]
    Go {
        /// The command.
        what: String,
        /// Its output or error.
        detail: String,
    },
    /// The cache directory could not be written.
    #[error("caching the Go worker in {path}: {source}")]
    Cache {
        /// The path written.
        path: PathBuf,
        /// What went wrong.
        source: std::io::Error,
    },
}

/// `Result` with the Go worker's [`Error`] as the default error type.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Whether `SNAPINFORMER_REQUIRE_GO` (or `SNAPINFORMER_REQUIRE_REAL_CLUSTER`, which needs Go
/// as well) asks that a missing Go toolchain fail rather than skip.
pub fn go_required() -> bool {
    [REQUIRE_GO_ENV, "SNAPINFORMER_REQUIRE_REAL_CLUSTER"]
        .iter()
        .any(|v| std::env::var_os(v).is_some_and(|v| !v.is_empty() && v != "0"))
}

/// The Go module's directory: [`MODULE_DIR_ENV`] if set and not empty, else
/// `baselines/client-go` of the checkout this binary was built from.
pub fn module_dir() -> PathBuf {
    module_dir_from(std::env::var_os(MODULE_DIR_ENV))
}

fn module_dir_from(over: Option<std::ffi::OsString>) -> PathBuf {
    over.filter(|v| !v.is_empty()).map_or_else(|| PathBuf::from(MODULE_DIR), PathBuf::from)
}

/// FNV-1a, 64 bits: a content hash for the build cache (not for security).
fn fnv1a(h: &mut u64, bytes: &[u8]) {
    for b in bytes {
        *h ^= u64::from(*b);
        *h = h.wrapping_mul(0x0100_0000_01b3);
    }
}

fn go(args: &[&str], dir: &Path) -> Result<std::process::Output> {
    let what = format!("go {} (in {})", args.join(" "), dir.display());
    let out = Command::new("go").args(args).current_dir(dir).output().map_err(|e| {
        if e.kind() == std::io::ErrorKind::NotFound {
            Error::GoMissing
        } else {
            Error::Go { what: what.clone(), detail: e.to_string() }
        }
    })?;
    if !out.status.success() {
        return Err(Error::Go {
            what,
            detail: format!("{}\n{}", out.status, String::from_utf8_lossy(&out.stderr).trim()),
        });
    }
    Ok(out)
}

/// Hash of the Go toolchain's version and of `go.mod`, `go.sum` and every `.go` file of the
/// module (by name, in name order).
fn source_hash(dir: &Path) -> Result<String> {
    let sources = |source| Error::Sources { dir: dir.to_path_buf(), source };
    let version = go(&["env", "GOVERSION"], dir)?;
    let mut h = 0xcbf2_9ce4_8422_2325u64;
    fnv1a(&mut h, &version.stdout);
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(sources)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            let name = p.file_name().and_then(OsStr::to_str).unwrap_or_default();
            name == "go.mod" || name == "go.sum" || name.ends_with(".go")
        })
        .collect();
    files.sort();
    for f in files {
        fnv1a(&mut h, f.file_name().map(OsStr::as_encoded_bytes).unwrap_or_default());
        fnv1a(&mut h, &std::fs::read(&f).map_err(sources)?);
    }
    Ok(format!("{h:016x}"))
}

/// Where built workers are kept: `${XDG_CACHE_HOME:-$HOME/.cache}/snapinformer/client-go`.
pub fn cache_root() -> PathBuf {
    let base = std::env::var_os("XDG_CACHE_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
        .unwrap_or_else(std::env::temp_dir);
    base.join("snapinformer").join("client-go")
}

/// The Go worker binary for the current sources: from the cache, or built with `go build`
/// (a couple of minutes the first time, as it compiles client-go). `progress` hears about a
/// build.
pub fn worker_binary(progress: &dyn Fn(&str)) -> Result<PathBuf> {
    let dir = module_dir();
    if !dir.join("go.mod").is_file() {
        return Err(Error::ModuleMissing { dir });
    }
    let hash = source_hash(&dir)?;
    let target_dir = cache_root().join(&hash);
    let binary = target_dir.join(BINARY_NAME);
    if binary.is_file() {
        return Ok(binary);
    }
    let cache = |path: &Path| {
        let path = path.to_path_buf();
        move |source| Error::Cache { path, source }
    };
    std::fs::create_dir_all(&target_dir).map_err(cache(&target_dir))?;
    progress("building the Go worker (go build; the first time compiles client-go)");
    // Each build writes its own file and renames it into place, so concurrent builds (tests
    // running in parallel, two simulators) do not clash.
    let partial = target_dir.join(format!(".{BINARY_NAME}.{}", std::process::id()));
    let out = partial.to_str().ok_or_else(|| Error::Cache {
        path: partial.clone(),
        source: std::io::Error::new(std::io::ErrorKind::InvalidInput, "path is not UTF-8"),
    })?;
    go(&["build", "-trimpath", "-buildvcs=false", "-o", out, "."], &dir)?;
    std::fs::rename(&partial, &binary).map_err(cache(&binary))?;
    Ok(binary)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_missing_toolchain_error_says_how_to_install_go_and_how_to_do_without() {
        let text = Error::GoMissing.to_string();
        assert!(text.contains("https://go.dev/dl/"), "{text}");
        assert!(text.contains("--rows"), "{text}");
    }

    #[test]
    fn the_module_directory_can_be_named_in_the_environment_and_defaults_to_the_checkouts() {
        assert_eq!(
            module_dir_from(Some("/elsewhere/baselines/client-go".into())),
            PathBuf::from("/elsewhere/baselines/client-go")
        );
        assert_eq!(
            module_dir_from(Some("".into())),
            PathBuf::from(MODULE_DIR),
            "empty means unset"
        );
        assert_eq!(module_dir_from(None), PathBuf::from(MODULE_DIR));
        assert!(
            module_dir_from(None).join("go.mod").is_file(),
            "the compiled-in path is this checkout's module"
        );
    }

    #[test]
    fn a_missing_module_says_where_it_looked_and_how_to_point_elsewhere() {
        let text = Error::ModuleMissing { dir: "/gone/baselines/client-go".into() }.to_string();
        assert!(text.contains("/gone/baselines/client-go"), "{text}");
        assert!(text.contains(MODULE_DIR_ENV), "{text}");
        assert!(text.contains("--rows"), "{text}");
    }

    #[test]
    fn the_cache_lives_under_xdg_cache_home_or_home() {
        let root = cache_root();
        assert!(root.ends_with("snapinformer/client-go"), "{}", root.display());
    }
}
