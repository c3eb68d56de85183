//! The two calls a reflector makes: list and watch (client-go's `ListerWatcher`).

use std::fmt::Debug;
use std::io::ErrorKind;

use futures::{AsyncBufRead, AsyncBufReadExt, StreamExt, future::BoxFuture, stream::BoxStream};
use kube::{
    Api, Resource,
    api::{ListParams, ObjectList, WatchEvent, WatchParams},
    core::Status,
};
use serde::de::DeserializeOwned;

/// The longest watch event line (one JSON event, newline excluded) the reflector reads from a
/// [`kube::Api`] watch: 16 MiB, several times the largest object the API server stores (etcd
/// refuses requests over 1.5 MiB; the API server refuses request bodies over 3 MiB).
///
/// kube's own watch decoder has no bound: a server (or a proxy) that streams bytes without a
/// newline would make it buffer them until memory runs out. The reflector's watch reads at
/// most this many bytes of one line; a longer line ends the stream with
/// [`kube::Error::LinesCodecMaxLineLengthExceeded`], which the reflector reports as
/// [`Error::WatchLineTooLong`](crate::Error::WatchLineTooLong) and answers with a relist after
/// a backoff. Memory held by one watch stream is therefore at most this limit plus one read
/// buffer. A server that sends such bytes slowly is caught by the watch deadline instead
/// (`timeoutSeconds` plus [`ReflectorConfig::watch_grace`](crate::ReflectorConfig::watch_grace)).
pub const MAX_WATCH_LINE_BYTES: usize = 16 * 1024 * 1024;

/// A stream of watch events as the kube client yields them.
pub type WatchStream<K> = BoxStream<'static, Result<WatchEvent<K>, kube::Error>>;

/// What the reflector lists and watches: implemented for [`kube::Api`]; tests implement it to
/// script a server.
///
/// `watch` resolves once the server has answered the request (an HTTP error is an `Err`); the
/// stream then yields events until the server ends it. A decode failure is an `Err` item
/// (kube's `Error::SerdeError`), and the stream goes on.
#[doc(alias = "ListerWatcher")]
pub trait ListWatch<K: Clone>: Send + Sync + 'static {
    /// One list request (one page if `params.limit` is set).
    fn list(&self, params: &ListParams) -> BoxFuture<'_, Result<ObjectList<K>, kube::Error>>;

    /// Opens a watch from `resource_version` (`""`: from now, or a consistent streaming list
    /// with `sendInitialEvents`).
    fn watch(
        &self,
        params: &WatchParams,
        resource_version: &str,
    ) -> BoxFuture<'_, Result<WatchStream<K>, kube::Error>>;

    /// The server's Kubernetes minor version (`1.<minor>`), if it can tell. The reflector asks
    /// once, before its first streaming list: a server older than 1.27 ignores
    /// `sendInitialEvents` and would never end the stream's initial events, so it gets plain
    /// lists. `None` (the default, and any failure) means unknown: streaming lists are tried, and
    /// a server that refuses them falls back to lists.
    fn server_minor_version(&self) -> BoxFuture<'_, Option<u32>> {
        Box::pin(async { None })
    }
}

impl<K> ListWatch<K> for Api<K>
where
    K: Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
{
    fn list(&self, params: &ListParams) -> BoxFuture<'_, Result<ObjectList<K>, kube::Error>> {
        let params = params.clone();
        Box::pin(async move {
            if params.limit.is_some()
                && params.continue_token.is_none()
                && params.resource_version.as_deref() == Some("0")
            {
                // kube drops `resourceVersion=0` when a limit is set (turning the list into a
                // consistent read from etcd); client-go sends both, so that the API server
                // answers from its watch cache. Send both.
                return list_at_zero(self, &params).await;
            }
            Api::list(self, &params).await
        })
    }

    fn watch(
        &self,
        params: &WatchParams,
        resource_version: &str,
    ) -> BoxFuture<'_, Result<WatchStream<K>, kube::Error>> {
        let params = params.clone();
        let rv = resource_version.to_owned();
        Box::pin(async move { watch_bounded(self, &params, &rv, MAX_WATCH_LINE_BYTES).await })
    }

    fn server_minor_version(&self) -> BoxFuture<'_, Option<u32>> {
        Box::pin(async move {
            let info = self.clone().into_client().apiserver_version().await.ok()?;
            parse_minor(&info.minor)
        })
    }
}

