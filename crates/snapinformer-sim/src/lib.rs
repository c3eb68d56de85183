//! The snapinformer simulator and benchmark package (not published).
//!
//! It holds the baselines the store is measured against (a client-go-style locked store in two
//! modes and kube-rs' reflector store), a generator of realistic pods, the `store` scenario and
//! its report: a side-by-side table, `report.json` and SVG/PNG plots. The binary
//! `snapinformer-sim` runs the scenarios; `cargo bench -p snapinformer-sim` runs the criterion
//! micro-benchmarks.

pub mod backends;
pub mod informer_scenario;
pub mod plot;
pub mod pods;
pub mod report;
pub mod seed;
pub mod soak;
pub mod stats;
pub mod store_scenario;
