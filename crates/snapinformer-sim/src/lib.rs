//! The snapinformer simulator and benchmark package (not published).
//!
//! - [`rows`]: the caches under test, ours and the baselines (a client-go-style locked store in
//!   its variants, kube-rs' reflector store), behind one interface: the one list of rows.
//! - [`scenarios`]: `store`, `seed`, `informer`, `soak` and `kcm` (the real
//!   kube-controller-manager against the test API server), each with its arguments, run and
//!   report.
//! - [`harness`]: what the scenarios share: heap and RSS sampling, placement, worker
//!   processes, repeated runs and their aggregation, statistics, plots.
//! - [`pods`]: the pod generator every scenario uses; [`layout`]: where a generated pod's
//!   memory goes, in Rust and in Go.
//!
//! The binary `snapinformer-sim` runs the scenarios; `cargo bench -p snapinformer-sim` runs the
//! criterion micro-benchmarks.

pub mod harness;
pub mod layout;
pub mod pods;
pub mod rows;
pub mod scenarios;
