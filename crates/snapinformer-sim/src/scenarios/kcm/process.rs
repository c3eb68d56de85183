//! The real kube-controller-manager as a child process: where its binary is, how it is started
//! against a kubeconfig, its memory and CPU from `/proc`, and its `/metrics`.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

/// The Kubernetes version whose binaries `scripts/real-cluster build` caches.
pub const KUBERNETES_VERSION: &str = "v1.37.2";

/// Environment variable naming the binary (instead of `--kcm-bin`).
pub const BIN_ENV: &str = "SNAPINFORMER_KCM_BIN";

/// Finds the kube-controller-manager binary: `explicit` (`--kcm-bin`), else `$SNAPINFORMER_KCM_BIN`,
/// else the newest `kube-controller-manager` that `scripts/real-cluster build` cached under
/// `${XDG_CACHE_HOME:-~/.cache}/snapinformer/real-cluster/k8s-v1.37.2-*/bin/`.
pub fn find_binary(explicit: Option<&Path>) -> Result<PathBuf, String> {
    let usable = |p: &Path| p.is_file();
    if let Some(path) = explicit {
        return if usable(path) {
            Ok(path.to_owned())
        } else {
            Err(format!("--kcm-bin {}: no such file", path.display()))
        };
    }
    if let Some(path) = std::env::var_os(BIN_ENV).map(PathBuf::from) {
        return if usable(&path) {
            Ok(path)
        } else {
            Err(format!("${BIN_ENV}={}: no such file", path.display()))
        };
    }
    let cache = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
        .map(|c| c.join("snapinformer").join("real-cluster"));
    let prefix = format!("k8s-{KUBERNETES_VERSION}-");
    let newest = cache.as_ref().and_then(|dir| {
        std::fs::read_dir(dir)
            .ok()?
            .filter_map(Result::ok)
            .filter(|e| e.file_name().to_string_lossy().starts_with(&prefix))
            .map(|e| e.path().join("bin").join("kube-controller-manager"))
            .filter(|p| usable(p))
            .max_by_key(|p| std::fs::metadata(p).and_then(|m| m.modified()).ok())
    });
    newest.ok_or_else(|| {
        format!(
            "kube-controller-manager {KUBERNETES_VERSION} not found (looked for --kcm-bin, \
             ${BIN_ENV} and {}/{prefix}*/bin/kube-controller-manager). Build the real control \
             plane once with `scripts/real-cluster build` (it needs Go and the Go module proxy; \
             the binaries are cached there), or pass --kcm-bin PATH.",
            cache.map_or_else(
                || "~/.cache/snapinformer/real-cluster".into(),
                |c| c.display().to_string()
            )
        )
    })
}

/// How the controller manager is started.
#[derive(Debug, Clone)]
pub struct KcmLaunch {
    /// The binary.
    pub binary: PathBuf,
    /// Kubeconfig of the API server it talks to.
    pub kubeconfig: PathBuf,
    /// Loopback port of its secure serving (`/metrics`, `/healthz`).
    pub port: u16,
    /// Directory for its self-signed serving certificate.
    pub cert_dir: PathBuf,
    /// File for its log (stdout and stderr).
    pub log: PathBuf,
    /// `--kube-api-qps` and `--kube-api-burst`.
    pub qps: f64,
    /// See `qps`.
    pub burst: u32,
    /// `--kube-api-content-type`.
    pub content_type: String,
    /// `--concurrent-statefulset-syncs`.
    pub statefulset_syncs: u32,
    /// `--concurrent-daemonset-syncs`.
    pub daemonset_syncs: u32,
    /// Extra flags, passed last.
    pub extra: Vec<String>,
}

impl KcmLaunch {
    /// The command-line flags.
    pub fn args(&self) -> Vec<String> {
        let mut args = vec![
            format!("--kubeconfig={}", self.kubeconfig.display()),
            "--controllers=statefulset,daemonset".to_owned(),
            "--leader-elect=false".to_owned(),
            // One identity for every controller: the test API server has no service accounts
            // or token requests (the real-cluster script uses per-controller credentials).
            "--use-service-account-credentials=false".to_owned(),
            format!("--kube-api-content-type={}", self.content_type),
            format!("--kube-api-qps={}", self.qps),
            format!("--kube-api-burst={}", self.burst),
            format!("--concurrent-statefulset-syncs={}", self.statefulset_syncs),
            format!("--concurrent-daemonset-syncs={}", self.daemonset_syncs),
            "--bind-address=127.0.0.1".to_owned(),
            format!("--secure-port={}", self.port),
            format!("--cert-dir={}", self.cert_dir.display()),
            // No delegated authentication or authorization here: let /metrics through.
            "--authorization-always-allow-paths=/healthz,/readyz,/livez,/metrics".to_owned(),
            "-v=2".to_owned(),
        ];
        args.extend(self.extra.iter().cloned());
        args
    }

