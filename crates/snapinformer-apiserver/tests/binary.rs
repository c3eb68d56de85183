//! The `snapinformer-apiserver` binary: prints its address, writes a kubeconfig, serves.

mod common;

use std::process::Stdio;

use snapinformer_apiserver::Config;
use tokio::io::{AsyncBufReadExt, BufReader};

#[tokio::test]
async fn binary_prints_its_address_writes_a_kubeconfig_and_serves_generated_objects() {
    let dir = std::env::temp_dir().join(format!("snapinformer-bin-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let kubeconfig = dir.join("kubeconfig");
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_snapinformer-apiserver"))
        .args(["--listen", "127.0.0.1:0", "--nodes", "3", "--statefulsets", "2", "--replicas", "5"])
        .arg("--kubeconfig")
        .arg(&kubeconfig)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("binary starts");
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let first = common::bounded("address line", lines.next_line()).await.unwrap().unwrap();
    let url = first.strip_prefix("listening on ").expect("address line").to_owned();
    let addr: std::net::SocketAddr = url.strip_prefix("http://").unwrap().parse().unwrap();
    assert!(addr.ip().is_loopback());
    let second = common::bounded("kubeconfig line", lines.next_line()).await.unwrap().unwrap();
    assert!(second.starts_with("kubeconfig written to"));
    let config = std::fs::read_to_string(&kubeconfig).unwrap();
    assert!(config.contains(&format!("server: {url}")), "{config}");
    let pods = common::http(addr, "GET", "/api/v1/pods", &[], "").await.json();
    assert_eq!(pods["items"].as_array().unwrap().len(), 10);
    let nodes = common::http(addr, "GET", "/api/v1/nodes", &[], "").await.json();
    assert_eq!(nodes["items"].as_array().unwrap().len(), 3);
    child.kill().await.unwrap();
    let _ = std::fs::remove_dir_all(&dir);
}

/// Starts the binary with `args` (and a kubeconfig in a fresh directory), returning it and the
/// address it printed.
async fn start(
    name: &str,
    args: &[&str],
    env: &[(&str, &str)],
) -> (tokio::process::Child, std::net::SocketAddr, std::path::PathBuf) {
    let dir = std::env::temp_dir().join(format!("snapinformer-bin-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_snapinformer-apiserver"))
        .args(args)
        .arg("--kubeconfig")
        .arg(dir.join("kubeconfig"))
        .envs(env.iter().copied())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("binary starts");
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let first = common::bounded("address line", lines.next_line()).await.unwrap().unwrap();
    let url = first.strip_prefix("listening on http://").expect("address line");
    (child, url.parse().unwrap(), dir)
}

#[tokio::test]
async fn binary_and_library_listen_on_loopback_by_default_without_a_warning() {
    let default = Config::default().listen;
    assert_eq!(default, std::net::SocketAddr::from(([127, 0, 0, 1], 0)));
    let (mut child, addr, dir) = start("default", &[], &[("RUST_LOG", "warn")]).await;
    assert_eq!(addr.ip(), std::net::IpAddr::from([127, 0, 0, 1]));
    let version = common::http(addr, "GET", "/version", &[], "").await;
    assert_eq!(version.status, 200);
    child.kill().await.unwrap();
    let output = common::bounded("exit", child.wait_with_output()).await.unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!stderr.contains("loopback"), "no warning on loopback: {stderr}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn binary_told_to_listen_beyond_loopback_warns_on_stderr_and_in_its_log() {
    let (mut child, addr, dir) =
        start("open", &["--listen", "0.0.0.0:0"], &[("RUST_LOG", "warn")]).await;
    assert!(addr.ip().is_unspecified());
    let mut stderr = BufReader::new(child.stderr.take().unwrap()).lines();
    let (mut plain, mut logged) = (false, false);
    while !(plain && logged) {
        let line = common::bounded("warnings", stderr.next_line()).await.unwrap().expect("a line");
        plain |= line.starts_with("WARNING: --listen 0.0.0.0:0 is not a loopback address")
            && line.contains("no authentication");
        logged |= line.contains("WARN") && line.contains("which is not a loopback address");
    }
    child.kill().await.unwrap();
    let _ = std::fs::remove_dir_all(&dir);
}