/// Opens a watch like [`Api::watch`], but decodes its lines with a bound on their length.
async fn watch_bounded<K>(
    api: &Api<K>,
    params: &WatchParams,
    resource_version: &str,
    max_line: usize,
) -> Result<WatchStream<K>, kube::Error>
where
    K: Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
{
    let request = kube::core::Request::new(api.resource_url());
    let request = if K::metadata_api() {
        request.watch_metadata(params, resource_version)
    } else {
        request.watch(params, resource_version)
    }
    .map_err(kube::Error::BuildRequest)?;
    watch_request(api.clone().into_client(), request, max_line).await
}

/// Sends a watch `request` (built with [`kube::core::Request::watch`]) through `client` and
/// decodes its events as `K`, reading at most `max_line` bytes of any line (see
/// [`MAX_WATCH_LINE_BYTES`]). What the [`ListWatch`] of `kube::Api` does, for implementations
/// whose objects decode themselves (for example compact objects) rather than through `Api<K>`.
pub async fn watch_request<K>(
    client: kube::Client,
    mut request: http::Request<Vec<u8>>,
    max_line: usize,
) -> Result<WatchStream<K>, kube::Error>
where
    K: Clone + DeserializeOwned + Send + 'static,
{
    request.extensions_mut().insert("watch");
    // As kube does for watches: no compression, so that each event can be read as it arrives.
    request
        .headers_mut()
        .entry(http::header::ACCEPT_ENCODING)
        .or_insert(http::HeaderValue::from_static("identity"));
    // `request_stream` answers an HTTP error status with `kube::Error::Api`, like `Api::watch`.
    let body = client.request_stream(request).await?;
    Ok(watch_events(body, max_line).boxed())
}

/// Decodes watch events, one JSON value per line, from `reader`, reading at most `max_line`
/// bytes of any one line.
///
/// Blank lines are skipped. A line that is not a watch event is `kube::Error::Api` if it is a
/// `Status`, else `kube::Error::SerdeError`, and the stream goes on. The stream ends when the
/// body ends (a last line without its newline that stops in the middle of a JSON value is the
/// tail of a cut stream and is dropped, as kube drops it), after a read error (a cut or timed
/// out connection ends it quietly, as in kube; any other read error is
/// `kube::Error::ReadEvents`), and after a line longer than `max_line`
/// (`kube::Error::LinesCodecMaxLineLengthExceeded`).
pub(crate) fn watch_events<K, R>(
    reader: R,
    max_line: usize,
) -> impl futures::Stream<Item = Result<WatchEvent<K>, kube::Error>> + Send + 'static
where
    K: Clone + DeserializeOwned + Send + 'static,
    R: AsyncBufRead + Send + 'static,
{
    let lines = Lines { reader: Box::pin(reader), line: Vec::new(), max_line, done: false };
    futures::stream::unfold(lines, |mut lines| async move {
        loop {
            let item = match lines.next().await? {
                Line::Text(text, terminated) => match decode_line::<K>(&text, terminated) {
                    Some(item) => item,
                    None => continue,
                },
                Line::TooLong => Err(kube::Error::LinesCodecMaxLineLengthExceeded),
                Line::Failed(e) => Err(kube::Error::ReadEvents(e)),
            };
            return Some((item, lines));
        }
    })
}

/// A bounded line splitter over a response body.
struct Lines<R> {
    reader: std::pin::Pin<Box<R>>,
    /// The line read so far (never more than `max_line` bytes plus its newline).
    line: Vec<u8>,
    max_line: usize,
    done: bool,
}

/// What [`Lines::next`] found.
enum Line {
    /// A line and whether it ended with a newline (only the last line of a body may not).
    Text(Vec<u8>, bool),
    /// The line grew past the limit; the stream ends.
    TooLong,
    /// Reading failed; the stream ends.
    Failed(std::io::Error),
}

