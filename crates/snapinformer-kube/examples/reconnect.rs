//! How long an informer takes to catch up after API server restarts: the test API server is
//! taken down (connections refused) and brought back on the same address several times in a
//! row, and after each comeback one pod is created; the time from the comeback to the moment
//! the informer's handler sees that pod is the recovery time.
//!
//! ```text
//! cargo run --release -p snapinformer-kube --example reconnect -- [options]
//!   --client ours                 snapinformer's informer (default)
//!   --client ours-client-go-backoff   the same, with client-go's backoff rules: no reset
//!                                 after a watch that delivered, no cap on waits after a
//!                                 refused connection
//!   --client external=PATH        a program reading $KUBECONFIG that prints `synced` once its
//!                                 cache has synced, then `seen <name> <unix nanos>` for every
//!                                 pod added (baselines/reconnect: real client-go)
//!   --restarts N    restarts in a row (default 3)
//!   --down SECS     how long the server stays down each time (default 3)
//!   --up SECS       how long it stays up between restarts (default 4)
//! ```
//!
//! It prints one line per restart and a summary line, and exits non-zero if a pod was not
//! seen within 120 s of its comeback.

use std::{
    collections::HashMap,
    io::{BufRead, BufReader},
    process::{Child, Command, Stdio},
    sync::{Arc, Mutex},
    time::{Duration, SystemTime, UNIX_EPOCH},
};

use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use snapinformer_apiserver::{Config, TestApiServer, generate};
use snapinformer_core::Notification;
use snapinformer_kube::{BackoffConfig, KubeInformer, ReflectorConfig, pods};

/// When each pod was first seen by the client, in nanoseconds since the Unix epoch.
type Seen = Arc<Mutex<HashMap<String, u128>>>;

fn now_nanos() -> u128 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or(0)
}

struct Options {
    client: String,
    restarts: usize,
    down: Duration,
    up: Duration,
}

fn options() -> Result<Options, String> {
    let mut o = Options {
        client: "ours".into(),
        restarts: 3,
        down: Duration::from_secs(3),
        up: Duration::from_secs(4),
    };
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let mut value = || args.next().ok_or_else(|| format!("{arg} needs a value"));
        let secs =
            |v: String| v.parse::<f64>().map(Duration::from_secs_f64).map_err(|e| e.to_string());
        match arg.as_str() {
            "--client" => o.client = value()?,
            "--restarts" => {
                o.restarts = value()?.parse().map_err(|e| format!("--restarts: {e}"))?
            }
            "--down" => o.down = secs(value()?)?,
            "--up" => o.up = secs(value()?)?,
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    Ok(o)
}

/// The client under test.
enum Client {
    Ours(Box<KubeInformer<Pod>>),
    External(Child),
}

async fn start_ours(
    url: kube::Client,
    reset: bool,
    seen: Seen,
) -> Result<Client, Box<dyn std::error::Error>> {
    let backoff = if reset {
        BackoffConfig::default()
    } else {
        BackoffConfig::default().healthy_watch(None).refused_max(None)
    };
    let informer =
        pods(Api::all(url)).reflector(ReflectorConfig::new().backoff(backoff)).build()?;
    informer.add_event_handler(move |n: &Notification<Pod>| {
        if let Notification::Add { obj, .. } = n
            && let Some(name) = &obj.metadata.name
        {
            seen.lock().unwrap().entry(name.clone()).or_insert_with(now_nanos);
        }
    })?;
    informer.start()?;
    if !informer.wait_for_sync(Duration::from_secs(30)).await {
        return Err("the informer did not sync".into());
    }
    Ok(Client::Ours(Box::new(informer)))
}

fn start_external(
    path: &str,
    kubeconfig: &std::path::Path,
    seen: Seen,
) -> Result<Client, Box<dyn std::error::Error>> {
    let mut child = Command::new(path)
        .env("KUBECONFIG", kubeconfig)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()?;
    let stdout = child.stdout.take().ok_or("no stdout")?;
    let (synced_tx, synced_rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            let mut parts = line.split_whitespace();
            match (parts.next(), parts.next(), parts.next()) {
                (Some("synced"), _, _) => {
                    let _ = synced_tx.send(());
                }
                (Some("seen"), Some(name), Some(at)) => {
                    if let Ok(at) = at.parse::<u128>() {
                        seen.lock().unwrap().entry(name.to_owned()).or_insert(at);
                    }
                }
                _ => {}
            }
        }
    });
    synced_rx
        .recv_timeout(Duration::from_secs(60))
        .map_err(|_| "the external client did not sync")?;
    Ok(Client::External(child))
}

