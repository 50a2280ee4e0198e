//! `tether-bench --impersonation`: what making each Application's changes
//! as its ServiceAccount costs. This build's `tether`, side by side (see
//! `side_by_side.rs`), syncing apps that name no ServiceAccount (its own
//! identity) and apps that each name `deployer`, a ServiceAccount of
//! their namespace bound there to ClusterRole `edit`; the steady state
//! shows whether any request is still made as those users once all is
//! synced (the watches and caches are the controller's own).

use std::path::Path;

use crate::side_by_side::{self, Comparison, Contender, Settings};

/// The ServiceAccount the impersonating apps name.
const SERVICE_ACCOUNT: &str = "deployer";

pub async fn run(tether: &Path, work: &Path, settings: &Settings) -> anyhow::Result<()> {
    let contender = |name, letter, service_account| Contender {
        name,
        letter,
        binary: tether.to_path_buf(),
        service_account,
    };
    let comparison = Comparison {
        title: "Impersonation (spec.serviceAccountName) against the controller's own identity",
        contenders: [
            contender("own", "O", None),
            contender("impersonating", "I", Some(SERVICE_ACCOUNT)),
        ],
        target_ratio: 1.10,
    };
    side_by_side::run(&comparison, work, settings).await
}
