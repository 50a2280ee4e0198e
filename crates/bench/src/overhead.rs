//! `tether-bench --overhead-baseline PATH`: what metrics, Events and
//! notifications cost, measured against a `tether` built without them
//! (`scripts/bench.sh --overhead` builds it), the two run side by side
//! (see `side_by_side.rs`).

use std::path::Path;

use crate::side_by_side::{self, Comparison, Contender, Settings};

pub async fn run(
    baseline: &Path,
    current: &Path,
    work: &Path,
    settings: &Settings,
) -> anyhow::Result<()> {
    let contender = |name, letter, binary: &Path| Contender {
        name,
        letter,
        binary: binary.to_path_buf(),
        service_account: None,
    };
    let comparison = Comparison {
        title: "Overhead of metrics, Events and notifications",
        contenders: [
            contender("baseline", "B", baseline),
            contender("current", "C", current),
        ],
        target_ratio: 1.05,
    };
    side_by_side::run(&comparison, work, settings).await
}