async fn wait_seen(seen: &Seen, name: &str, limit: Duration) -> Option<u128> {
    let start = std::time::Instant::now();
    loop {
        if let Some(at) = seen.lock().unwrap().get(name) {
            return Some(*at);
        }
        if start.elapsed() > limit {
            return None;
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    if std::env::var_os("RUST_LOG").is_some() {
        // For diagnosis: `RUST_LOG=snapinformer_kube=info` shows every failure and backoff.
        tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
            .init();
    }
    let o = options().map_err(|e| format!("{e}\n(see the example's doc comment for usage)"))?;
    let mut server = TestApiServer::start(Config::default()).await?;
    let seen: Seen = Arc::default();
    let client = match o.client.as_str() {
        "ours" => start_ours(server.client()?, true, seen.clone()).await?,
        "ours-client-go-backoff" => start_ours(server.client()?, false, seen.clone()).await?,
        other => match other.strip_prefix("external=") {
            Some(path) => start_external(path, server.kubeconfig_path(), seen.clone())?,
            None => return Err(format!("unknown client {other:?}").into()),
        },
    };
    // Warm up: the client sees a pod created while all is well.
    server.create(&generate::pod("default", "warm-up", None, &[]))?;
    wait_seen(&seen, "warm-up", Duration::from_secs(30)).await.ok_or("warm-up pod not seen")?;
    tokio::time::sleep(o.up).await;

    let mut pending = Vec::new();
    for i in 1..=o.restarts {
        server.stop_serving().await;
        tokio::time::sleep(o.down).await;
        server.start_serving().await?;
        let up_at = now_nanos();
        let name = format!("after-restart-{i}");
        server.create(&generate::pod("default", &name, None, &[]))?;
        pending.push((i, name, up_at));
        tokio::time::sleep(o.up).await;
    }
    let mut worst = Duration::ZERO;
    let mut total = Duration::ZERO;
    let mut missed = 0;
    for (i, name, up_at) in &pending {
        match wait_seen(&seen, name, Duration::from_secs(120)).await {
            Some(at) => {
                let took = Duration::from_nanos(
                    u64::try_from(at.saturating_sub(*up_at)).unwrap_or(u64::MAX),
                );
                worst = worst.max(took);
                total += took;
                println!(
                    "restart {i}: back up, then the client saw the new pod after {:.2} s",
                    took.as_secs_f64()
                );
            }
            None => {
                missed += 1;
                println!("restart {i}: the new pod was not seen within 120 s");
            }
        }
    }
    println!(
        "client {}: {} restarts (down {:.1} s, up {:.1} s): recovery worst {:.2} s, sum {:.2} s{}",
        o.client,
        o.restarts,
        o.down.as_secs_f64(),
        o.up.as_secs_f64(),
        worst.as_secs_f64(),
        total.as_secs_f64(),
        if missed > 0 { format!(", {missed} not seen") } else { String::new() }
    );
    match client {
        Client::Ours(informer) => informer.shutdown().await,
        Client::External(mut child) => {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
    server.shutdown().await;
    if missed > 0 {
        return Err("some pods were not seen".into());
    }
    Ok(())
}
