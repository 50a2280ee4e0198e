//! The break-glass audit log under attack, as the security review (issue
//! 12) attacked it, against a real kube-apiserver: the controller runs
//! with its own namespace (`ctl`, where the audit records live) and
//! watches a tenant's namespace (`ns`, where the app and its windows are).
//! A tenant is a minted user with the `edit` role in `ns` only.

mod support;

use std::path::PathBuf;
use std::process::Output;
use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::ResourceExt;
use kube::api::{DeleteParams, PostParams};
use serde_json::json;
use support::break_glass::{
    Setup, open_in_force, open_window, opening, refused, restart, setup, wait_for_events,
    window_where,
};
use support::{Repo, create_app, status_where, web};
use tether_controller::api::BreakGlass;
use tether_controller::api::break_glass::AuditChainStatus;
use tether_controller::break_glass::audit::{
    self, MAC_ANNOTATION, RECORD_KEY, WINDOW_ANNOTATION, WINDOW_UID_LABEL,
};
use tether_controller::break_glass::request;
use tether_core::audit::{ChainState, chain_digest};
use tether_core::window::DEFAULT_MAX_TTL;
use tether_testkit::{TestNamespace, eventually};

async fn recorded(ns: &TestNamespace, name: &str, count: u64) -> BreakGlass {
    window_where(ns, name, &format!("{count} change(s) recorded"), |w| {
        w.status.as_ref().is_some_and(|s| s.record_count == count)
    })
    .await
}

/// Scales Deployment `web` to `replicas` inside window `name`; the window
/// once it holds `count` records.
async fn scaled(ns: &TestNamespace, name: &str, replicas: u32, count: u64) -> BreakGlass {
    ns.kubectl_ok(&["scale", "deployment/web", &format!("--replicas={replicas}")]);
    recorded(ns, name, count).await
}

/// A synced app in its own namespace (see [`setup`]) with a ten-minute
/// window open over all of it; the window's name.
async fn with_window(prefix: &str) -> (Setup, String) {
    let setup = setup(prefix, DEFAULT_MAX_TTL).await;
    let name = open_window(&setup.ns).await;
    (setup, name)
}

/// The controller's verdict once it reaches `state`.
async fn verdict(ns: &TestNamespace, name: &str, state: &str) -> AuditChainStatus {
    verdict_on(ns, name, state, |_| true).await
}

/// The controller's verdict once it reaches `state` with `records` in the chain.
async fn verdict_of(ns: &TestNamespace, name: &str, state: &str, records: u64) -> AuditChainStatus {
    verdict_on(ns, name, state, |c| c.records == records).await
}

async fn verdict_on(
    ns: &TestNamespace,
    name: &str,
    state: &str,
    check: impl Fn(&AuditChainStatus) -> bool,
) -> AuditChainStatus {
    let window = window_where(ns, name, &format!("the audit log {state}"), |w| {
        w.status
            .as_ref()
            .and_then(|s| s.audit_chain.as_ref())
            .is_some_and(|c| c.state == state && check(c))
    })
    .await;
    window.status.unwrap().audit_chain.unwrap()
}

/// A ConfigMap dressed as an audit record of `window`.
fn fake_record(window: &BreakGlass, name: &str, text: &str, seal: &str) -> ConfigMap {
    serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": name,
            "labels": {WINDOW_UID_LABEL: window.uid().unwrap()},
            "annotations": {MAC_ANNOTATION: seal,
                WINDOW_ANNOTATION: format!("{}/{}", window.namespace().unwrap(), window.name_any())}},
        "immutable": true,
        "data": {RECORD_KEY: text}
    }))
    .unwrap()
}

fn kubectl_as(user: &PathBuf, namespace: &str, args: &[&str], stdin: Option<&str>) -> Output {
    use std::io::Write;
    let mut child = std::process::Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(user)
        .args(["-n", namespace])
        .args(args)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("kubectl is installed");
    let mut input = child.stdin.take().unwrap();
    input
        .write_all(stdin.unwrap_or_default().as_bytes())
        .unwrap();
    drop(input);
    child.wait_with_output().unwrap()
}

