//! The `kcm` scenario end to end at a tiny scale: the real kube-controller-manager creates
//! every pod through the test API server and the report counts them from the server side.
//! Skipped, with the reason printed, where `scripts/real-cluster build` has not cached the
//! binary; `SNAPINFORMER_REQUIRE_REAL_CLUSTER=1` turns the skip into a failure.

use std::time::Duration;

use snapinformer_sim::scenarios::kcm::{self, KcmArgs, process};

#[test]
fn the_real_controller_manager_creates_and_runs_every_pod_and_the_server_counts_them() {
    let binary = match process::find_binary(None) {
        Ok(binary) => binary,
        Err(why) => {
            assert!(
                std::env::var_os("SNAPINFORMER_REQUIRE_REAL_CLUSTER").is_none(),
                "kube-controller-manager is required: {why}"
            );
            println!("SKIPPED: {why}");
            return;
        }
    };
    let out = std::env::temp_dir().join(format!("snapinformer-kcm-test-{}", std::process::id()));
    let args = KcmArgs {
        sets: 3,
        replicas: 5,
        nodes: 4,
        out: out.clone(),
        kcm_bin: Some(binary),
        kcm_qps: 500.0,
        kcm_burst: 1000,
        kcm_content_type: "application/vnd.kubernetes.protobuf".to_owned(),
        statefulset_syncs: 5,
        daemonset_syncs: 2,
        kcm_args: Vec::new(),
        policy: "Parallel".to_owned(),
        startup_delay: Duration::from_millis(50),
        max_time: Duration::from_secs(90),
        settle: Duration::from_secs(2),
        sample_every: Duration::from_millis(500),
    };
    kcm::main(&args).expect("the scenario runs");
    let report: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("report.json")).expect("report written"))
            .expect("report is JSON");
    assert!(report["all_running_s"].as_f64().is_some(), "{report:#}");
    assert_eq!(report["set_pods_running"], 15);
    assert_eq!(report["nodes_with_running_daemon"], 4);
    assert!(report["kcm_exit"].is_null(), "kube-controller-manager kept running");
    assert_eq!(report["set_pods_created"], 15, "every set pod was created through the server");
    assert!(report["daemon_pods_created"].as_u64().is_some_and(|n| n >= 4));
    assert!(report["kcm_rss_peak_bytes"].as_u64().is_some_and(|b| b > 10 << 20));
    let queues = report["queues"].as_array().expect("queues");
    assert!(queues.iter().any(|q| q["name"] == "statefulset" && q["adds"].as_u64() > Some(0)));
    std::fs::remove_dir_all(&out).expect("remove the output");
}