impl<R: AsyncBufRead> Lines<R> {
    async fn next(&mut self) -> Option<Line> {
        while !self.done {
            let buf = match self.reader.fill_buf().await {
                Ok(buf) => buf,
                Err(e) => {
                    self.done = true;
                    return match e.kind() {
                        // A connection cut or timed out mid-stream ends the watch, which the
                        // reflector re-opens from its last version (kube does the same).
                        ErrorKind::UnexpectedEof | ErrorKind::TimedOut => None,
                        _ if is_cut_stream(&e) => None,
                        _ => Some(Line::Failed(e)),
                    };
                }
            };
            if buf.is_empty() {
                self.done = true;
                break;
            }
            let newline = buf.iter().position(|b| *b == b'\n');
            let take = newline.map_or(buf.len(), |i| i + 1);
            let content = self.line.len() + newline.unwrap_or(take);
            if content > self.max_line {
                self.done = true;
                self.line = Vec::new();
                return Some(Line::TooLong);
            }
            self.line.extend_from_slice(&buf[..take]);
            self.reader.consume_unpin(take);
            if newline.is_some() {
                self.line.pop();
                return Some(Line::Text(std::mem::take(&mut self.line), true));
            }
        }
        (!self.line.is_empty()).then(|| Line::Text(std::mem::take(&mut self.line), false))
    }
}

/// Whether a read error is a connection that ended in the middle of the body: an
/// `UnexpectedEof` anywhere in the error's chain, or hyper's chunked decoder saying so.
fn is_cut_stream(error: &std::io::Error) -> bool {
    let mut source = std::error::Error::source(error);
    while let Some(e) = source {
        if e.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == ErrorKind::UnexpectedEof)
        {
            return true;
        }
        source = e.source();
    }
    error.to_string().contains("unexpected EOF during chunk")
}

/// Decodes one line; `None` for a line to skip.
fn decode_line<K: Clone + DeserializeOwned>(
    line: &[u8],
    terminated: bool,
) -> Option<Result<WatchEvent<K>, kube::Error>> {
    let text = line.trim_ascii();
    if text.is_empty() {
        return None;
    }
    match serde_json::from_slice::<WatchEvent<K>>(text) {
        Ok(event) => Some(Ok(event)),
        // The last bytes of a stream cut in the middle of an event: the re-opened watch delivers
        // that event again. Inside the stream, a line that stops early is malformed.
        Err(e) if e.is_eof() && !terminated => None,
        Err(e) => match serde_json::from_slice::<Status>(text) {
            Ok(status) if status.code != 0 || !status.message.is_empty() => {
                Some(Err(kube::Error::Api(Box::new(status))))
            }
            _ => Some(Err(kube::Error::SerdeError(e))),
        },
    }
}

/// A list request with `limit` and `resourceVersion=0`, both sent.
async fn list_at_zero<K>(api: &Api<K>, params: &ListParams) -> Result<ObjectList<K>, kube::Error>
where
    K: Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
{
    list_request(api.clone().into_client(), api.resource_url(), params).await
}

/// Lists `url` (a collection's path, as `kube::Api::resource_url` gives it) through `client`
/// with `params`, decoding the items as `K`. Unlike `kube::Api::list` it sends
/// `resourceVersion=0` together with a `limit`, as client-go does (so that the API server
/// answers from its watch cache); otherwise the same request. For [`ListWatch`]
/// implementations whose objects decode themselves (for example compact objects).
pub async fn list_request<K>(
    client: kube::Client,
    url: &str,
    params: &ListParams,
) -> Result<ObjectList<K>, kube::Error>
where
    K: Clone + DeserializeOwned,
{
    if params.resource_version.as_deref() != Some("0")
        || params.limit.is_none()
        || params.continue_token.is_some()
    {
        let request =
            kube::core::Request::new(url).list(params).map_err(kube::Error::BuildRequest)?;
        return client.request::<ObjectList<K>>(request).await;
    }
    let mut query = Vec::new();
    if let Some(labels) = &params.label_selector {
        query.push(format!("labelSelector={}", encode(labels)));
    }
    if let Some(fields) = &params.field_selector {
        query.push(format!("fieldSelector={}", encode(fields)));
    }
    if let Some(limit) = params.limit {
        query.push(format!("limit={limit}"));
    }
    query.push("resourceVersion=0".to_owned());
    let url = format!("{url}?{}", query.join("&"));
    let request = http::Request::get(url).body(Vec::new()).map_err(kube::Error::HttpError)?;
    client.request::<ObjectList<K>>(request).await
}