#[tokio::test]
async fn an_audit_record_with_an_overflowing_sequence_does_not_crash_the_controller() {
    let mut setup = setup("bga-overflow", DEFAULT_MAX_TTL).await;
    let (ns, ctl) = (&setup.ns, &setup.ctl);
    let window = open_in_force(
        ns,
        opening(ns, &["Deployment/web"], Duration::from_secs(600)),
    )
    .await;
    let name = window.name_any();
    let window = scaled(ns, &name, 3, 1).await;

    // The review's record: sequence u64::MAX, under the name the next
    // record will want. In the window's namespace the admission policy
    // refuses it, even to a cluster administrator…
    let text = json!({"sequence": u64::MAX, "previousDigest": ""}).to_string();
    let squat = format!("audit-{}-00002", window.uid().unwrap());
    let evil = fake_record(&window, &squat, &text, "00");
    let in_tenant = ns.api::<ConfigMap>();
    let error = in_tenant
        .create(&PostParams::default(), &evil)
        .await
        .unwrap_err();
    assert!(
        error.to_string().contains("in its own namespace only"),
        "{error}"
    );
    // …and where records live only an administrator can put it.
    let in_controller = ctl.api::<ConfigMap>();
    in_controller
        .create(&PostParams::default(), &evil)
        .await
        .unwrap();

    // A restart reads the log again; the controller keeps serving.
    restart(&mut setup, 2).await;
    let (ns, ctl) = (&setup.ns, &setup.ctl);
    ns.kubectl_ok(&[
        "patch",
        "configmap/settings",
        "-p",
        r#"{"data":{"greeting":"outside the window"}}"#,
    ]);
    eventually("the change outside the window reverted", || async {
        (ns.jsonpath("configmap/settings", "{.data.greeting}") == "hello").then_some(())
    })
    .await;
    // The window keeps recording, around the squatted name.
    let window = scaled(ns, &name, 4, 2).await;
    let second = &window.status.as_ref().unwrap().records[1].audit;
    assert!(second.starts_with(&format!("{squat}-")), "{second}");
    // And the planted record is reported, by name, with a warning event.
    let verdict = verdict(ns, &name, "Forged").await;
    assert_eq!(verdict.namespace, ctl.name);
    assert!(verdict.message.contains(&squat), "{}", verdict.message);
    wait_for_events(ns, &name, &["AuditLogBroken"]).await;
}

#[tokio::test]
async fn a_deleted_audit_record_is_reported_as_a_gap() {
    let (setup, name) = with_window("bga-gap").await;
    let (ns, ctl) = (&setup.ns, &setup.ctl);
    for (count, replicas) in [(1, 3), (2, 4), (3, 5)] {
        scaled(ns, &name, replicas, count).await;
    }
    verdict_of(ns, &name, "Intact", 3).await;

    // Record 2 removed (as a cluster administrator: nobody else may).
    let window = recorded(ns, &name, 3).await;
    let second = window.status.as_ref().unwrap().records[1].audit.clone();
    ctl.api::<ConfigMap>()
        .delete(&second, &DeleteParams::default())
        .await
        .unwrap();
    let verdict = verdict(ns, &name, "Gap").await;
    assert_eq!(verdict.message, "Gap: record 2 is missing");
    // `tether break-glass show` sees it without the key, too.
    let window = recorded(ns, &name, 3).await;
    let checked = audit::check(&ns.client, &ctl.name, &window, None)
        .await
        .unwrap();
    assert_eq!(checked.report.state, ChainState::Gap);
    assert_eq!(checked.records.len(), 2);
    wait_for_events(ns, &name, &["AuditLogBroken"]).await;
}

