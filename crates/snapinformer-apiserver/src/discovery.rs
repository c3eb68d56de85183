//! Discovery documents: `/version`, `/api`, `/apis`, `/api/v1`, `/apis/<group>` and
//! `/apis/<group>/v1` for every served group, and aggregated discovery.

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

fn group_entry(group: &str) -> Value {
    let group_version = format!("{group}/v1");
    json!({
        "name": group,
        "versions": [{"groupVersion": group_version, "version": "v1"}],
        "preferredVersion": {"groupVersion": group_version, "version": "v1"}
    })
}

/// `GET /apis`.
pub(crate) fn api_groups() -> Value {
    let groups: Vec<Value> = ResourceKind::GROUPS.iter().map(|g| group_entry(g)).collect();
    json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups})
}

/// `GET /apis/<group>` for a served named group; `None` for any other.
pub(crate) fn api_group(group: &str) -> Option<Value> {
    if !ResourceKind::GROUPS.contains(&group) {
        return None;
    }
    let mut entry = group_entry(group);
    entry["kind"] = "APIGroup".into();
    entry["apiVersion"] = "v1".into();
    Some(entry)
}

/// The verbs a kind's main resource takes.
fn verbs(kind: ResourceKind) -> Vec<&'static str> {
    let mut verbs = vec!["create", "delete", "get", "list", "patch", "update", "watch"];
    if kind != ResourceKind::Namespace {
        verbs.insert(2, "deletecollection");
    }
    verbs
}

/// The subresources of a kind: `(name, response group, response kind, verbs)`.
fn subresources(
    kind: ResourceKind,
) -> Vec<(&'static str, &'static str, &'static str, Vec<&'static str>)> {
    let mut out = Vec::new();
    if kind.has_status() {
        out.push(("status", kind.group(), kind.kind(), vec!["get", "patch", "update"]));
    }
    if kind == ResourceKind::StatefulSet {
        out.push(("scale", "autoscaling", "Scale", vec!["get", "patch", "update"]));
    }
    if kind == ResourceKind::Pod {
        out.push(("binding", "", "Binding", vec!["create"]));
    }
    out
}

/// `GET /api/v1` (group `""`) or `GET /apis/<group>/v1`; `None` for a group not served.
pub(crate) fn resource_list(group: &str) -> Option<Value> {
    if !group.is_empty() && !ResourceKind::GROUPS.contains(&group) {
        return None;
    }
    let mut resources = Vec::new();
    for kind in ResourceKind::ALL.into_iter().filter(|k| k.group() == group) {
        let mut resource = json!({
            "name": kind.plural(),
            "singularName": kind.singular(),
            "namespaced": kind.namespaced(),
            "kind": kind.kind(),
            "verbs": verbs(kind),
            "shortNames": kind.short_names(),
        });
        if kind.in_category_all() {
            resource["categories"] = json!(["all"]);
        }
        resources.push(resource);
        for (sub, sub_group, sub_kind, sub_verbs) in subresources(kind) {
            let mut entry = json!({
                "name": format!("{}/{sub}", kind.plural()),
                "singularName": "",
                "namespaced": kind.namespaced(),
                "kind": sub_kind,
                "verbs": sub_verbs,
            });
            if sub_group != kind.group() {
                entry["group"] = sub_group.into();
                entry["version"] = "v1".into();
            }
            resources.push(entry);
        }
    }
    let group_version = if group.is_empty() { "v1".to_owned() } else { format!("{group}/v1") };
    Some(json!({
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": group_version,
        "resources": resources
    }))
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

fn gvk(group: &str, kind: &str) -> Value {
    json!({"group": group, "version": "v1", "kind": kind})
}

/// `GET /api` or `GET /apis` with aggregated discovery: every resource of the legacy group
/// (`group == ""`) or of the named groups.
pub(crate) fn aggregated(legacy: bool) -> Value {
    let groups: &[&str] = if legacy { &[""] } else { &ResourceKind::GROUPS };
    let items: Vec<Value> = groups
        .iter()
        .map(|group| {
            let resources: Vec<Value> = ResourceKind::ALL
                .into_iter()
                .filter(|k| k.group() == *group)
                .map(|kind| {
                    let subresources: Vec<Value> = subresources(kind)
                        .into_iter()
                        .map(|(sub, sub_group, sub_kind, sub_verbs)| {
                            json!({
                                "subresource": sub,
                                "responseKind": gvk(sub_group, sub_kind),
                                "verbs": sub_verbs,
                            })
                        })
                        .collect();
                    let mut resource = json!({
                        "resource": kind.plural(),
                        "responseKind": gvk(kind.group(), kind.kind()),
                        "scope": if kind.namespaced() { "Namespaced" } else { "Cluster" },
                        "singularResource": kind.singular(),
                        "verbs": verbs(kind),
                        "shortNames": kind.short_names(),
                        "subresources": subresources,
                    });
                    if kind.in_category_all() {
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
        assert_eq!(resources.as_array().map(Vec::len), Some(5));
        assert_eq!(resources[0]["resource"], "pods");
        assert_eq!(resources[0]["scope"], "Namespaced");
        assert_eq!(resources[1]["scope"], "Cluster");
        let apps = aggregated(false);
        assert_eq!(apps["items"][0]["metadata"]["name"], "apps");
        let names: Vec<&str> = apps["items"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|g| g["metadata"]["name"].as_str())
            .collect();
        assert_eq!(names, ["apps", "events.k8s.io", "coordination.k8s.io"]);
    }

    #[test]
    fn only_kinds_with_a_status_subresource_list_one() {
        let apps = resource_list("apps").expect("apps is served");
        let names: Vec<&str> = apps["resources"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|r| r["name"].as_str())
            .collect();
        assert!(names.contains(&"statefulsets/status"));
        assert!(names.contains(&"controllerrevisions"));
        assert!(!names.contains(&"controllerrevisions/status"));
        assert!(resource_list("batch").is_none());
    }
}
