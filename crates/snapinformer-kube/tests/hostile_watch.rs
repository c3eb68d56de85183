//! Watch streams that never send a newline, from a raw HTTP server on loopback, through the
//! real kube client: a flood is cut at the line limit (bounded memory, a clear error, a relist),
//! a trickle is abandoned at the watch deadline (no hang), and the reflector recovers either
//! way without losing state. (Malformed lines mid-watch: `malformed.rs`; a server that vanishes
//! mid-watch and comes back: `convergence.rs`.)

mod common;

use std::{
    collections::BTreeMap,
    sync::{
        Arc, Mutex,
        atomic::{AtomicU64, AtomicUsize, Ordering},
    },
    time::Duration,
};

use common::{live::client_for, *};
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use snapinformer_core::Informer;
use snapinformer_kube::{
    Error, EventKind, MAX_WATCH_LINE_BYTES, NextAction, Reflector, ReflectorConfig, Step, access,
};
use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::{TcpListener, TcpStream},
};

/// What the first watch request gets.
#[derive(Clone, Copy)]
enum FirstWatch {
    /// The start of an event, then `x` as fast as the client reads, never a newline (up to
    /// 512 MiB, so that a client without a bound fails the test rather than the machine).
    Flood,
    /// The start of an event, then one `x` every 50 ms, never a newline.
    Trickle,
}

const FLOOD_CAP: u64 = 512 * 1024 * 1024;

#[derive(Default)]
struct Seen {
    lists: AtomicUsize,
    watches: AtomicUsize,
    /// Body bytes written to the first watch.
    sent: AtomicU64,
    paths: Mutex<Vec<String>>,
}

fn pod_json(name: &str, rv: u64) -> String {
    format!(
        r#"{{"apiVersion":"v1","kind":"Pod","metadata":{{"name":"{name}","namespace":"default","resourceVersion":"{rv}"}}}}"#
    )
}

fn list_json(pods: &[(&str, u64)], rv: u64) -> String {
    let items: Vec<String> = pods.iter().map(|(n, r)| pod_json(n, *r)).collect();
    format!(
        r#"{{"apiVersion":"v1","kind":"PodList","metadata":{{"resourceVersion":"{rv}"}},"items":[{}]}}"#,
        items.join(",")
    )
}

const WATCH_HEAD: &str =
    "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n\r\n";

