//! Load benchmark: events per second the server streams to 1 and to 10 watchers at 200,000
//! pods, plus bulk and HTTP creation rates.
//!
//! ```text
//! cargo run --release -p snapinformer-apiserver --example watch_load -- --pods 200000
//! ```
//!
//! Watchers are plain HTTP clients (the `kube` client's raw byte stream) that count event
//! lines, so the figures measure the server's streaming, not client-side decoding.
//! - `initial`: 200,000 pods exist; every watcher opens `?watch=true&resourceVersion=0` and
//!   receives the 200,000 synthetic ADDED events.
//! - `live`: every watcher watches from the current resourceVersion while 200,000 pods are
//!   bulk-created in batches of 1,000; the clock runs from the first write to the last event
//!   received by the last watcher.

use std::time::{Duration, Instant};

use clap::Parser;
use futures::AsyncReadExt;
use futures::stream::{self, StreamExt};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, PostParams};
use snapinformer_apiserver::{Config, ServerHandle, TestApiServer, generate};

#[derive(Debug, Parser)]
struct Args {
    /// Pods per scenario.
    #[arg(long, default_value_t = 200_000)]
    pods: usize,
    /// Watcher counts to measure.
    #[arg(long, value_delimiter = ',', default_value = "1,10")]
    watchers: Vec<usize>,
    /// Pods created one POST at a time over HTTP (0 skips that measurement).
    #[arg(long, default_value_t = 200_000)]
    http_creates: usize,
    /// Concurrent HTTP creators.
    #[arg(long, default_value_t = 16)]
    http_concurrency: usize,
}

fn pods(namespace: &str, count: usize) -> Vec<Pod> {
    let nodes: Vec<String> = (0..1000).map(|i| format!("node-{i:05}")).collect();
    (0..count)
        .map(|i| {
            let name = format!("pod-{i:07}");
            generate::pod(namespace, &name, Some(&nodes[i % nodes.len()]), &[("app", "load")])
        })
        .collect()
}

async fn start(history: usize) -> Result<ServerHandle, Box<dyn std::error::Error>> {
    Ok(TestApiServer::start(Config { history_size: history, ..Config::default() }).await?)
}

/// Opens a watch and counts event lines until `expected` arrived; returns when that happened.
async fn watcher(
    client: kube::Client,
    path: String,
    expected: usize,
) -> Result<Instant, Box<dyn std::error::Error + Send + Sync>> {
    let request = axum::http::Request::get(path).body(Vec::new())?;
    let mut body = client.request_stream(request).await?;
    let mut buffer = vec![0u8; 1 << 20];
    let mut lines = 0usize;
    while lines < expected {
        let n = body.read(&mut buffer).await?;
        if n == 0 {
            return Err(format!("stream ended after {lines} events").into());
        }
        lines += buffer[..n].iter().filter(|b| **b == b'\n').count();
    }
    Ok(Instant::now())
}

async fn run_watchers(
    server: &ServerHandle,
    watchers: usize,
    path: &str,
    expected: usize,
    settle: Duration,
    write: impl std::future::Future<Output = ()>,
) -> Result<Duration, Box<dyn std::error::Error>> {
    let client = server.client()?;
    let mut started = Instant::now();
    let tasks: Vec<_> = (0..watchers)
        .map(|_| tokio::spawn(watcher(client.clone(), path.to_owned(), expected)))
        .collect();
    if !settle.is_zero() {
        // Let every watch request reach the server before the clock starts.
        tokio::time::sleep(settle).await;
        started = Instant::now();
    }
    write.await;
    let mut last = started;
    for task in tasks {
        let done = tokio::time::timeout(Duration::from_secs(600), task)
            .await
            .map_err(|_| "watchers timed out")?
            .map_err(|e| e.to_string())?
            .map_err(|e| e.to_string())?;
        last = last.max(done);
    }
    Ok(last - started)
}

