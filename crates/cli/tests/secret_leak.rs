//! The secret-leak scan: unique values planted in a Secret (`stringData`
//! and `data`), in a Kustomize `secretGenerator` and in Helm values are
//! synced, drifted (kubectl edits the Secret) and healed, diffed, dry-run,
//! rendered, reported and notified about; then every place Tether writes
//! to is searched for them, plain and base64: the controller's log, every
//! CLI output, the Applications' status, the Events and ConfigMaps of the
//! namespace (its audit records among them), the metrics and the
//! notifications. None may hold one.

mod support;

use base64::Engine;
use kube::api::Api;
use serde_json::json;
use support::metrics::{installed, scrape};
use support::{Repo, Running, controller_command, tether};
use tether_controller::api::Application;
use tether_testkit::{Receiver, application, free_port};

const PLANTED: [&str; 5] = [
    "planted-stringdata-7Qx2",
    "planted-data-Lm9v",
    "planted-generator-Zr4k",
    "planted-helm-Wp8s",
    "planted-drift-Hn3c",
];

fn b64(text: &str) -> String {
    base64::engine::general_purpose::STANDARD.encode(text)
}

fn repository() -> Repo {
    let repo = Repo::new();
    let files = vec![
        (
            "plain/secret.yaml".to_string(),
            format!(
                "apiVersion: v1\nkind: Secret\nmetadata:\n  name: plain\nstringData:\n  password: {}\ndata:\n  token: {}\n",
                PLANTED[0],
                b64(PLANTED[1])
            ),
        ),
        (
            "plain/settings.yaml".to_string(),
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\ndata:\n  greeting: hello\n"
                .to_string(),
        ),
        (
            "kustomized/kustomization.yaml".to_string(),
            format!(
                "secretGenerator:\n- name: generated\n  literals:\n  - password={}\ngeneratorOptions:\n  disableNameSuffixHash: true\n",
                PLANTED[2]
            ),
        ),
        (
            "charted/Chart.yaml".to_string(),
            "apiVersion: v2\nname: charted\nversion: 0.1.0\n".to_string(),
        ),
        (
            "charted/values.yaml".to_string(),
            format!("password: {}\n", PLANTED[3]),
        ),
        (
            "charted/templates/secret.yaml".to_string(),
            "apiVersion: v1\nkind: Secret\nmetadata:\n  name: charted\nstringData:\n  password: {{ .Values.password }}\n"
                .to_string(),
        ),
    ];
    repo.commit(&files, "secrets everywhere");
    repo
}

