//! The real `kubectl` against the server. Every test skips, saying so, when kubectl is absent.
//! kubectl runs with a temp kubeconfig written by the server, a temp `--cache-dir` and a temp
//! `HOME`, so nothing under `~/.kube` is touched.

mod common;

use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use serde_json::Value;
use snapinformer_apiserver::{Config, KubeletConfig, ServerHandle, TestApiServer, generate};
use tokio::io::AsyncWriteExt;

/// A server plus an isolated kubectl environment.
struct Kubectl {
    server: ServerHandle,
    home: PathBuf,
}

impl Drop for Kubectl {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.home);
    }
}

/// Output of one kubectl run.
struct Run {
    ok: bool,
    stdout: String,
    stderr: String,
}

fn kubectl_present() -> bool {
    let found = std::process::Command::new("kubectl")
        .arg("version")
        .arg("--client")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok();
    if !found {
        println!(
            "SKIPPED: kubectl is not installed (not found on PATH); kubectl compatibility not checked"
        );
    }
    found
}

impl Kubectl {
    async fn start(config: Config) -> Option<Self> {
        if !kubectl_present() {
            return None;
        }
        let server = TestApiServer::start(Config { record_requests: true, ..config })
            .await
            .expect("server starts");
        let home = std::env::temp_dir().join(format!(
            "snapinformer-kubectl-{}-{}",
            std::process::id(),
            server.addr().port()
        ));
        std::fs::create_dir_all(&home).expect("temp home");
        Some(Self { server, home })
    }

    async fn run_with_input(&self, args: &[&str], input: Option<&str>, limit: Duration) -> Run {
        let mut command = tokio::process::Command::new("kubectl");
        command
            .env("KUBECONFIG", self.server.kubeconfig_path())
            .env("HOME", &self.home)
            .arg(format!("--cache-dir={}", self.home.join("cache").display()))
            .args(args)
            .stdin(if input.is_some() { Stdio::piped() } else { Stdio::null() })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        let mut child = command.spawn().expect("kubectl starts");
        if let (Some(text), Some(mut stdin)) = (input, child.stdin.take()) {
            stdin.write_all(text.as_bytes()).await.expect("stdin");
        }
        let output = tokio::time::timeout(limit, child.wait_with_output())
            .await
            .unwrap_or_else(|_| panic!("kubectl {args:?} did not finish in {limit:?}"))
            .expect("kubectl output");
        Run {
            ok: output.status.success(),
            stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
        }
    }

    async fn run(&self, args: &[&str]) -> Run {
        self.run_with_input(args, None, common::WAIT).await
    }

    async fn ok(&self, args: &[&str]) -> String {
        let run = self.run(args).await;
        assert!(run.ok, "kubectl {args:?} failed: {}{}", run.stdout, run.stderr);
        run.stdout
    }

    async fn apply_stdin(&self, verb: &str, manifest: &str) -> String {
        let run = self.run_with_input(&[verb, "-f", "-"], Some(manifest), common::WAIT).await;
        assert!(run.ok, "kubectl {verb} failed: {}{}", run.stdout, run.stderr);
        run.stdout
    }
}

const POD: &str = "apiVersion: v1
kind: Pod
metadata:
  name: web-0
  labels: {app: web, tier: front}
spec:
  nodeName: node-00000
  containers:
  - name: app
    image: nginx:1.27
";

const STATEFULSET: &str = "apiVersion: apps/v1
kind: StatefulSet
metadata:
  name: db
spec:
  replicas: 3
  serviceName: db
  selector: {matchLabels: {app: db}}
  template:
    metadata: {labels: {app: db}}
    spec:
      containers: [{name: db, image: postgres:17}]
";

