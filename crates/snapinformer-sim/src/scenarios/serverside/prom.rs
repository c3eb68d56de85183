//! The Prometheus text format, read: enough to pick series out of kube-apiserver's,
//! kube-controller-manager's and the test API server's `/metrics`.

use std::collections::BTreeMap;

/// One sample line: metric name, labels, value.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    /// Metric name (`workqueue_depth`, `apiserver_request_total_bucket`, ...).
    pub name: String,
    /// Label names to values.
    pub labels: BTreeMap<String, String>,
    /// The value (`+Inf`, `-Inf` and `NaN` parse as such).
    pub value: f64,
}

impl Sample {
    /// The value of label `name`, `""` when absent.
    pub fn label(&self, name: &str) -> &str {
        self.labels.get(name).map_or("", String::as_str)
    }
}

/// Parses the samples of a text exposition; comments, blank lines and lines that do not parse
/// are skipped.
pub fn parse(text: &str) -> Vec<Sample> {
    text.lines().filter(|l| !l.starts_with('#') && !l.trim().is_empty()).filter_map(line).collect()
}

fn line(line: &str) -> Option<Sample> {
    let (name, rest) = match line.find('{') {
        Some(brace) => (&line[..brace], &line[brace + 1..]),
        None => {
            let (name, value) = line.split_once(' ')?;
            return Some(Sample {
                name: name.to_owned(),
                labels: BTreeMap::new(),
                value: value_of(value)?,
            });
        }
    };
    let mut labels = BTreeMap::new();
    let mut chars = rest.char_indices().peekable();
    let end = loop {
        // label name
        let start = chars.peek()?.0;
        let mut eq = None;
        for (i, c) in chars.by_ref() {
            if c == '=' {
                eq = Some(i);
                break;
            }
        }
        let key = rest[start..eq?].trim_start_matches([',', ' ']).to_owned();
        if chars.next()?.1 != '"' {
            return None;
        }
        let mut value = String::new();
        loop {
            let (_, c) = chars.next()?;
            match c {
                '\\' => match chars.next()?.1 {
                    'n' => value.push('\n'),
                    other => value.push(other),
                },
                '"' => break,
                other => value.push(other),
            }
        }
        labels.insert(key, value);
        match chars.next()? {
            (_, ',') if chars.peek().is_some_and(|(_, c)| *c == '}') => break chars.next()?.0,
            (_, ',') => continue,
            (i, '}') => break i,
            _ => return None,
        }
    };
    let value = rest[end + 1..].split_whitespace().next()?;
    Some(Sample { name: name.to_owned(), labels, value: value_of(value)? })
}

fn value_of(text: &str) -> Option<f64> {
    match text.trim() {
        "+Inf" => Some(f64::INFINITY),
        "-Inf" => Some(f64::NEG_INFINITY),
        "NaN" => Some(f64::NAN),
        t => t.split_whitespace().next()?.parse().ok(),
    }
}

/// The sum of the samples named `name` whose labels include every `(label, value)` of `want`.
pub fn sum(samples: &[Sample], name: &str, want: &[(&str, &str)]) -> f64 {
    samples
        .iter()
        .filter(|s| s.name == name && want.iter().all(|(k, v)| s.label(k) == *v))
        .map(|s| s.value)
        .sum()
}

/// The largest of the samples named `name` whose labels include every `(label, value)` of
/// `want`; 0 when there is none.
pub fn max(samples: &[Sample], name: &str, want: &[(&str, &str)]) -> f64 {
    samples
        .iter()
        .filter(|s| s.name == name && want.iter().all(|(k, v)| s.label(k) == *v))
        .map(|s| s.value)
        .fold(0.0, f64::max)
}

/// The `q` quantile (0..1) of a histogram from its cumulative `_bucket` samples, as Prometheus'
/// `histogram_quantile` estimates it (linear within the bucket); `None` without observations.
/// A quantile in the `+Inf` bucket is the last finite bound (the estimate's floor).
pub fn histogram_quantile(
    samples: &[Sample],
    name: &str,
    want: &[(&str, &str)],
    q: f64,
) -> Option<f64> {
    let bucket = format!("{name}_bucket");
    let mut buckets: Vec<(f64, f64)> = samples
        .iter()
        .filter(|s| s.name == bucket && want.iter().all(|(k, v)| s.label(k) == *v))
        .filter_map(|s| Some((value_of(s.labels.get("le")?)?, s.value)))
        .collect();
    buckets.sort_by(|a, b| a.0.total_cmp(&b.0));
    let total = buckets.last()?.1;
    if total <= 0.0 {
        return None;
    }
    let rank = q * total;
    let mut previous = (0.0, 0.0);
    for &(le, count) in &buckets {
        if count >= rank {
            if le.is_infinite() {
                return Some(previous.0);
            }
            let width = count - previous.1;
            let within = if width > 0.0 { (rank - previous.1) / width } else { 1.0 };
            return Some(previous.0 + (le - previous.0) * within);
        }
        previous = (le, count);
    }
    Some(previous.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn samples_with_escaped_labels_and_special_values_parse() {
        let text = "# HELP x y\nworkqueue_depth{name=\"statefulset\"} 7\nup 1\n\
                    a{b=\"q\\\"uote\",c=\"\"} +Inf\nbroken{ 3\n";
        let samples = parse(text);
        assert_eq!(samples.len(), 3);
        assert_eq!(samples[0].label("name"), "statefulset");
        assert_eq!(samples[0].value, 7.0);
        assert_eq!(samples[1].name, "up");
        assert_eq!(samples[2].label("b"), "q\"uote");
        assert!(samples[2].value.is_infinite());
        assert_eq!(sum(&samples, "workqueue_depth", &[("name", "statefulset")]), 7.0);
        assert_eq!(sum(&samples, "workqueue_depth", &[("name", "daemonset")]), 0.0);
        assert_eq!(max(&samples, "workqueue_depth", &[]), 7.0);
    }

    #[test]
    fn histogram_quantiles_interpolate_within_the_bucket() {
        let text = "h_bucket{le=\"1\"} 0\nh_bucket{le=\"2\"} 10\nh_bucket{le=\"+Inf\"} 10\n";
        let samples = parse(text);
        assert_eq!(histogram_quantile(&samples, "h", &[], 0.5), Some(1.5));
        assert_eq!(histogram_quantile(&samples, "none", &[], 0.5), None);
    }
}