#[tokio::test]
async fn no_planted_secret_value_shows_in_any_log_status_event_cli_output_metric_or_notification() {
    let (ns, token) = installed("leak").await;
    let repo = repository();
    let receiver = Receiver::ok();
    let port = free_port();
    let log = ns.cache_dir().with_extension("log");
    let addr = format!("127.0.0.1:{port}");
    let hook = receiver.url("/hook");
    let (mut command, cache) = controller_command(
        &ns,
        &ns,
        "leak",
        30,
        &["--http-addr", &addr, "--notify-webhook", &hook],
    );
    let log_file = std::fs::File::create(&log).unwrap();
    command
        .env("TETHER_LOG", "debug")
        .stdout(log_file.try_clone().unwrap())
        .stderr(log_file);
    let _controller = Running {
        child: command.spawn().unwrap(),
        leftovers: vec![cache],
    };
    for (name, renderer) in [
        ("plain", json!({"directory": {}})),
        ("kustomized", json!({"kustomize": {}})),
        ("charted", json!({"helm": {}})),
    ] {
        // The kustomized app keeps its drift (self-heal off): a drift left
        // in place is reported in status, by `tether drift` and notified.
        application(name, &ns.name, &repo.url(), name)
            .renderer(renderer)
            .sync_policy(json!({"selfHeal": name != "kustomized"}))
            .apply(&ns.client)
            .await;
    }
    let apps: Api<Application> = ns.api();
    for name in ["plain", "kustomized", "charted"] {
        tether_testkit::status_of(&apps, name, "Synced", |s| {
            s.sync.status.as_str() == "Synced"
        })
        .await;
    }

    // Drift: someone writes another value into the Secrets; Tether heals
    // the one whose app self-heals and reports the other.
    let overwrite = |secret: &str| {
        ns.kubectl_ok(&[
            "patch",
            secret,
            "-p",
            &format!(r#"{{"stringData":{{"password":"{}"}}}}"#, PLANTED[4]),
        ]);
    };
    overwrite("secret/plain");
    tether_testkit::eventually("the Secret healed", || async {
        (ns.jsonpath("secret/plain", "{.data.password}") == b64(PLANTED[0])).then_some(())
    })
    .await;
    tether_testkit::status_of(&apps, "plain", "the drift recorded", |s| {
        !s.last_drift.is_empty() || !s.drift.is_empty()
    })
    .await;
    overwrite("secret/generated");
    tether_testkit::status_of(&apps, "kustomized", "the drift left in place", |s| {
        !s.drift.is_empty()
    })
    .await;
    receiver.wait_for(1).await;

    let mut haystacks: Vec<(String, String)> = Vec::new();
    let mut cli = |label: &str, args: &[&str]| {
        let output = tether(&ns, args);
        haystacks.push((
            format!("tether {label}"),
            format!(
                "{}{}",
                String::from_utf8_lossy(&output.stdout),
                String::from_utf8_lossy(&output.stderr)
            ),
        ));
    };
    cli("status", &["status", "-n", &ns.name]);
    cli("status plain", &["status", "plain", "-n", &ns.name]);
    cli("diff plain", &["diff", "plain", "-n", &ns.name]);
    cli("drift plain", &["drift", "plain", "-n", &ns.name]);
    cli("drift kustomized", &["drift", "kustomized", "-n", &ns.name]);
    cli("diff kustomized", &["diff", "kustomized", "-n", &ns.name]);
    cli(
        "sync --dry-run",
        &["sync", "plain", "--dry-run", "-n", &ns.name],
    );
    cli(
        "app get",
        &["app", "get", "plain", "-n", &ns.name, "-o", "yaml"],
    );
    let plain = repo.root().join("plain");
    let charted = repo.root().join("charted");
    cli(
        "render plain",
        &["render", "--path", plain.to_str().unwrap()],
    );
    cli(
        "render chart",
        &["render", "--path", charted.to_str().unwrap(), "-o", "json"],
    );
    for kind in ["applications", "events", "configmaps"] {
        haystacks.push((
            format!("kubectl get {kind}"),
            ns.kubectl_ok(&["get", kind, "-o", "yaml"]),
        ));
    }
    let metrics = scrape(port, Some(&token)).unwrap();
    haystacks.push(("metrics".into(), metrics.body));
    for request in receiver.requests() {
        haystacks.push((
            format!("notification {}", request.target),
            String::from_utf8_lossy(&request.body).into_owned(),
        ));
    }
    haystacks.push((
        "controller log".into(),
        std::fs::read_to_string(&log).unwrap(),
    ));

    let mut found = Vec::new();
    for planted in PLANTED {
        for needle in [planted.to_string(), b64(planted)] {
            for (label, text) in &haystacks {
                if text.contains(&needle) {
                    found.push(format!("{needle:?} in {label}"));
                }
            }
        }
    }
    let searched: usize = haystacks.iter().map(|(_, text)| text.len()).sum();
    println!(
        "searched {} outputs ({searched} bytes) for {} values, plain and base64",
        haystacks.len(),
        PLANTED.len()
    );
    assert!(
        !receiver.requests().is_empty() && haystacks.len() > 10,
        "the scan read too little to mean anything"
    );
    assert!(
        found.is_empty(),
        "secret values leaked:\n{}",
        found.join("\n")
    );
}
