//! `tether-bench --in-cluster`: the controller as users run it (`tether
//! install --image`, two replicas of real processes on kube-local's exec
//! kubelet): how long until both replicas are Ready, how long a failover
//! takes when the leader's pod is deleted (median of `--failovers`), and
//! the leader's resident memory.

use std::path::Path;
use std::process::Command;
use std::time::Instant;

use serde_json::json;
use tether_testkit::in_cluster;
use tether_testkit::{Repo, application, client_for, eventually, run_ok};

use crate::{memory, say, secs};

fn config_map(value: usize) -> String {
    format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: counter\ndata:\n  value: \"{value}\"\n"
    )
}

/// The process id of the container running in pod `name` (its
/// environment names it: the downward API's POD_NAME).
fn pid_of_pod(name: &str) -> Option<u32> {
    let wanted = format!("POD_NAME={name}");
    std::fs::read_dir("/proc")
        .ok()?
        .flatten()
        .find_map(|entry| {
            let pid: u32 = entry.file_name().to_str()?.parse().ok()?;
            let environ = std::fs::read(entry.path().join("environ")).ok()?;
            let cmdline = std::fs::read(entry.path().join("cmdline")).ok()?;
            let runs_tether = cmdline.split(|b| *b == 0).nth(1) == Some(b"run".as_slice());
            (runs_tether && environ.split(|b| *b == 0).any(|v| v == wanted.as_bytes()))
                .then_some(pid)
        })
}

pub async fn run(tether: &Path, failovers: usize) -> anyhow::Result<()> {
    // Outside /tmp, which the controller's pods mount an emptyDir over.
    let base = tether
        .parent()
        .unwrap_or(Path::new("."))
        .join("bench-in-cluster");
    let work = in_cluster::workspace(&base);
    say("starting kube-local with an exec kubelet for tether:dev");
    let plane = in_cluster::plane(&work.path().join("plane"), tether);
    let admin = plane.kubeconfig();
    let client = client_for(admin).await;

    say("tether install --image tether:dev (2 replicas)");
    let installed = Instant::now();
    in_cluster::install(tether, admin, in_cluster::IMAGE, &[]);
    let applied = installed.elapsed();
    let ready = in_cluster::ready(&client, 2).await;
    println!(
        "in-cluster: install applied in {:.2} s; both replicas Ready {:.2} s later",
        secs(applied),
        secs(ready)
    );

    let repo = Repo::at(&work.path().join("repo"));
    let mut commit = 0;
    repo.commit(&[("app/counter.yaml", config_map(commit))], "first");
    run_ok(
        Command::new("kubectl")
            .arg("--kubeconfig")
            .arg(admin)
            .args(["create", "namespace", "counter"]),
    );
    application("counter", "counter", &repo.url(), "app")
        .sync_policy(json!({"prune": true}))
        .apply(&client)
        .await;

    let (mut leaders, mut synced) = (Vec::new(), Vec::new());
    for run in 1..=failovers {
        in_cluster::ready(&client, 2).await;
        let failover = in_cluster::fail_over(&client, ("counter", "counter"), || {
            commit += 1;
            repo.commit(&[("app/counter.yaml", config_map(commit))], "next")
        })
        .await;
        println!(
            "in-cluster: failover {run}: new leader after {:.0} ms, new commit synced after {:.0} ms",
            secs(failover.new_leader) * 1000.0,
            secs(failover.synced) * 1000.0
        );
        leaders.push(failover.new_leader);
        synced.push(failover.synced);
    }
    if failovers > 0 {
        println!(
            "in-cluster: failover median of {failovers}: new leader {:.0} ms, commit synced {:.0} ms (target < 10 s)",
            secs(in_cluster::median(&mut leaders)) * 1000.0,
            secs(in_cluster::median(&mut synced)) * 1000.0
        );
    }

    let leader = eventually("a leader", || in_cluster::leader(&client)).await;
    match pid_of_pod(&leader) {
        Some(pid) => {
            let (rss, peak) = memory(pid)?;
            println!("in-cluster: leader {leader} VmRSS {rss:.1} MB, VmHWM {peak:.1} MB");
        }
        None => println!("in-cluster: the leader's process was not found"),
    }
    Ok(())
}