/// Lists: `a@5` at 10, then `a@5, b@11` at 12. Watches: the hostile one, then `a@13` and an
/// open stream.
async fn serve(listener: TcpListener, first: FirstWatch, seen: Arc<Seen>) {
    loop {
        let Ok((mut sock, _)) = listener.accept().await else { return };
        let seen = seen.clone();
        tokio::spawn(async move {
            let head = read_head(&mut sock).await;
            let path = head.split_whitespace().nth(1).unwrap_or("").to_owned();
            seen.paths.lock().unwrap().push(path.clone());
            if !path.contains("watch=true") {
                let body = match seen.lists.fetch_add(1, Ordering::SeqCst) {
                    0 => list_json(&[("a", 5)], 10),
                    _ => list_json(&[("a", 5), ("b", 11)], 12),
                };
                let out = format!(
                    "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = sock.write_all(out.as_bytes()).await;
                return;
            }
            if sock.write_all(WATCH_HEAD.as_bytes()).await.is_err() {
                return;
            }
            if seen.watches.fetch_add(1, Ordering::SeqCst) > 0 {
                let event = format!(r#"{{"type":"MODIFIED","object":{}}}"#, pod_json("a", 13));
                let _ = sock.write_all(format!("{event}\n").as_bytes()).await;
                tokio::time::sleep(Duration::from_secs(60)).await;
                return;
            }
            let start = br#"{"type":"ADDED","object":{"metadata":{"name":""#;
            let _ = sock.write_all(start).await;
            match first {
                FirstWatch::Flood => {
                    let block = vec![b'x'; 64 * 1024];
                    while seen.sent.load(Ordering::SeqCst) < FLOOD_CAP {
                        if sock.write_all(&block).await.is_err() {
                            return;
                        }
                        seen.sent.fetch_add(block.len() as u64, Ordering::SeqCst);
                    }
                }
                FirstWatch::Trickle => loop {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    if sock.write_all(b"x").await.is_err() {
                        return;
                    }
                    seen.sent.fetch_add(1, Ordering::SeqCst);
                },
            }
        });
    }
}

async fn read_head(sock: &mut TcpStream) -> String {
    let mut buf = Vec::new();
    let mut byte = [0u8; 1024];
    while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
        match sock.read(&mut byte).await {
            Ok(0) | Err(_) => break,
            Ok(n) => buf.extend_from_slice(&byte[..n]),
        }
    }
    String::from_utf8_lossy(&buf).into_owned()
}

async fn start(first: FirstWatch) -> (String, Arc<Seen>, tokio::task::JoinHandle<()>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let seen = Arc::new(Seen::default());
    let server = tokio::spawn(serve(listener, first, seen.clone()));
    (url, seen, server)
}

/// Steps the reflector until `done` accepts a step; returns that step and the ones before it.
async fn step_until(
    r: &mut Reflector<Pod, Api<Pod>>,
    secs: u64,
    what: &str,
    mut done: impl FnMut(&Step) -> bool,
) -> (Step, Vec<String>) {
    within(secs, what, async {
        let mut steps = Vec::new();
        loop {
            let step = r.step().await.expect("the queue is open");
            if done(&step) {
                return (step, steps);
            }
            steps.push(format!("{step:?}"));
        }
    })
    .await
}

fn event_a13(step: &Step) -> bool {
    matches!(step, Step::Event { kind: EventKind::Modified, key, resource_version }
        if key == "default/a" && resource_version.as_deref() == Some("13"))
}

async fn published(inf: &Informer<Pod>, rv: &str) -> BTreeMap<String, u64> {
    let snap = within(10, "publication", inf.wait_for(rv, Duration::from_secs(10))).await.unwrap();
    snapshot_state(&snap)
}

#[tokio::test]
async fn watch_line_flooded_without_a_newline_is_cut_at_the_line_limit_then_relisted() {
    let (url, seen, server) = start(FirstWatch::Flood).await;
    let informer = Informer::<Pod>::builder(access()).build().unwrap();
    informer.start().unwrap();
    let api: Api<Pod> = Api::all(client_for(&url));
    let mut r = Reflector::new(api, informer.queue().clone(), live::fast().watch_list(false));

    let (failed, _) = step_until(&mut r, 60, "the line limit error", |s| {
        matches!(s, Step::Failed { error: Error::WatchLineTooLong(_), .. })
    })
    .await;
    let Step::Failed { error, next, retry_in } = failed else { unreachable!() };
    assert_eq!(
        error.to_string(),
        "watch event line longer than 16777216 bytes without a newline: stream dropped"
    );
    assert_eq!(next, NextAction::Relist);
    assert!(retry_in > Duration::ZERO, "after a backoff");
    // The state listed before the flood is still published.
    assert_eq!(published(&informer, "10").await, [("default/a".into(), 5)].into());

    step_until(&mut r, 30, "recovery", event_a13).await;
    assert_eq!(
        published(&informer, "13").await,
        [("default/a".into(), 13), ("default/b".into(), 11)].into()
    );
    let status = r.status();
    assert_eq!((status.stats.lists, status.stats.malformed), (2, 1), "{status:?}");
    assert_eq!(status.stats.backoffs, 1, "the relist waited for a backoff: {status:?}");
    // The client stopped reading soon after the limit: what the server managed to write is the
    // limit plus socket and read buffers, nowhere near the flood's cap.
    let sent = seen.sent.load(Ordering::SeqCst);
    assert!(
        sent >= MAX_WATCH_LINE_BYTES as u64 && sent < MAX_WATCH_LINE_BYTES as u64 + (48 << 20),
        "sent {sent} bytes"
    );
    informer.shutdown().await;
    server.abort();
}

#[tokio::test]
async fn watch_trickling_bytes_without_a_newline_is_abandoned_at_its_deadline_and_reopened() {
    let (url, seen, server) = start(FirstWatch::Trickle).await;
    let informer = Informer::<Pod>::builder(access()).build().unwrap();
    informer.start().unwrap();
    let api: Api<Pod> = Api::all(client_for(&url));
    let config: ReflectorConfig = live::fast()
        .watch_list(false)
        .min_watch_timeout(Duration::from_secs(1))
        .watch_grace(Duration::from_millis(500));
    let mut r = Reflector::new(api, informer.queue().clone(), config);

    // timeoutSeconds is 1 or 2, plus 0.5 s of grace: abandoned after at most 2.5 s.
    let begun = std::time::Instant::now();
    let (failed, steps) =
        step_until(&mut r, 10, "the watch deadline", |s| matches!(s, Step::Failed { .. })).await;
    assert!(
        matches!(
            failed,
            Step::Failed { error: Error::WatchTimeout(_), next: NextAction::Rewatch, .. }
        ),
        "{failed:?} after {steps:?}"
    );
    let took = begun.elapsed();
    assert!(took < Duration::from_secs(4), "abandoned after {took:?}");
    assert!(seen.sent.load(Ordering::SeqCst) > 0, "the trickle was flowing");

    step_until(&mut r, 10, "recovery", event_a13).await;
    assert_eq!(published(&informer, "13").await, [("default/a".into(), 13)].into());
    let paths = seen.paths.lock().unwrap().clone();
    let watches: Vec<_> = paths.iter().filter(|p| p.contains("watch=true")).collect();
    assert_eq!(watches.len(), 2, "{paths:?}");
    assert!(watches.iter().all(|p| p.contains("timeoutSeconds=")), "{watches:?}");
    assert!(watches[1].contains("resourceVersion=10"), "re-opened from the last version");
    let stats = r.status().stats;
    assert_eq!((stats.lists, stats.watch_timeouts, stats.errors), (1, 1, 0), "{stats:?}");
    informer.shutdown().await;
    server.abort();
}