/// Percent-encodes a query value (everything but RFC 3986 unreserved characters).
fn encode(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for b in value.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use futures::{StreamExt, io::BufReader, io::Cursor};
    use k8s_openapi::api::core::v1::Pod;
    use kube::api::WatchEvent;

    use super::watch_events;

    #[test]
    fn query_values_are_percent_encoded() {
        assert_eq!(super::encode("app in (a,b),x!=y"), "app%20in%20%28a%2Cb%29%2Cx%21%3Dy");
    }

    fn event(name: &str) -> String {
        format!(r#"{{"type":"ADDED","object":{{"metadata":{{"name":"{name}"}}}}}}"#)
    }

    /// Decodes `body` read `chunk` bytes at a time, with lines of at most `max_line` bytes.
    fn decode(body: &str, chunk: usize, max_line: usize) -> Vec<Result<String, String>> {
        let reader = BufReader::with_capacity(chunk, Cursor::new(body.as_bytes().to_vec()));
        let stream = watch_events::<Pod, _>(reader, max_line);
        futures::executor::block_on(stream.collect::<Vec<_>>())
            .into_iter()
            .map(|item| match item {
                Ok(WatchEvent::Added(p)) => Ok(p.metadata.name.unwrap_or_default()),
                Ok(other) => Err(format!("unexpected {other:?}")),
                Err(e) => Err(e.to_string()),
            })
            .collect()
    }

    #[test]
    fn events_split_across_reads_are_decoded_line_by_line() {
        let body = format!("{}\r\n\n  \n{}\n{}", event("a"), event("b"), event("c"));
        for chunk in [1, 3, 7, 64, 4096] {
            let names = decode(&body, chunk, 1024);
            assert_eq!(names, [Ok("a".into()), Ok("b".into()), Ok("c".into())], "chunk {chunk}");
        }
    }

    #[test]
    fn a_line_longer_than_the_limit_ends_the_stream_with_an_error() {
        let long = event(&"x".repeat(200));
        let body = format!("{}\n{long}\n{}\n", event("a"), event("b"));
        for chunk in [5, 64, 4096] {
            let items = decode(&body, chunk, 100);
            assert_eq!(items.len(), 2, "chunk {chunk}: {items:?}");
            assert_eq!(items[0], Ok("a".into()));
            let error = kube::Error::LinesCodecMaxLineLengthExceeded.to_string();
            assert_eq!(items[1], Err(error));
        }
        // Exactly at the limit is fine.
        let exact = event("y");
        assert_eq!(decode(&format!("{exact}\n"), 7, exact.len()), [Ok("y".into())]);
        assert_eq!(decode(&exact, 7, exact.len()), [Ok("y".into())]);
    }

    #[test]
    fn a_cut_last_line_is_dropped_but_a_truncated_line_inside_the_stream_is_an_error() {
        let cut = &event("b")[..20];
        assert_eq!(decode(&format!("{}\n{cut}", event("a")), 8, 1024), [Ok("a".into())]);
        let items = decode(&format!("{cut}\n{}\n", event("a")), 8, 1024);
        assert_eq!(items.len(), 2);
        assert!(items[0].as_ref().is_err_and(|e| e.contains("EOF")), "{items:?}");
        assert_eq!(items[1], Ok("a".into()));
    }

    #[test]
    fn a_status_line_is_an_api_error_and_garbage_is_a_decode_error() {
        let status = r#"{"kind":"Status","apiVersion":"v1","status":"Failure","message":"gone","reason":"Expired","code":410}"#;
        let items = decode(&format!("{status}\nnot json\n{}\n", event("a")), 16, 1024);
        assert_eq!(items.len(), 3);
        assert!(items[0].as_ref().is_err_and(|e| e.contains("gone")), "{items:?}");
        assert!(items[1].as_ref().is_err_and(|e| e.contains("expected")), "{items:?}");
        assert_eq!(items[2], Ok("a".into()));
    }
}

/// The numeric part of a `/version` `minor` field (`"37"`, or `"37+"` from some distributions).
fn parse_minor(minor: &str) -> Option<u32> {
    let digits: String = minor.chars().take_while(char::is_ascii_digit).collect();
    digits.parse().ok()
}

#[cfg(test)]
mod version_tests {
    use super::parse_minor;

    #[test]
    fn minor_versions_parse_with_and_without_a_distribution_suffix() {
        assert_eq!(parse_minor("37"), Some(37));
        assert_eq!(parse_minor("26+"), Some(26));
        assert_eq!(parse_minor(""), None);
        assert_eq!(parse_minor("x"), None);
    }
}
