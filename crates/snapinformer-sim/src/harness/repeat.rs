//! Repeated runs: each run's report is kept, and the report of the command gives the median and
//! the range (min–max) of every figure across the runs.
//!
//! Aggregation works on the JSON form of a report, so that every number of it is covered,
//! whatever the report type, by one rule per kind of value:
//!
//! - **numbers**: median (for an even count, the mean of the two middle values, rounded when
//!   every run gave an integer), minimum and maximum;
//! - **null among numbers** (a figure that did not happen, such as "never converged") counts
//!   as larger than any number: the median is null when it falls on one, the maximum is null
//!   when any run gave null;
//! - **booleans**: median is the majority (false on a tie), minimum is "all true", maximum is
//!   "any true";
//! - **objects**: key by key; **arrays** of the same length in every run: element by element
//!   (rows of a report line up by position); arrays whose length differs between runs
//!   (series, distribution points): the first run's array as the median, null as min and max;
//! - **strings**: the first run's.

use std::cmp::Ordering;

use serde::{Serialize, de::DeserializeOwned};
use serde_json::{Map, Number, Value};

/// The minimum and maximum of every figure of a report, in the report's own JSON shape.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Spread {
    /// Every figure's minimum across the runs.
    pub min: Value,
    /// Every figure's maximum across the runs.
    pub max: Value,
}

impl Spread {
    /// The minimum and maximum of the number at JSON pointer `pointer` (`/rows/0/apply_per_s`),
    /// if both are numbers.
    pub fn range(&self, pointer: &str) -> Option<(f64, f64)> {
        let min = self.min.pointer(pointer)?.as_f64()?;
        let max = self.max.pointer(pointer)?.as_f64()?;
        Some((min, max))
    }
}

/// What a median report records about the runs it comes from.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct RepeatInfo {
    /// How many runs.
    pub runs: usize,
    /// Each run's report file, relative to the output directory.
    pub files: Vec<String>,
    /// Every figure's minimum and maximum across the runs.
    pub spread: Spread,
}

/// A report aggregated over repeated runs: the median report, and the spread.
#[derive(Debug, Clone)]
pub struct Repeated<T> {
    /// The report whose every figure is the median across the runs.
    pub median: T,
    /// Every figure's minimum and maximum.
    pub spread: Spread,
    /// How many runs.
    pub runs: usize,
}

/// Why runs could not be aggregated.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// No run to aggregate.
    #[error("no run to aggregate")]
    NoRuns,
    /// A report did not convert to or from JSON.
    #[error("aggregating reports: {0}")]
    Json(#[from] serde_json::Error),
}

/// `Result` with the repeat [`Error`] as the default error type.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Aggregates the reports of repeated runs (see the module docs for the rules).
pub fn aggregate_reports<T: Serialize + DeserializeOwned>(runs: &[T]) -> Result<Repeated<T>> {
    if runs.is_empty() {
        return Err(Error::NoRuns);
    }
    let values = runs.iter().map(serde_json::to_value).collect::<Result<Vec<_>, _>>()?;
    let (median, spread) = aggregate(&values);
    Ok(Repeated { median: serde_json::from_value(median)?, spread, runs: runs.len() })
}

/// Aggregates JSON values of one shape: `(median, spread)`.
pub fn aggregate(runs: &[Value]) -> (Value, Spread) {
    let (median, min, max) = combine(&runs.iter().collect::<Vec<_>>());
    (median, Spread { min, max })
}

fn combine(runs: &[&Value]) -> (Value, Value, Value) {
    let Some(first) = runs.first() else { return (Value::Null, Value::Null, Value::Null) };
    let numeric = runs.iter().all(|v| v.is_number() || v.is_null());
    if numeric && runs.iter().any(|v| v.is_number()) {
        return numbers(runs);
    }
    match first {
        Value::Bool(_) if runs.iter().all(|v| v.is_boolean()) => {
            let trues = runs.iter().filter(|v| v.as_bool() == Some(true)).count();
            (
                Value::Bool(trues * 2 > runs.len()),
                Value::Bool(trues == runs.len()),
                Value::Bool(trues > 0),
            )
        }
        Value::Object(map) if runs.iter().all(|v| v.is_object()) => {
            let (mut median, mut min, mut max) = (Map::new(), Map::new(), Map::new());
            for key in map.keys() {
                let column: Vec<&Value> = runs.iter().filter_map(|v| v.get(key)).collect();
                let (a, b, c) = combine(&column);
                median.insert(key.clone(), a);
                min.insert(key.clone(), b);
                max.insert(key.clone(), c);
            }
            (Value::Object(median), Value::Object(min), Value::Object(max))
        }
        Value::Array(items) if runs.iter().all(|v| v.is_array()) => {
            let same_length = runs.iter().all(|v| v.as_array().map(Vec::len) == Some(items.len()));
            if !same_length {
                return ((*first).clone(), Value::Null, Value::Null);
            }
            let (mut median, mut min, mut max) = (Vec::new(), Vec::new(), Vec::new());
            for i in 0..items.len() {
                let column: Vec<&Value> = runs.iter().map(|v| &v[i]).collect();
                let (a, b, c) = combine(&column);
                median.push(a);
                min.push(b);
                max.push(c);
            }
            (Value::Array(median), Value::Array(min), Value::Array(max))
        }
        other => ((*other).clone(), (*other).clone(), (*other).clone()),
    }
}

