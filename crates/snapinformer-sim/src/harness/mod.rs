//! What every scenario shares, kept apart from the scenarios themselves: heap and RSS
//! measurement ([`heap`]), where threads run ([`placement`]), worker processes and their phase
//! messages ([`worker`]), repeated runs and their aggregation ([`repeat`]), the environment a
//! report records ([`report`]), what the scheduler did to a thread ([`sched`]), how fast the
//! machine was before a row ([`speed`]), latency statistics ([`stats`]) and plots ([`plot`]).

pub mod heap;
pub mod placement;
pub mod plot;
pub mod repeat;
pub mod report;
pub mod sched;
pub mod speed;
pub mod stats;
pub mod worker;

/// Where a scenario sends its phase messages ("memory: building the store", ...). A worker
/// process writes them to stderr as `phase: ` lines for the parent's progress bar.
pub type PhaseLog<'a> = &'a dyn Fn(&str);