    /// Starts the process with its output in the log file. The process is killed when the
    /// returned handle is dropped, so that no error path leaves it running.
    pub fn spawn(&self) -> Result<KcmChild, String> {
        std::fs::create_dir_all(&self.cert_dir)
            .map_err(|e| format!("creating {}: {e}", self.cert_dir.display()))?;
        let log = std::fs::File::create(&self.log)
            .map_err(|e| format!("creating {}: {e}", self.log.display()))?;
        let err = log.try_clone().map_err(|e| format!("log file: {e}"))?;
        Command::new(&self.binary)
            .args(self.args())
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(err)
            .spawn()
            .map(KcmChild)
            .map_err(|e| format!("starting {}: {e}", self.binary.display()))
    }
}

/// The running controller manager; killed (and reaped) on drop.
#[derive(Debug)]
pub struct KcmChild(Child);

impl KcmChild {
    /// Its process id.
    pub fn id(&self) -> u32 {
        self.0.id()
    }

    /// Its exit status, if it has exited.
    pub fn try_wait(&mut self) -> Option<std::process::ExitStatus> {
        self.0.try_wait().ok().flatten()
    }
}

impl Drop for KcmChild {
    fn drop(&mut self) {
        if self.try_wait().is_none() {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
}

/// A free loopback port (bound, then released).
pub fn free_port() -> Result<u16, String> {
    let listener = std::net::TcpListener::bind(("127.0.0.1", 0))
        .map_err(|e| format!("finding a free port: {e}"))?;
    listener.local_addr().map(|a| a.port()).map_err(|e| format!("finding a free port: {e}"))
}

/// Memory and CPU of a process, from `/proc/<pid>/status` and `/proc/<pid>/stat`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ProcStats {
    /// Resident set now, bytes.
    pub rss_bytes: u64,
    /// Largest resident set so far (`VmHWM`), bytes.
    pub rss_peak_bytes: u64,
    /// User plus system CPU time, milliseconds.
    pub cpu_ms: u64,
}

/// Reads `pid`'s figures; `None` when the process is gone.
pub fn proc_stats(pid: u32) -> Option<ProcStats> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let kib = |key: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(key))
            .and_then(|v| v.split_whitespace().next())
            .and_then(|v| v.parse::<u64>().ok())
            .map_or(0, |k| k * 1024)
    };
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the command name (which may hold spaces) in parentheses.
    let after = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
    let fields: Vec<&str> = after.split_whitespace().collect();
    let ticks = |i: usize| fields.get(i).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
    // utime and stime are fields 14 and 15 of stat; 12 and 13 after the name and state.
    let clock_ticks = 100;
    Some(ProcStats {
        rss_bytes: kib("VmRSS:"),
        rss_peak_bytes: kib("VmHWM:"),
        cpu_ms: (ticks(11) + ticks(12)) * 1000 / clock_ticks,
    })
}

/// A client for the controller manager's secure port (its certificate is self-signed).
pub fn metrics_client(port: u16) -> Result<kube::Client, String> {
    let url = format!("https://127.0.0.1:{port}")
        .parse()
        .map_err(|e| format!("controller manager URL: {e}"))?;
    let mut config = kube::Config::new(url);
    config.accept_invalid_certs = true;
    config.read_timeout = Some(std::time::Duration::from_secs(20));
    kube::Client::try_from(config).map_err(|e| format!("controller manager client: {e}"))
}

/// `GET /metrics` through `client`.
pub async fn scrape(client: &kube::Client) -> Result<String, String> {
    let request = http::Request::get("/metrics")
        .body(Vec::new())
        .map_err(|e| format!("metrics request: {e}"))?;
    client.request_text(request).await.map_err(|e| format!("scraping /metrics: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_has_memory_and_cpu_figures() {
        let stats = proc_stats(std::process::id()).expect("own /proc entry");
        assert!(stats.rss_bytes > 0);
        assert!(stats.rss_peak_bytes >= stats.rss_bytes);
    }

    #[test]
    fn a_missing_explicit_binary_is_a_clear_error() {
        let err = find_binary(Some(Path::new("/nonexistent/kcm"))).unwrap_err();
        assert!(err.contains("/nonexistent/kcm"), "{err}");
    }

    #[test]
    fn the_flags_name_the_controllers_and_disable_leader_election() {
        let launch = KcmLaunch {
            binary: "kcm".into(),
            kubeconfig: "/k".into(),
            port: 1,
            cert_dir: "/c".into(),
            log: "/l".into(),
            qps: 20.0,
            burst: 30,
            content_type: "application/json".into(),
            statefulset_syncs: 5,
            daemonset_syncs: 2,
            extra: vec!["--x".into()],
        };
        let args = launch.args();
        assert!(args.contains(&"--controllers=statefulset,daemonset".to_owned()));
        assert!(args.contains(&"--leader-elect=false".to_owned()));
        assert_eq!(args.last().map(String::as_str), Some("--x"));
    }
}