/// Numbers (and nulls, ordered after every number) of one figure across runs.
fn numbers(runs: &[&Value]) -> (Value, Value, Value) {
    let mut sorted: Vec<&Value> = runs.to_vec();
    sorted.sort_by(|a, b| match (a.as_f64(), b.as_f64()) {
        (Some(x), Some(y)) => x.partial_cmp(&y).unwrap_or(Ordering::Equal),
        (Some(_), None) => Ordering::Less,
        (None, Some(_)) => Ordering::Greater,
        (None, None) => Ordering::Equal,
    });
    let n = sorted.len();
    let min = sorted[0].clone();
    let max = if runs.iter().any(|v| v.is_null()) { Value::Null } else { sorted[n - 1].clone() };
    let median = if n % 2 == 1 {
        sorted[n / 2].clone()
    } else {
        match (sorted[n / 2 - 1].as_f64(), sorted[n / 2].as_f64()) {
            (Some(a), Some(b)) => {
                let mean = (a + b) / 2.0;
                if sorted.iter().all(|v| v.is_u64()) {
                    Value::Number(Number::from(mean.round() as u64))
                } else if sorted.iter().all(|v| v.is_i64()) {
                    Value::Number(Number::from(mean.round() as i64))
                } else {
                    Number::from_f64(mean).map_or(Value::Null, Value::Number)
                }
            }
            _ => Value::Null,
        }
    };
    (median, min, max)
}

/// The file name of run `i` (from 1) of a command started at `started_at` (RFC 3339):
/// `<scenario>-<YYYYMMDDTHHMMSSZ>-<i>.json`, written under `<out>/runs/`.
pub fn run_file_name(scenario: &str, started_at: &str, i: usize) -> String {
    let stamp: String = started_at.chars().filter(|c| *c != '-' && *c != ':').collect();
    format!("{scenario}-{stamp}-{i}.json")
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn numbers_aggregate_to_median_min_and_max_in_the_report_shape() {
        let runs = [
            json!({"name": "a", "p99": 30, "rate": 1.5, "rows": [{"x": 1}, {"x": 7}], "ok": true}),
            json!({"name": "a", "p99": 10, "rate": 2.5, "rows": [{"x": 3}, {"x": 5}], "ok": false}),
            json!({"name": "a", "p99": 20, "rate": 0.5, "rows": [{"x": 2}, {"x": 9}], "ok": true}),
        ];
        let (median, spread) = aggregate(&runs);
        assert_eq!(
            median,
            json!({"name": "a", "p99": 20, "rate": 1.5, "rows": [{"x": 2}, {"x": 7}], "ok": true})
        );
        assert_eq!(
            spread.min,
            json!({"name": "a", "p99": 10, "rate": 0.5, "rows": [{"x": 1}, {"x": 5}], "ok": false})
        );
        assert_eq!(
            spread.max,
            json!({"name": "a", "p99": 30, "rate": 2.5, "rows": [{"x": 3}, {"x": 9}], "ok": true})
        );
        assert_eq!(spread.range("/rows/1/x"), Some((5.0, 9.0)));
    }

    #[test]
    fn a_figure_that_did_not_happen_counts_as_larger_than_any_number() {
        let runs = [json!({"t": 21.0}), json!({"t": null}), json!({"t": 22.0})];
        let (median, spread) = aggregate(&runs);
        assert_eq!(median, json!({"t": 22.0}));
        assert_eq!(spread.min, json!({"t": 21.0}));
        assert_eq!(spread.max, json!({"t": null}));
        let runs = [json!({"t": null}), json!({"t": null}), json!({"t": 3.0})];
        assert_eq!(aggregate(&runs).0, json!({"t": null}));
    }

    #[test]
    fn an_even_count_takes_the_mean_of_the_middle_two_rounded_for_integers() {
        let runs = [json!({"n": 1, "f": 1.0}), json!({"n": 4, "f": 2.0})];
        let (median, _) = aggregate(&runs);
        assert_eq!(median, json!({"n": 3, "f": 1.5}));
    }

    #[test]
    fn series_of_different_lengths_come_from_the_first_run() {
        let runs = [json!({"s": [[0.0, 1], [0.1, 2]]}), json!({"s": [[0.0, 5]]})];
        let (median, spread) = aggregate(&runs);
        assert_eq!(median, json!({"s": [[0.0, 1], [0.1, 2]]}));
        assert_eq!(spread.min, json!({"s": null}));
    }

    #[test]
    fn typed_reports_come_back_as_their_type() {
        #[derive(Debug, PartialEq, serde::Serialize, serde::Deserialize)]
        struct R {
            count: u64,
            converged: Option<f64>,
        }
        let runs = [
            R { count: 4, converged: Some(2.0) },
            R { count: 9, converged: None },
            R { count: 6, converged: Some(1.0) },
        ];
        let agg = aggregate_reports(&runs).unwrap();
        assert_eq!(agg.median, R { count: 6, converged: Some(2.0) });
        assert_eq!(agg.runs, 3);
        assert!(matches!(aggregate_reports::<R>(&[]), Err(Error::NoRuns)));
    }

    #[test]
    fn run_files_are_named_by_scenario_start_and_number() {
        assert_eq!(
            run_file_name("seed", "2026-12-01T10:15:00Z", 2),
            "seed-20261201T101500Z-2.json"
        );
    }
}
