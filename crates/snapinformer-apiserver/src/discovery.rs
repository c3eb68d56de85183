//! Discovery documents: `/version`, `/api`, `/apis`, `/api/v1`, `/apis/apps`, `/apis/apps/v1`.

use std::net::SocketAddr;

use serde_json::{Value, json};

use crate::resource::ResourceKind;

/// The Kubernetes version the server claims to be.
pub const SERVER_VERSION: &str = "v1.33.0";

/// `GET /version`.
pub(crate) fn version() -> Value {
    json!({
        "major": "1",
        "minor": "33",
        "emulationMajor": "1",
        "emulationMinor": "33",
        "minCompatibilityMajor": "1",
        "minCompatibilityMinor": "32",
        "gitVersion": SERVER_VERSION,
        "gitCommit": "0000000000000000000000000000000000000000",
        "gitTreeState": "clean",
        "buildDate": "2025-04-23T00:00:00Z",
        "goVersion": "go1.24.2",
        "compiler": "gc",
        "platform": "linux/amd64"
    })
}

/// `GET /api`.
pub(crate) fn api_versions(addr: SocketAddr) -> Value {
    json!({
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": addr.to_string()}]
    })
}

fn apps_group() -> Value {
    json!({
        "name": "apps",
        "versions": [{"groupVersion": "apps/v1", "version": "v1"}],
        "preferredVersion": {"groupVersion": "apps/v1", "version": "v1"}
    })
}

/// `GET /apis`.
pub(crate) fn api_groups() -> Value {
    json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": [apps_group()]})
}

/// `GET /apis/apps`.
pub(crate) fn apps_api_group() -> Value {
    let mut group = apps_group();
    group["kind"] = "APIGroup".into();
    group["apiVersion"] = "v1".into();
    group
}

/// `GET /api/v1` (group `""`) or `GET /apis/apps/v1` (group `apps`).
pub(crate) fn resource_list(group: &str) -> Value {
    let mut resources = Vec::new();
    for kind in ResourceKind::ALL.into_iter().filter(|k| k.group() == group) {
        let mut verbs = vec!["create", "delete", "get", "list", "patch", "update", "watch"];
        if kind != ResourceKind::Namespace {
            verbs.insert(2, "deletecollection");
        }
        let mut resource = json!({
            "name": kind.plural(),
            "singularName": kind.singular(),
            "namespaced": kind.namespaced(),
            "kind": kind.kind(),
            "verbs": verbs,
            "shortNames": kind.short_names(),
        });
        if matches!(kind, ResourceKind::Pod | ResourceKind::StatefulSet | ResourceKind::DaemonSet) {
            resource["categories"] = json!(["all"]);
        }
        resources.push(resource);
        resources.push(json!({
            "name": format!("{}/status", kind.plural()),
            "singularName": "",
            "namespaced": kind.namespaced(),
            "kind": kind.kind(),
            "verbs": ["get", "patch", "update"],
        }));
        if kind == ResourceKind::StatefulSet {
            resources.push(json!({
                "name": "statefulsets/scale",
                "singularName": "",
                "namespaced": true,
                "group": "autoscaling",
                "version": "v1",
                "kind": "Scale",
                "verbs": ["get", "patch", "update"],
            }));
        }
        if kind == ResourceKind::Pod {
            resources.push(json!({
                "name": "pods/binding",
                "singularName": "",
                "namespaced": true,
                "kind": "Binding",
                "verbs": ["create"],
            }));
        }
    }
    let group_version = if group.is_empty() { "v1".to_owned() } else { format!("{group}/v1") };
    json!({
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": group_version,
        "resources": resources
    })
}

/// Media type of aggregated discovery answers.
pub(crate) const AGGREGATED_V2: &str =
    "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList";

