//! Counting from the API server's side, the same way for every client and either server (the
//! test API server or the real kube-apiserver): the Prometheus text of `/metrics` ([`prom`]),
//! requests by client from an audit log in kube-apiserver's format ([`audit`]), and a watch of
//! every pod ([`observer`]). The `kcm` scenario and `seed --mode real` use them.

pub mod audit;
pub mod observer;
pub mod prom;

use std::collections::BTreeMap;

use prom::Sample;

/// `apiserver_request_total`, summed by `VERB resource[/subresource]`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RequestTotals {
    /// Requests by `VERB resource code` (`POST pods 201`).
    pub by_code: BTreeMap<String, u64>,
    /// 409 answers by `VERB resource` (`POST pods`, `PUT statefulsets/status`).
    pub conflicts_409: BTreeMap<String, u64>,
}

/// Reads `apiserver_request_total` out of a server's scrape. The counter has verb, resource,
/// subresource and code labels but no client one (clients are told apart by the audit log).
pub fn request_totals(server_metrics: &[Sample]) -> RequestTotals {
    let mut totals = RequestTotals::default();
    for m in server_metrics.iter().filter(|m| m.name == "apiserver_request_total") {
        let resource = if m.label("subresource").is_empty() {
            m.label("resource").to_owned()
        } else if m.label("resource").is_empty() {
            m.label("subresource").to_owned()
        } else {
            format!("{}/{}", m.label("resource"), m.label("subresource"))
        };
        let key = format!("{} {resource}", m.label("verb"));
        *totals.by_code.entry(format!("{key} {}", m.label("code"))).or_insert(0) += m.value as u64;
        if m.label("code") == "409" {
            *totals.conflicts_409.entry(key).or_insert(0) += m.value as u64;
        }
    }
    totals
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_totals_are_keyed_by_verb_resource_and_code() {
        let text = "apiserver_request_total{code=\"409\",resource=\"pods\",subresource=\"\",verb=\"POST\"} 3\n\
                    apiserver_request_total{code=\"201\",resource=\"pods\",subresource=\"\",verb=\"POST\"} 10\n\
                    apiserver_request_total{code=\"409\",resource=\"statefulsets\",subresource=\"status\",verb=\"PUT\"} 2\n\
                    apiserver_request_total{code=\"200\",resource=\"\",subresource=\"/healthz\",verb=\"GET\"} 1\n";
        let totals = request_totals(&prom::parse(text));
        assert_eq!(totals.conflicts_409.get("POST pods"), Some(&3));
        assert_eq!(totals.conflicts_409.get("PUT statefulsets/status"), Some(&2));
        assert_eq!(totals.by_code.get("POST pods 201"), Some(&10));
        assert_eq!(totals.by_code.get("GET /healthz 200"), Some(&1));
    }
}
