//! Latency histograms and summaries.

use hdrhistogram::Histogram;

/// A latency recorder in microseconds (1 us to 1 hour, 3 significant digits).
#[derive(Debug, Clone)]
pub struct Latency(Histogram<u64>);

impl Default for Latency {
    fn default() -> Self {
        Latency(Histogram::new_with_bounds(1, 3_600_000_000, 3).expect("valid histogram bounds"))
    }
}

impl Latency {
    /// Records one value in microseconds (clamped into range).
    pub fn record_us(&mut self, us: u64) {
        self.0.saturating_record(us.max(1));
    }
    /// Records a duration.
    pub fn record(&mut self, d: std::time::Duration) {
        self.record_us(d.as_micros().min(u128::from(u64::MAX)) as u64);
    }
    /// Adds another recorder's values.
    pub fn merge(&mut self, other: &Latency) {
        self.0.add(&other.0).expect("same bounds");
    }
    /// Number of values.
    pub fn count(&self) -> u64 {
        self.0.len()
    }
    /// Percentile summary.
    pub fn summary(&self) -> Summary {
        if self.0.is_empty() {
            return Summary::default();
        }
        Summary {
            p50: self.0.value_at_quantile(0.50),
            p99: self.0.value_at_quantile(0.99),
            max: self.0.max(),
            count: self.0.len(),
        }
    }
    /// `(value_us, cumulative fraction)` points for a CDF plot.
    pub fn cdf(&self) -> Vec<(u64, f64)> {
        let total = self.0.len().max(1) as f64;
        let mut acc = 0u64;
        self.0
            .iter_recorded()
            .map(|v| {
                acc += v.count_at_value();
                (v.value_iterated_to(), acc as f64 / total)
            })
            .collect()
    }
}

/// p50, p99 and max of a latency distribution, in microseconds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Summary {
    /// Median.
    pub p50: u64,
    /// 99th percentile.
    pub p99: u64,
    /// Largest value seen.
    pub max: u64,
    /// Number of values.
    pub count: u64,
}
