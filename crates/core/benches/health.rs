//! Health assessment throughput, printed as figures (no harness):
//!
//! - the whole conformance corpus (builtin, kstatus, custom inputs)
//!   assessed 1,000 times with the shipped rules;
//! - 10,000 synthetic Deployments and Pods with the built-in checks;
//! - CEL rule evaluations on the custom corpus inputs our rules judge;
//! - the generic inference on the same inputs, without the shipped rules
//!   (what a brand-new CRD gets).
//!
//! Each figure is the median of 5 runs on one thread, as objects per
//! second of on-CPU time (from /proc/thread-self/schedstat, so that other
//! processes sharing the machine do not skew it) and of wall time.
//! Run: `cargo bench -p tether-core --bench health`.

#[path = "../tests/common/yaml_files.rs"]
mod yaml_files;

use std::hint::black_box;
use std::path::Path;
use std::time::Instant;

use serde_json::{Value, json};
use tether_core::health::{self, RuleSet};
use yaml_files::yaml_files;

const RUNS: usize = 5;

fn main() {
    let corpus = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/conformance/health");
    assert!(
        corpus.is_dir(),
        "missing conformance corpus at {}",
        corpus.display()
    );
    let objects = corpus_objects(&corpus);
    let rules = RuleSet::shipped();
    let judged_by_rules: Vec<&Value> = objects
        .iter()
        .filter(|object| {
            let api_version = object["apiVersion"].as_str().unwrap_or("");
            let group = api_version.rsplit_once('/').map_or("", |(group, _)| group);
            rules
                .rule_for(group, object["kind"].as_str().unwrap_or(""))
                .is_some()
        })
        .collect();
    let synthetic = synthetic(10_000);

    let corpus_rate = median(|| {
        for _ in 0..1_000 {
            for object in &objects {
                black_box(rules.assess(black_box(object)));
            }
        }
        objects.len() * 1_000
    });
    let builtin_rate = median(|| {
        for _ in 0..10 {
            for object in &synthetic {
                black_box(health::assess(black_box(object)));
            }
        }
        synthetic.len() * 10
    });
    let cel_rate = median(|| {
        for _ in 0..100 {
            for object in &judged_by_rules {
                black_box(rules.assess(black_box(object)));
            }
        }
        judged_by_rules.len() * 100
    });
    let bare = RuleSet::default();
    let generic_rate = median(|| {
        for _ in 0..100 {
            for object in &judged_by_rules {
                black_box(bare.assess(black_box(object)));
            }
        }
        judged_by_rules.len() * 100
    });
    println!("health benchmark (median of {RUNS} runs, one thread, objects assessed per second)");
    print(
        &format!(
            "conformance corpus x1000 ({} objects, rules + built-ins)",
            objects.len()
        ),
        corpus_rate,
    );
    print(
        "10,000 synthetic Deployments/Pods x10 (built-ins)",
        builtin_rate,
    );
    print(
        &format!("CEL rules ({} custom objects x100)", judged_by_rules.len()),
        cel_rate,
    );
    print(
        &format!(
            "generic inference, no shipped rules (the same {} objects x100)",
            judged_by_rules.len()
        ),
        generic_rate,
    );
}

/// Runs `work` (which returns how many objects it assessed) `RUNS` times;
/// returns the median rates per CPU second and per wall second.
fn median(mut work: impl FnMut() -> usize) -> (f64, f64) {
    let mut cpu = Vec::new();
    let mut wall = Vec::new();
    for _ in 0..RUNS {
        let (cpu_start, wall_start) = (cpu_seconds(), Instant::now());
        let objects = work() as f64;
        wall.push(objects / wall_start.elapsed().as_secs_f64());
        cpu.push(objects / (cpu_seconds() - cpu_start));
    }
    cpu.sort_by(f64::total_cmp);
    wall.sort_by(f64::total_cmp);
    (cpu[RUNS / 2], wall[RUNS / 2])
}

/// This thread's on-CPU time in seconds (Linux).
fn cpu_seconds() -> f64 {
    let text = std::fs::read_to_string("/proc/thread-self/schedstat").unwrap_or_default();
    let nanos: f64 = text
        .split_whitespace()
        .next()
        .and_then(|n| n.parse().ok())
        .unwrap_or(f64::NAN);
    nanos / 1e9
}

fn print(label: &str, (cpu, wall): (f64, f64)) {
    println!("  {label:<62} {cpu:>10.0}/s CPU  {wall:>10.0}/s wall");
}

/// Every input manifest of the corpus: builtin/, kstatus/cases/, custom/.
fn corpus_objects(root: &Path) -> Vec<Value> {
    yaml_files(root)
        .iter()
        .filter(|path| {
            let name = path.file_name().unwrap().to_string_lossy();
            !matches!(
                name.as_ref(),
                "expected.yaml" | "index.yaml" | "health_test.yaml"
            )
        })
        .filter_map(|path| {
            let text = std::fs::read_to_string(path).ok()?;
            let options = serde_saphyr::options! {
                duplicate_keys: serde_saphyr::DuplicateKeyPolicy::LastWins,
            };
            let object: Value = serde_saphyr::from_str_with_options(&text, options).ok()?;
            object.get("kind").is_some().then_some(object)
        })
        .collect()
}

/// Half Deployments mid-rollout or available, half Pods running or
/// crash-looping.
fn synthetic(count: usize) -> Vec<Value> {
    (0..count)
        .map(|index| {
            if index % 2 == 0 {
                json!({"apiVersion": "apps/v1", "kind": "Deployment",
                    "metadata": {"name": format!("web-{index}"), "namespace": "shop", "generation": 3},
                    "spec": {"replicas": 3},
                    "status": {"observedGeneration": 3, "replicas": 3, "updatedReplicas": 3,
                        "availableReplicas": index % 3, "conditions": [
                            {"type": "Available", "status": "True"},
                            {"type": "Progressing", "status": "True", "reason": "NewReplicaSetAvailable"}]}})
            } else {
                let state = if index % 4 == 1 {
                    json!({"running": {"startedAt": "2026-01-01T00:00:00Z"}})
                } else {
                    json!({"waiting": {"reason": "CrashLoopBackOff", "message": "back-off"}})
                };
                json!({"apiVersion": "v1", "kind": "Pod",
                    "metadata": {"name": format!("web-{index}"), "namespace": "shop"},
                    "spec": {"restartPolicy": "Always"},
                    "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}],
                        "containerStatuses": [{"name": "app", "restartCount": 5, "ready": true, "state": state}]}})
            }
        })
        .collect()
}
