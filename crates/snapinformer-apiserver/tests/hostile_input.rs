//! Inputs that must not hurt, over real HTTP: oversized bodies, deeply nested JSON, absurd
//! selectors and parameters that do not parse get a clear `Status` (never a 500, a panic or a
//! hang), and the server keeps serving.

mod common;

use std::net::SocketAddr;

use common::{Answer, bounded, http, pod_json};
use snapinformer_apiserver::{
    Config, DEFAULT_MAX_REQUEST_BODY_BYTES, ServerHandle, TestApiServer,
    selector::{MAX_SELECTOR_BYTES, MAX_SELECTOR_TERMS},
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const JSON: (&str, &str) = ("Content-Type", "application/json");
const PODS: &str = "/api/v1/namespaces/default/pods";

async fn server(config: Config) -> ServerHandle {
    TestApiServer::start(config).await.expect("server starts")
}

/// Asserts a failure `Status` with this code and reason, and returns its message.
fn status(answer: &Answer, code: u16, reason: &str) -> String {
    assert_eq!(answer.status, code, "{}", answer.body);
    let status = answer.json();
    assert_eq!(status["kind"], "Status", "{}", answer.body);
    assert_eq!(status["status"], "Failure");
    assert_eq!(status["code"], code);
    assert_eq!(status["reason"], reason, "{}", answer.body);
    status["message"].as_str().expect("a message").to_owned()
}

/// Sends a request with a `body_len`-byte body while reading the answer, so that a server that
/// answers before reading the whole body is seen answering (the rest of the body may then be
/// refused by the closed connection, which is fine).
async fn send_large(addr: SocketAddr, method: &str, path: &str, body_len: usize) -> Answer {
    bounded("a large request", async {
        let stream = tokio::net::TcpStream::connect(addr).await.expect("connect");
        let (mut read, mut write) = stream.into_split();
        let head = format!(
            "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: {body_len}\r\n\r\n"
        );
        let writer = tokio::spawn(async move {
            write.write_all(head.as_bytes()).await?;
            // A JSON object whose one string grows to the requested size.
            write.write_all(b"{\"x\":\"").await?;
            let block = vec![b'a'; 64 * 1024];
            let mut left = body_len - 8;
            while left > 0 {
                let n = left.min(block.len());
                write.write_all(&block[..n]).await?;
                left -= n;
            }
            write.write_all(b"\"}").await?;
            Ok::<_, std::io::Error>(())
        });
        let mut raw = Vec::new();
        let mut buf = [0u8; 8192];
        loop {
            match read.read(&mut buf).await {
                Ok(0) => break,
                Ok(n) => raw.extend_from_slice(&buf[..n]),
                // A reset after the answer arrived: the server closed with body bytes unread.
                Err(_) if raw.windows(4).any(|w| w == b"\r\n\r\n") => break,
                Err(e) => panic!("no answer: {e}"),
            }
        }
        writer.abort();
        parse_answer(&raw)
    })
    .await
}

fn parse_answer(raw: &[u8]) -> Answer {
    let raw = String::from_utf8_lossy(raw).into_owned();
    let (head, body) = raw.split_once("\r\n\r\n").expect("a complete head");
    let mut lines = head.lines();
    let status = lines.next().and_then(|l| l.split(' ').nth(1)).and_then(|s| s.parse().ok());
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_owned(), v.trim().to_owned()))
        .collect();
    Answer { status: status.expect("a status line"), headers, body: body.to_owned() }
}

#[tokio::test]
async fn request_bodies_over_the_limit_get_413_request_entity_too_large_as_a_status() {
    assert_eq!(Config::default().max_request_body_bytes, 3 * 1024 * 1024);
    assert_eq!(DEFAULT_MAX_REQUEST_BODY_BYTES, 3 * 1024 * 1024);
    let s = server(Config::default()).await;
    let over = send_large(s.addr(), "POST", PODS, 4 * 1024 * 1024).await;
    let message = status(&over, 413, "RequestEntityTooLarge");
    assert_eq!(message, "Request entity too large: limit is 3145728");

    let small = server(Config { max_request_body_bytes: 1000, ..Config::default() }).await;
    for (method, path) in [
        ("POST", PODS.to_owned()),
        ("PUT", format!("{PODS}/a")),
        ("PATCH", format!("{PODS}/a")),
        ("DELETE", format!("{PODS}/a")),
        ("PUT", "/debug/snapinformer/faults".to_owned()),
    ] {
        let over = send_large(small.addr(), method, &path, 5000).await;
        assert_eq!(
            status(&over, 413, "RequestEntityTooLarge"),
            "Request entity too large: limit is 1000",
            "{method} {path}"
        );
    }
    // Under the limit is served as before, and the server is unharmed.
    let created = http(small.addr(), "POST", PODS, &[JSON], &pod_json("a", "{}")).await;
    assert_eq!(created.status, 201, "{}", created.body);
    let list = http(s.addr(), "GET", "/api/v1/pods", &[], "").await;
    assert_eq!(list.status, 200);
}