#[tokio::test]
async fn a_forged_audit_record_with_a_recomputed_digest_is_reported() {
    let (setup, name) = with_window("bga-forged").await;
    let (ns, ctl) = (&setup.ns, &setup.ctl);
    let window = scaled(ns, &name, 3, 1).await;
    verdict_of(ns, &name, "Intact", 1).await;

    // A second record that chains to the first and carries the SHA-256
    // digest recomputed as the old chain needed: all a forger without the
    // key can do.
    let status = window.status.as_ref().unwrap();
    let text = serde_json::to_string_pretty(&json!({
        "sequence": 2, "window": name, "kind": "Emergency",
        "object": status.records[0].object, "fields": [],
        "recordedAt": "2026-12-03T00:00:00Z", "previousDigest": status.audit_digest,
    }))
    .unwrap();
    let seal = chain_digest(&status.audit_digest, text.as_bytes());
    let forged = format!("audit-{}-00002", window.uid().unwrap());
    ctl.api::<ConfigMap>()
        .create(
            &PostParams::default(),
            &fake_record(&window, &forged, &text, &seal),
        )
        .await
        .unwrap();
    let verdict = verdict(ns, &name, "Forged").await;
    assert!(
        verdict.message.contains(&format!("{forged} (sequence 2)"))
            && verdict.message.contains("forged or altered"),
        "{}",
        verdict.message
    );
}

#[tokio::test]
async fn a_tenant_cannot_create_or_change_audit_records() {
    let (setup, name) = with_window("bga-tenant").await;
    let (ns, ctl) = (&setup.ns, &setup.ctl);
    let window = scaled(ns, &name, 3, 1).await;
    let record = window.status.as_ref().unwrap().records[0].audit.clone();
    let text = json!({"sequence": 2, "previousDigest": ""}).to_string();
    let fake = serde_json::to_string(&fake_record(&window, "planted", &text, "00")).unwrap();

    // A tenant: edit in their namespace only.
    let mallory = ns.user_with_roles(&format!("mallory-{}", ns.name), &["edit"]);
    // An operator of the controller's namespace who is no cluster admin.
    let oscar = ctl.user_with_roles(&format!("oscar-{}", ns.name), &["edit"]);
    eventually("RBAC for the new users", || async {
        let tenant = kubectl_as(&mallory, &ns.name, &["get", "configmaps"], None);
        let operator = kubectl_as(&oscar, &ctl.name, &["get", "configmaps"], None);
        (tenant.status.success() && operator.status.success()).then_some(())
    })
    .await;

    // Creating a record where the tenant may write: refused by the policy.
    let stderr = refused(
        kubectl_as(&mallory, &ns.name, &["create", "-f", "-"], Some(&fake)),
        "a tenant's record in their namespace",
    );
    assert!(
        stderr.contains("ValidatingAdmissionPolicy 'tether-audit-records'")
            && stderr.contains("in its own namespace only"),
        "{stderr}"
    );
    // Anything in the controller's namespace: refused by RBAC.
    for args in [
        vec!["create", "-f", "-"],
        vec!["delete", "configmap", &record],
        vec!["get", "secret", "tether-audit-key"],
    ] {
        let stderr = refused(
            kubectl_as(&mallory, &ctl.name, &args, Some(&fake)),
            &format!("a tenant's {args:?} in the controller's namespace"),
        );
        assert!(stderr.contains("Forbidden"), "{stderr}");
    }
    // An operator who may write there still cannot plant, change or
    // remove a record: the policy.
    let stderr = refused(
        kubectl_as(&oscar, &ctl.name, &["create", "-f", "-"], Some(&fake)),
        "an operator's planted record",
    );
    assert!(
        stderr.contains("written by the Tether controller only"),
        "{stderr}"
    );
    let stderr = refused(
        kubectl_as(
            &oscar,
            &ctl.name,
            &[
                "annotate",
                "configmap",
                &record,
                "--overwrite",
                &format!("{MAC_ANNOTATION}=00"),
            ],
            None,
        ),
        "an operator's change to a record",
    );
    assert!(stderr.contains("never changed"), "{stderr}");
    let stderr = refused(
        kubectl_as(&oscar, &ctl.name, &["delete", "configmap", &record], None),
        "an operator's deletion of a record",
    );
    assert!(
        stderr.contains("deleted only with their namespace"),
        "{stderr}"
    );
    // Not even a cluster administrator changes one.
    let output = ctl.kubectl(&["label", "configmap", &record, "tampered=1"]);
    assert!(refused(output, "an administrator's change").contains("never changed"));
    // The log is as the controller wrote it.
    verdict_of(ns, &name, "Intact", 1).await;
    // Records go only with their namespace.
    setup.controller.abort();
    ctl.kubectl_ok(&["delete", "namespace", &ctl.name, "--wait=false"]);
    let records = ctl.api::<ConfigMap>();
    eventually("the record deleted with its namespace", || async {
        matches!(records.get_opt(&record).await, Ok(None)).then_some(())
    })
    .await;
}