fn row(scenario: &str, watchers: usize, events: usize, elapsed: Duration) {
    let per_watcher = events as f64 / elapsed.as_secs_f64();
    println!(
        "| {scenario} | {watchers} | {events} | {:.2} | {:.0} | {:.0} |",
        elapsed.as_secs_f64(),
        per_watcher * watchers as f64,
        per_watcher
    );
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args = Args::parse();
    let n = args.pods;
    println!(
        "machine: {} cores; pods per scenario: {n}",
        std::thread::available_parallelism().map_or(0, |p| p.get())
    );

    let mut notes: Vec<String> = Vec::new();
    let server = start(n + 10).await?;
    let objects = pods("load", n);
    let started = Instant::now();
    server.bulk_create_pods(objects)?;
    let bulk = started.elapsed();
    println!(
        "bulk in-process create: {n} pods in {:.2} s ({:.0} pods/s)",
        bulk.as_secs_f64(),
        n as f64 / bulk.as_secs_f64()
    );

    if let Some(pod) = server.get::<Pod>(Some("load"), "pod-0000000") {
        let line = serde_json::json!({"type": "ADDED", "object": pod}).to_string().len() + 1;
        println!("one watch event line: {line} bytes");
    }

    println!();
    println!(
        "| scenario | watchers | events per watcher | seconds | events/s (all watchers) | events/s per watcher |"
    );
    println!("|---|---|---|---|---|---|");
    for &w in &args.watchers {
        let elapsed = run_watchers(
            &server,
            w,
            "/api/v1/pods?watch=true&resourceVersion=0",
            n,
            Duration::ZERO,
            async {},
        )
        .await?;
        row("initial (rv=0: all pods as ADDED)", w, n, elapsed);
    }
    // The kube crate's own watcher (which decodes every pod) doing its initial list of all pods.
    for (label, config) in [
        ("paginated list, 500 per page", kube::runtime::watcher::Config::default()),
        ("streaming list", kube::runtime::watcher::Config::default().streaming_lists()),
    ] {
        let api: Api<Pod> = Api::all(server.client()?);
        let started = Instant::now();
        let mut stream = kube::runtime::watcher(api, config).boxed();
        let mut objects = 0usize;
        loop {
            match tokio::time::timeout(Duration::from_secs(600), stream.next()).await? {
                Some(Ok(kube::runtime::watcher::Event::InitApply(_))) => objects += 1,
                Some(Ok(kube::runtime::watcher::Event::InitDone)) => break,
                Some(Ok(_)) => {}
                Some(Err(e)) => return Err(e.into()),
                None => return Err("watcher ended".into()),
            }
        }
        let elapsed = started.elapsed();
        notes.push(format!(
            "kube_runtime::watcher initial {label}: {objects} pods in {:.2} s ({:.0} pods/s, decoding included)",
            elapsed.as_secs_f64(),
            objects as f64 / elapsed.as_secs_f64()
        ));
    }
    server.shutdown().await;

    for &w in &args.watchers {
        let server = start(n + 10).await?;
        let rv = server.resource_version();
        let objects = pods("live", n);
        let path = format!("/api/v1/pods?watch=true&resourceVersion={rv}");
        let write_time = std::cell::Cell::new(Duration::ZERO);
        let write = async {
            let started = Instant::now();
            let mut objects = objects.into_iter();
            loop {
                let batch: Vec<Pod> = objects.by_ref().take(1000).collect();
                if batch.is_empty() {
                    break;
                }
                server.bulk_create_pods(batch).expect("bulk create");
                tokio::task::yield_now().await;
            }
            write_time.set(started.elapsed());
        };
        let elapsed = run_watchers(&server, w, &path, n, Duration::from_millis(300), write).await?;
        row("live (writes in batches of 1000)", w, n, elapsed);
        notes.push(format!(
            "live with {w} watcher(s): the writes themselves took {:.2} s",
            write_time.get().as_secs_f64()
        ));
        server.shutdown().await;
    }

    // History replay: the writes happen first (all kept in the history), then every watcher
    // watches from the version before them and streams them out of the history, the same
    // path live events take, without the writer in the way.
    for &w in &args.watchers {
        let server = start(n + 10).await?;
        let rv = server.resource_version();
        server.bulk_create_pods(pods("replay", n))?;
        let path = format!("/api/v1/pods?watch=true&resourceVersion={rv}");
        let elapsed = run_watchers(&server, w, &path, n, Duration::ZERO, async {}).await?;
        row("history replay (watch from before the writes)", w, n, elapsed);
        server.shutdown().await;
    }

    println!();
    for note in &notes {
        println!("{note}");
    }

    if args.http_creates > 0 {
        let server = start(args.http_creates + 10).await?;
        let api: Api<Pod> = Api::namespaced(server.client()?, "default");
        let objects = pods("default", args.http_creates);
        let started = Instant::now();
        let failures = stream::iter(objects)
            .map(|pod| {
                let api = api.clone();
                async move { api.create(&PostParams::default(), &pod).await.is_err() }
            })
            .buffer_unordered(args.http_concurrency)
            .filter(|failed| std::future::ready(*failed))
            .count()
            .await;
        let elapsed = started.elapsed();
        println!();
        println!(
            "HTTP create (kube client, {} concurrent POSTs): {} pods in {:.2} s ({:.0} pods/s), {failures} failures",
            args.http_concurrency,
            args.http_creates,
            elapsed.as_secs_f64(),
            args.http_creates as f64 / elapsed.as_secs_f64()
        );
        server.shutdown().await;
    }
    Ok(())
}