#[tokio::test]
async fn deeply_nested_json_gets_400_bad_request_naming_the_recursion_limit() {
    let s = server(Config::default()).await;
    let created = http(s.addr(), "POST", PODS, &[JSON], &pod_json("a", "{}")).await;
    assert_eq!(created.status, 201);
    let deep = |depth: usize| format!("{}{}", "[".repeat(depth), "]".repeat(depth));
    let nested = format!(
        r#"{{"apiVersion":"v1","kind":"Pod","metadata":{{"name":"b"}},"spec":{{"x":{}}}}}"#,
        deep(100_000)
    );
    let post = http(s.addr(), "POST", PODS, &[JSON], &nested).await;
    let message = status(&post, 400, "BadRequest");
    assert!(message.contains("recursion limit exceeded"), "{message}");
    let put = http(s.addr(), "PUT", &format!("{PODS}/a"), &[JSON], &nested).await;
    assert!(status(&put, 400, "BadRequest").contains("recursion limit exceeded"));
    for content_type in [
        "application/merge-patch+json",
        "application/strategic-merge-patch+json",
        "application/json-patch+json",
    ] {
        let body = if content_type.contains("json-patch") {
            format!(r#"[{{"op":"add","path":"/metadata/labels","value":{}}}]"#, deep(100_000))
        } else {
            format!(r#"{{"metadata":{{"labels":{}}}}}"#, deep(100_000))
        };
        let patch =
            http(s.addr(), "PATCH", &format!("{PODS}/a"), &[("Content-Type", content_type)], &body)
                .await;
        let message = status(&patch, 400, "BadRequest");
        assert!(message.contains("recursion limit exceeded"), "{content_type}: {message}");
    }
    let delete = http(s.addr(), "DELETE", &format!("{PODS}/a"), &[JSON], &deep(100_000)).await;
    assert!(status(&delete, 400, "BadRequest").contains("recursion limit exceeded"));
    // Nothing was written; the pod is still there and the server still answers.
    let get = http(s.addr(), "GET", &format!("{PODS}/a"), &[], "").await;
    assert_eq!(get.status, 200);
    let list = http(s.addr(), "GET", "/api/v1/pods", &[], "").await;
    assert_eq!(list.json()["items"].as_array().unwrap().len(), 1);
}

#[tokio::test]
async fn selectors_over_the_length_or_term_limit_get_400_bad_request_stating_the_limit() {
    let s = server(Config::default()).await;
    let long_label = format!("app%3D{}", "a".repeat(MAX_SELECTOR_BYTES));
    let many_labels = (0..=MAX_SELECTOR_TERMS).map(|i| format!("k{i}")).collect::<Vec<_>>();
    let big_set = format!("app%20in%20({})", many_labels.join("%2C"));
    let many_fields = vec!["metadata.name%3Dx"; MAX_SELECTOR_TERMS + 1].join("%2C");
    let long_field = format!("metadata.name%3D{}", "a".repeat(MAX_SELECTOR_BYTES));
    let cases = [
        (
            format!("labelSelector={long_label}"),
            "labelSelector is too long: 16388 bytes, the limit is 16384 bytes",
        ),
        (
            format!("labelSelector={}", many_labels.join("%2C")),
            "labelSelector has too many terms: the limit is 256",
        ),
        (format!("labelSelector={big_set}"), "labelSelector has too many terms: the limit is 256"),
        (
            format!("fieldSelector={many_fields}"),
            "fieldSelector has too many terms: the limit is 256",
        ),
        (
            format!("fieldSelector={long_field}"),
            "fieldSelector is too long: 16398 bytes, the limit is 16384 bytes",
        ),
    ];
    for (query, expected) in &cases {
        for path in ["/api/v1/pods", PODS] {
            for watch in ["", "&watch=true&timeoutSeconds=1"] {
                let answer =
                    http(s.addr(), "GET", &format!("{path}?{query}{watch}"), &[], "").await;
                let message = status(&answer, 400, "BadRequest");
                assert!(message.starts_with(expected), "{path}?{watch}: {message}");
            }
        }
        let delete = http(s.addr(), "DELETE", &format!("{PODS}?{query}"), &[], "").await;
        assert!(status(&delete, 400, "BadRequest").starts_with(expected));
    }
    // At the limits, selectors are fine.
    let at_limit = many_labels[..MAX_SELECTOR_TERMS].join("%2C");
    let ok =
        http(s.addr(), "GET", &format!("/api/v1/pods?labelSelector={at_limit}"), &[], "").await;
    assert_eq!(ok.status, 200, "{}", ok.body);
}

#[tokio::test]
async fn unparseable_resource_version_continue_limit_and_timeout_get_400_with_kubernetes_messages()
{
    let s = server(Config::default()).await;
    let rv = "invalid resource version: strconv.ParseUint: parsing";
    let cases: [(&str, String); 10] = [
        ("resourceVersion=abc", format!(r#"{rv} "abc": invalid syntax"#)),
        ("resourceVersion=-1", format!(r#"{rv} "-1": invalid syntax"#)),
        (
            "resourceVersion=99999999999999999999",
            format!(r#"{rv} "99999999999999999999": value out of range"#),
        ),
        ("resourceVersion=abc&watch=true", format!(r#"{rv} "abc": invalid syntax"#)),
        (
            "resourceVersion=1e3&resourceVersionMatch=Exact",
            format!(r#"{rv} "1e3": invalid syntax"#),
        ),
        ("limit=ten", r#"strconv.ParseInt: parsing "ten": invalid syntax"#.to_owned()),
        (
            "limit=99999999999999999999",
            r#"strconv.ParseInt: parsing "99999999999999999999": value out of range"#.to_owned(),
        ),
        ("continue=not-a-token", "invalid continue token: continue key is not valid".to_owned()),
        (
            "watch=true&timeoutSeconds=soon",
            r#"strconv.ParseInt: parsing "soon": invalid syntax"#.to_owned(),
        ),
        (
            "watch=true&timeoutSeconds=1.5",
            r#"strconv.ParseInt: parsing "1.5": invalid syntax"#.to_owned(),
        ),
    ];
    for (query, expected) in &cases {
        let answer = http(s.addr(), "GET", &format!("/api/v1/pods?{query}"), &[], "").await;
        assert_eq!(status(&answer, 400, "BadRequest"), *expected, "{query}");
    }
    // A negative limit means no limit, as in the real server.
    let all = http(s.addr(), "GET", "/api/v1/pods?limit=-5", &[], "").await;
    assert_eq!(all.status, 200, "{}", all.body);
}

#[tokio::test]
async fn watch_with_the_largest_timeout_seconds_streams_events_instead_of_failing() {
    let s = server(Config::default()).await;
    let mut stream = tokio::net::TcpStream::connect(s.addr()).await.unwrap();
    let request = format!(
        "GET /api/v1/namespaces/default/pods?watch=true&timeoutSeconds={} HTTP/1.1\r\nHost: {}\r\n\r\n",
        i64::MAX,
        s.addr()
    );
    stream.write_all(request.as_bytes()).await.unwrap();
    let created = http(s.addr(), "POST", PODS, &[JSON], &pod_json("late", "{}")).await;
    assert_eq!(created.status, 201);
    let seen = bounded("the ADDED event", async {
        let mut raw = Vec::new();
        let mut buf = [0u8; 4096];
        while !String::from_utf8_lossy(&raw).contains(r#""name":"late""#) {
            let n = stream.read(&mut buf).await.unwrap();
            assert!(n > 0, "the watch ended: {}", String::from_utf8_lossy(&raw));
            raw.extend_from_slice(&buf[..n]);
        }
        String::from_utf8_lossy(&raw).into_owned()
    })
    .await;
    assert!(seen.starts_with("HTTP/1.1 200"), "{seen}");
    assert!(seen.contains(r#"{"type":"ADDED""#), "{seen}");
}