#[tokio::test]
async fn records_written_before_keying_are_reported_as_unkeyed_and_the_chain_goes_on() {
    // Before keying, records lived in the window's namespace, often the
    // controller's own (tether-system is the CLI's default): here both are
    // one namespace, as they were.
    tether_testkit::log_file();
    let ns = TestNamespace::create("bga-legacy").await;
    let repo = Repo::new();
    repo.commit(&web(2, "hello"), "web");
    support::start_controller(&ns).await;
    let apps = create_app(&ns, &repo).await;
    status_where(&apps, "Synced", |s| {
        s.sync.status == "Synced" && !s.inventory.is_empty()
    })
    .await;
    let window = request::open(&ns.client, opening(&ns, &[], Duration::from_secs(600)))
        .await
        .unwrap();
    let name = window.name_any();
    verdict_of(&ns, &name, "Intact", 0).await;

    // Two records as the old controller wrote them: SHA-256 chained, in
    // the window's namespace, and the status that counted them.
    let configmaps = ns.api::<ConfigMap>();
    let mut digest = String::new();
    for sequence in 1..=2u64 {
        let text = serde_json::to_string_pretty(&json!({
            "sequence": sequence, "window": name, "kind": "Emergency",
            "object": {"group": "apps", "kind": "Deployment", "namespace": ns.name, "name": "web"},
            "fields": [], "recordedAt": "2026-12-01T00:00:00Z", "previousDigest": digest,
        }))
        .unwrap();
        digest = chain_digest(&digest, text.as_bytes());
        let old: ConfigMap = serde_json::from_value(json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": format!("{name}-audit-{sequence:05}"),
                "labels": {WINDOW_UID_LABEL: window.uid().unwrap()},
                "annotations": {audit::LEGACY_DIGEST_ANNOTATION: digest,
                                "tether.dev/break-glass": name}},
            "immutable": true, "data": {RECORD_KEY: text}
        }))
        .unwrap();
        configmaps
            .create(&PostParams::default(), &old)
            .await
            .unwrap();
    }
    let windows = ns.api::<BreakGlass>();
    windows
        .patch_status(
            &name,
            &kube::api::PatchParams::apply("tether-audit").force(),
            &kube::api::Patch::Apply(json!({
                "apiVersion": "tether.dev/v1alpha1", "kind": "BreakGlass",
                "status": {"recordCount": 2, "auditDigest": digest}
            })),
        )
        .await
        .unwrap();
    let verdict = verdict_of(&ns, &name, "Unkeyed", 2).await;
    assert!(
        verdict
            .message
            .contains("record(s) 1–2 predate keyed records"),
        "{}",
        verdict.message
    );

    // The next change is keyed and chained to the last old record.
    scaled(&ns, &name, 3, 3).await;
    let verdict = verdict_of(&ns, &name, "Unkeyed", 3).await;
    assert_eq!(
        verdict.message,
        "3 record(s), chain intact, every seal verified; record(s) 1–2 predate keyed records (SHA-256 chain only: proof against accidents, not forgery)"
    );
}
