//! Malformed watch events as the kube client really decodes them: a raw HTTP server on loopback
//! sends an invalid JSON line and an object without metadata inside otherwise valid streams.

mod common;

use std::{
    sync::{
        Arc,
        atomic::{AtomicUsize, Ordering},
    },
    time::Duration,
};

use common::{live::client_for, *};
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use snapinformer_core::Informer;
use snapinformer_kube::{Reflector, access};
use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::{TcpListener, TcpStream},
};

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

fn event(kind: &str, name: &str, rv: u64) -> String {
    format!(r#"{{"type":"{kind}","object":{}}}"#, pod_json(name, rv))
}

/// Serves two scripted lists and two scripted watches; watches stay open after their lines.
async fn serve(listener: TcpListener, lists: Arc<AtomicUsize>, watches: Arc<AtomicUsize>) {
    loop {
        let Ok((mut sock, _)) = listener.accept().await else { return };
        let (lists, watches) = (lists.clone(), watches.clone());
        tokio::spawn(async move {
            let head = read_head(&mut sock).await;
            let path = head.split_whitespace().nth(1).unwrap_or("").to_owned();
            if path.contains("watch=true") {
                let lines = match watches.fetch_add(1, Ordering::SeqCst) {
                    0 => vec![
                        event("ADDED", "b", 11),
                        // Invalid JSON (a truncated line would be dropped silently by kube,
                        // which takes it for the end of a cut stream).
                        r#"{"type":"ADDED","object":{"metadata":{"name":"x"}},}"#.to_owned(),
                    ],
                    _ => vec![
                        r#"{"type":"ADDED","object":{"apiVersion":"v1","kind":"Pod"}}"#.to_owned(),
                        event("MODIFIED", "a", 13),
                    ],
                };
                let mut out = String::from(
                    "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n\r\n",
                );
                for l in lines {
                    out.push_str(&l);
                    out.push('\n');
                }
                let _ = sock.write_all(out.as_bytes()).await;
                tokio::time::sleep(Duration::from_secs(30)).await;
            } else {
                let body = match lists.fetch_add(1, Ordering::SeqCst) {
                    0 => list_json(&[("a", 5)], 10),
                    _ => list_json(&[("a", 5), ("b", 11), ("c", 12)], 12),
                };
                let out = format!(
                    "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = sock.write_all(out.as_bytes()).await;
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

#[tokio::test]
async fn invalid_json_relists_and_an_object_without_metadata_is_skipped_never_a_panic() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let (lists, watches) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let server = tokio::spawn(serve(listener, lists.clone(), watches.clone()));

    let informer = Informer::<Pod>::builder(access()).build().unwrap();
    informer.start().unwrap();
    let api: Api<Pod> = Api::all(client_for(&url));
    let handle =
        Reflector::new(api, informer.queue().clone(), live::fast().watch_list(false)).spawn();
    let snap =
        within(10, "final state", informer.wait_for("13", Duration::from_secs(10))).await.unwrap();
    assert_eq!(
        snapshot_state(&snap),
        [("default/a".into(), 13), ("default/b".into(), 11), ("default/c".into(), 12)].into()
    );
    let status = handle.status();
    assert_eq!(status.stats.malformed, 2, "{status:?}");
    assert_eq!(status.stats.lists, 2, "the invalid line was answered with a relist");
    assert_eq!(lists.load(Ordering::SeqCst), 2);
    handle.stop().await;
    informer.shutdown().await;
    server.abort();
}