/// Whether the `Accept` header prefers aggregated discovery (`apidiscovery.k8s.io/v2`) over a
/// plain answer: the first acceptable media type decides, as in the real server.
pub(crate) fn wants_aggregated(accept: &str) -> bool {
    for media in accept.split(',') {
        let params: Vec<&str> = media.split(';').map(str::trim).collect();
        let aggregated = params.contains(&"g=apidiscovery.k8s.io")
            && params.contains(&"v=v2")
            && params.contains(&"as=APIGroupDiscoveryList");
        if aggregated {
            return true;
        }
        let plain_json = params.first().is_some_and(|m| *m == "application/json" || *m == "*/*")
            && !params.iter().any(|p| p.starts_with("as="));
        if plain_json {
            return false;
        }
    }
    false
}

fn gvk(kind: ResourceKind) -> Value {
    json!({"group": kind.group(), "version": "v1", "kind": kind.kind()})
}

/// `GET /api` or `GET /apis` with aggregated discovery: every resource of the legacy group
/// (`group == ""`) or of the named groups.
pub(crate) fn aggregated(legacy: bool) -> Value {
    let groups: &[&str] = if legacy { &[""] } else { &["apps"] };
    let items: Vec<Value> = groups
        .iter()
        .map(|group| {
            let resources: Vec<Value> = ResourceKind::ALL
                .into_iter()
                .filter(|k| k.group() == *group)
                .map(|kind| {
                    let mut verbs =
                        vec!["create", "delete", "get", "list", "patch", "update", "watch"];
                    if kind != ResourceKind::Namespace {
                        verbs.insert(2, "deletecollection");
                    }
                    let mut resource = json!({
                        "resource": kind.plural(),
                        "responseKind": gvk(kind),
                        "scope": if kind.namespaced() { "Namespaced" } else { "Cluster" },
                        "singularResource": kind.singular(),
                        "verbs": verbs,
                        "shortNames": kind.short_names(),
                        "subresources": [{
                            "subresource": "status",
                            "responseKind": gvk(kind),
                            "verbs": ["get", "patch", "update"],
                        }],
                    });
                    if kind == ResourceKind::Pod
                        && let Some(subresources) = resource["subresources"].as_array_mut()
                    {
                        subresources.push(json!({
                            "subresource": "binding",
                            "responseKind": {"group": "", "version": "v1", "kind": "Binding"},
                            "verbs": ["create"],
                        }));
                    }
                    if kind == ResourceKind::StatefulSet
                        && let Some(subresources) = resource["subresources"].as_array_mut()
                    {
                        subresources.push(json!({
                            "subresource": "scale",
                            "responseKind": {"group": "autoscaling", "version": "v1", "kind": "Scale"},
                            "verbs": ["get", "patch", "update"],
                        }));
                    }
                    if matches!(
                        kind,
                        ResourceKind::Pod | ResourceKind::StatefulSet | ResourceKind::DaemonSet
                    ) {
                        resource["categories"] = json!(["all"]);
                    }
                    resource
                })
                .collect();
            json!({
                "metadata": {"name": group, "creationTimestamp": null},
                "versions": [{"version": "v1", "resources": resources, "freshness": "Current"}],
            })
        })
        .collect();
    json!({
        "kind": "APIGroupDiscoveryList",
        "apiVersion": "apidiscovery.k8s.io/v2",
        "metadata": {},
        "items": items,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aggregated_discovery_is_chosen_only_when_preferred() {
        assert!(wants_aggregated(
            "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json"
        ));
        assert!(!wants_aggregated("application/json, */*"));
        assert!(!wants_aggregated(
            "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,application/json"
        ));
    }

    #[test]
    fn aggregated_documents_list_every_served_resource_with_its_scope() {
        let core = aggregated(true);
        let resources = &core["items"][0]["versions"][0]["resources"];
        assert_eq!(resources.as_array().map(Vec::len), Some(3));
        assert_eq!(resources[0]["resource"], "pods");
        assert_eq!(resources[0]["scope"], "Namespaced");
        assert_eq!(resources[1]["scope"], "Cluster");
        let apps = aggregated(false);
        assert_eq!(apps["items"][0]["metadata"]["name"], "apps");
    }
}