fn table_lines(text: &str) -> Vec<Vec<String>> {
    text.lines().map(|l| l.split_whitespace().map(str::to_owned).collect()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_creates_a_pod_and_a_statefulset_and_prints_tables() {
    let Some(k) = Kubectl::start(Config::default()).await else { return };
    assert_eq!(k.apply_stdin("create", POD).await.trim(), "pod/web-0 created");
    assert_eq!(k.apply_stdin("create", STATEFULSET).await.trim(), "statefulset.apps/db created");
    let again = k.run_with_input(&["create", "-f", "-"], Some(POD), common::WAIT).await;
    assert!(!again.ok);
    assert!(again.stderr.contains("AlreadyExists"), "{}", again.stderr);
    let pods = table_lines(&k.ok(&["get", "pods"]).await);
    assert_eq!(pods[0], ["NAME", "READY", "STATUS", "RESTARTS", "AGE"]);
    assert_eq!(pods[1][..4], ["web-0", "0/1", "Pending", "0"]);
    let wide = table_lines(&k.ok(&["get", "pods", "-o", "wide"]).await);
    assert_eq!(wide[0][5..7], ["IP", "NODE"]);
    assert_eq!(wide[1][6], "node-00000");
    let sets = table_lines(&k.ok(&["get", "statefulsets"]).await);
    assert_eq!(sets[0], ["NAME", "READY", "AGE"]);
    assert_eq!(sets[1][..2], ["db", "0/3"]);
    let log = k.server.request_log();
    assert!(log.iter().any(|r| r.starts_with("GET /openapi/v2")), "kubectl create fetched OpenAPI");
    assert!(log.iter().any(|r| r.starts_with("GET /api?")), "{log:?}");
    assert!(
        !log.iter().any(|r| r.starts_with("GET /api/v1?") || r.starts_with("GET /apis/apps/v1?")),
        "kubectl used aggregated discovery, not per-version documents: {log:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_get_prints_json_and_yaml_of_stored_objects() {
    let Some(k) = Kubectl::start(Config::default()).await else { return };
    k.apply_stdin("create", POD).await;
    let json: Value =
        serde_json::from_str(&k.ok(&["get", "pods", "-o", "json"]).await).expect("json");
    assert_eq!(json["kind"], "List");
    assert_eq!(json["items"][0]["metadata"]["name"], "web-0");
    assert_eq!(json["items"][0]["status"]["phase"], "Pending");
    let yaml: Value =
        serde_yaml::from_str(&k.ok(&["get", "pod", "web-0", "-o", "yaml"]).await).expect("yaml");
    assert_eq!(yaml["spec"]["containers"][0]["image"], "nginx:1.27");
    assert!(
        yaml["metadata"]["resourceVersion"].as_str().is_some_and(|rv| rv.parse::<u64>().is_ok())
    );
    let nodes_json: Value =
        serde_json::from_str(&k.ok(&["get", "nodes", "-o", "json"]).await).expect("json");
    assert_eq!(nodes_json["items"].as_array().map(Vec::len), Some(0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_selects_pods_by_label_and_field_selectors() {
    let config = Config {
        kubelet: Some(KubeletConfig { startup_delay: Duration::ZERO, schedule: false }),
        ..Config::default()
    };
    let Some(k) = Kubectl::start(config).await else { return };
    k.server
        .bulk_create_pods([
            generate::pod("default", "a", Some("node-00000"), &[("app", "web")]),
            generate::pod("default", "b", None, &[("app", "db")]),
            generate::pod("default", "c", Some("node-00001"), &[("app", "web"), ("canary", "yes")]),
        ])
        .unwrap();
    let names =
        |out: String| -> Vec<String> { out.split_whitespace().map(str::to_owned).collect() };
    let by_label = names(k.ok(&["get", "pods", "-l", "app=web", "-o", "name"]).await);
    assert_eq!(by_label, ["pod/a", "pod/c"]);
    let by_set = names(k.ok(&["get", "pods", "-l", "app in (db),!canary", "-o", "name"]).await);
    assert_eq!(by_set, ["pod/b"]);
    let by_node = names(
        k.ok(&["get", "pods", "--field-selector", "spec.nodeName=node-00001", "-o", "name"]).await,
    );
    assert_eq!(by_node, ["pod/c"]);
    // The simulated kubelet runs the bound pods; b stays Pending.
    common::bounded("pods running", async {
        while names(
            k.ok(&["get", "pods", "--field-selector", "status.phase=Running", "-o", "name"]).await,
        )
        .len()
            != 2
        {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await;
    let pending = names(
        k.ok(&["get", "pods", "--field-selector", "status.phase!=Running", "-o", "name"]).await,
    );
    assert_eq!(pending, ["pod/b"]);
    let bad = k.run(&["get", "pods", "--field-selector", "spec.bogus=1"]).await;
    assert!(!bad.ok && bad.stderr.contains("field label not supported"), "{}", bad.stderr);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_chunk_size_paginates_through_continue_tokens() {
    let Some(k) = Kubectl::start(Config::default()).await else { return };
    k.server
        .bulk_create_pods((0..7).map(|i| generate::pod("default", &format!("p{i}"), None, &[])))
        .unwrap();
    let out = k.ok(&["get", "pods", "--chunk-size=3", "-o", "name"]).await;
    assert_eq!(out.lines().count(), 7);
    let pages: Vec<String> = k
        .server
        .request_log()
        .into_iter()
        .filter(|r| r.contains("/pods?") && r.contains("limit=3"))
        .collect();
    assert_eq!(pages.len(), 3, "{pages:?}");
    assert_eq!(pages.iter().filter(|r| r.contains("continue=")).count(), 2);
    let table = table_lines(&k.ok(&["get", "pods", "--chunk-size=2"]).await);
    assert_eq!(table.len(), 8, "one header and seven rows across four pages");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_get_watch_sees_a_later_change() {
    let Some(k) = Kubectl::start(Config::default()).await else { return };
    k.server.bulk_create_pods([generate::pod("default", "a", None, &[])]).unwrap();
    let watcher = k.run_with_input(
        &["get", "pods", "-w", "--request-timeout=3s"],
        None,
        Duration::from_secs(15),
    );
    let changer = async {
        common::bounded("watch request", async {
            while !k.server.request_log().iter().any(|r| r.contains("watch=true")) {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        })
        .await;
        k.server.bulk_create_pods([generate::pod("default", "late", None, &[])]).unwrap();
    };
    let (run, ()) = tokio::join!(watcher, changer);
    let lines = table_lines(&run.stdout);
    assert_eq!(lines[0][0], "NAME", "{}", run.stdout);
    assert_eq!(
        lines.iter().filter(|l| l.first().is_some_and(|c| c == "NAME")).count(),
        1,
        "one header"
    );
    assert!(
        lines.iter().any(|l| l.first().is_some_and(|c| c == "late")),
        "watch saw the new pod: {}{}",
        run.stdout,
        run.stderr
    );
    let watch = k.server.request_log().into_iter().find(|r| r.contains("watch=true")).unwrap();
    assert!(watch.contains("resourceVersion="), "{watch}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_label_annotate_patch_apply_and_delete_change_the_stored_object() {
    let Some(k) = Kubectl::start(Config::default()).await else { return };
    k.apply_stdin("create", POD).await;
    assert_eq!(k.ok(&["label", "pod", "web-0", "color=blue"]).await.trim(), "pod/web-0 labeled");
    assert_eq!(
        k.ok(&["annotate", "pod", "web-0", "note=hello"]).await.trim(),
        "pod/web-0 annotated"
    );
    assert_eq!(
        k.ok(&[
            "patch",
            "pod",
            "web-0",
            "--type",
            "merge",
            "-p",
            r#"{"metadata":{"labels":{"tier":null}}}"#
        ])
        .await
        .trim(),
        "pod/web-0 patched"
    );
    let pod: Value =
        serde_json::from_str(&k.ok(&["get", "pod", "web-0", "-o", "json"]).await).unwrap();
    assert_eq!(pod["metadata"]["labels"], serde_json::json!({"app": "web", "color": "blue"}));
    assert_eq!(pod["metadata"]["annotations"]["note"], "hello");
    let label_request = k
        .server
        .request_log()
        .into_iter()
        .find(|r| r.contains("fieldManager=kubectl-label"))
        .unwrap();
    assert!(label_request.starts_with("PATCH") && label_request.ends_with("200"));
    // apply: create, then a strategic merge patch that changes the image.
    let applied = POD.replace("web-0", "web-1");
    assert_eq!(k.apply_stdin("apply", &applied).await.trim(), "pod/web-1 created");
    assert_eq!(
        k.apply_stdin("apply", &applied.replace("nginx:1.27", "nginx:1.28")).await.trim(),
        "pod/web-1 configured"
    );
    assert_eq!(
        k.ok(&["get", "pod", "web-1", "-o", "jsonpath={.spec.containers[0].image}"]).await,
        "nginx:1.28"
    );
    assert_eq!(k.ok(&["delete", "pod", "web-0"]).await.trim(), "pod \"web-0\" deleted");
    let names = k.ok(&["get", "pods", "-o", "name"]).await;
    assert_eq!(names.trim(), "pod/web-1");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_reports_not_found_for_a_missing_object() {
    let Some(k) = Kubectl::start(Config::default()).await else { return };
    let get = k.run(&["get", "pod", "nope"]).await;
    assert!(!get.ok);
    assert_eq!(get.stderr.trim(), "Error from server (NotFound): pods \"nope\" not found");
    let delete = k.run(&["delete", "statefulset", "nope"]).await;
    assert!(!delete.ok);
    assert!(delete.stderr.contains("statefulsets.apps \"nope\" not found"), "{}", delete.stderr);
    let unknown = k.run(&["get", "services"]).await;
    assert!(!unknown.ok);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_creates_and_deletes_a_namespace_with_its_pods() {
    let Some(k) = Kubectl::start(Config::default()).await else { return };
    // kubectl sends this Namespace as protobuf.
    assert_eq!(k.ok(&["create", "namespace", "team-a"]).await.trim(), "namespace/team-a created");
    assert_eq!(
        k.ok(&["-n", "team-a", "run", "web", "--image=nginx"]).await.trim(),
        "pod/web created"
    );
    let all = table_lines(&k.ok(&["get", "pods", "-A"]).await);
    assert_eq!(all[0][..2], ["NAMESPACE", "NAME"]);
    assert_eq!(all[1][..2], ["team-a", "web"]);
    let namespaces = k.ok(&["get", "namespaces", "-o", "name"]).await;
    assert!(namespaces.lines().any(|l| l == "namespace/team-a"), "{namespaces}");
    assert_eq!(
        k.ok(&["delete", "namespace", "team-a"]).await.trim(),
        "namespace \"team-a\" deleted"
    );
    let run = k.run(&["get", "pods", "-A", "-o", "name"]).await;
    assert!(
        run.ok && run.stdout.trim().is_empty(),
        "pods of the namespace are gone: {}",
        run.stdout
    );
    let missing = k.run(&["-n", "team-a", "run", "web", "--image=nginx"]).await;
    assert!(missing.stderr.contains("namespaces \"team-a\" not found"), "{}", missing.stderr);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_scales_a_statefulset_through_the_scale_subresource() {
    let Some(k) = Kubectl::start(Config::default()).await else { return };
    k.apply_stdin("create", STATEFULSET).await;
    assert_eq!(
        k.ok(&["scale", "statefulset", "db", "--replicas=5"]).await.trim(),
        "statefulset.apps/db scaled"
    );
    let set: Value =
        serde_json::from_str(&k.ok(&["get", "sts", "db", "-o", "json"]).await).unwrap();
    assert_eq!(set["spec"]["replicas"], 5);
    assert_eq!(set["metadata"]["generation"], 2);
    assert!(k.server.request_log().iter().any(|r| r.contains("/statefulsets/db/scale")));
    let missing = k.run(&["scale", "statefulset", "nope", "--replicas=1"]).await;
    assert!(!missing.ok && missing.stderr.contains("not found"), "{}", missing.stderr);
}
