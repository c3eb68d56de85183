//! Where the measured threads run.
//!
//! **Unpinned** (the default) is how a controller manager runs: kube-controller-manager's
//! goroutines are scheduled on every core (`GOMAXPROCS` = cores), its garbage collector
//! included, so the cache's writer competes with the readers for the same cores. **Pinned** is
//! the earlier layout, kept as an option: the cache's writer alone on the first core, every
//! reader (or controller) on the last one, so that readers together use at most one core and
//! never the writer's.

/// How the measured threads are placed on cores.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Default,
    clap::ValueEnum,
    serde::Serialize,
    serde::Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum Placement {
    /// No thread is pinned: the scheduler places writer and readers on any core.
    #[default]
    Unpinned,
    /// The writer on the first core, the readers (or controllers) on the last.
    Pinned,
}

/// The cores the writer and the readers are pinned to (`None`: not pinned).
#[derive(Debug, Clone, Copy, Default)]
pub struct Cores {
    /// The cache writer's core.
    pub writer: Option<core_affinity::CoreId>,
    /// The readers' (controllers') core.
    pub readers: Option<core_affinity::CoreId>,
}

impl Placement {
    /// Name in reports and on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Placement::Unpinned => "unpinned",
            Placement::Pinned => "pinned",
        }
    }

    /// The cores of this placement. Pinned needs at least two cores that can be listed;
    /// elsewhere nothing is pinned.
    pub fn cores(self) -> Cores {
        match self {
            Placement::Unpinned => Cores::default(),
            Placement::Pinned => match core_affinity::get_core_ids() {
                Some(cores) if cores.len() >= 2 => {
                    Cores { writer: Some(cores[0]), readers: Some(cores[cores.len() - 1]) }
                }
                _ => Cores::default(),
            },
        }
    }
}

/// Pins the calling thread to `core`, if one is given.
pub fn pin(core: Option<core_affinity::CoreId>) {
    if let Some(core) = core {
        core_affinity::set_for_current(core);
    }
}
