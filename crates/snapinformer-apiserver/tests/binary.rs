//! The `snapinformer-apiserver` binary: prints its address, writes a kubeconfig, serves.

mod common;

use std::process::Stdio;

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
