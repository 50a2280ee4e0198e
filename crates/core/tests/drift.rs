//! Drift classification and the flap guard, on small hand-made observations.

use std::time::{Duration, SystemTime};

use serde_json::json;
use tether_core::ObjectRef;
use tether_core::attribution::Writer;
use tether_core::diff::Operation;
use tether_core::drift::{
    DriftKind, DriftedField, FlapGuard, FlapPolicy, HealVerdict, LiveState, Observation,
    WindowScope, classify, is_partial_sync,
};
use tether_core::tracking::AppRef;

fn web() -> ObjectRef {
    ObjectRef {
        group: "apps".into(),
        kind: "Deployment".into(),
        namespace: Some("shop".into()),
        name: "web".into(),
    }
}

fn at(seconds: u64) -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000 + seconds)
}

fn replicas_written_by(manager: Option<&str>) -> DriftedField {
    DriftedField {
        path: "spec.replicas".into(),
        pointer: "/spec/replicas".into(),
        desired: Some(json!(2)),
        live: Some(json!(5)),
        writer: manager.map(|manager| Writer {
            manager: manager.into(),
            operation: Operation::Update,
            subresource: Some("scale".into()),
            time: Some("2027-01-15T08:00:00Z".into()),
        }),
    }
}

/// A break-glass window of `app` over `objects` (all of the app when
/// empty), open from 0 s to 3600 s.
fn open_for_an_hour(app: AppRef, objects: Vec<ObjectRef>) -> WindowScope {
    WindowScope {
        app,
        objects,
        opened_at: at(0),
        expires_at: at(3600),
    }
}

fn observe<'a>(app: &'a AppRef, object: &'a ObjectRef, live: LiveState<'a>) -> Observation<'a> {
    Observation {
        app,
        object,
        live,
        applied: true,
        pending: false,
        interrupted_sync: false,
    }
}

#[test]
fn a_missing_object_tether_applied_is_accidental_and_one_never_applied_is_not_drift() {
    let (app, object) = (AppRef::new("tether", "shop"), web());
    let mut observation = observe(&app, &object, LiveState::Missing);
    assert_eq!(
        classify(&observation, &[], at(0)),
        Some(DriftKind::Accidental)
    );
    observation.applied = false;
    assert_eq!(classify(&observation, &[], at(0)), None);
}

#[test]
fn a_field_written_by_kubectl_scale_is_manual_drift() {
    let (app, object) = (AppRef::new("tether", "shop"), web());
    let fields = [replicas_written_by(Some("kubectl-scale"))];
    let observation = observe(&app, &object, LiveState::Present(&fields));
    assert_eq!(classify(&observation, &[], at(0)), Some(DriftKind::Manual));
}

#[test]
fn a_change_inside_an_open_break_glass_window_is_emergency_and_manual_after_it_expires() {
    let (app, object) = (AppRef::new("tether", "shop"), web());
    let fields = [replicas_written_by(Some("kubectl-scale"))];
    let observation = observe(&app, &object, LiveState::Present(&fields));
    let window = open_for_an_hour(app.clone(), vec![web()]);
    assert_eq!(
        classify(&observation, std::slice::from_ref(&window), at(60)),
        Some(DriftKind::Emergency)
    );
    assert_eq!(
        classify(&observation, &[window], at(3600)),
        Some(DriftKind::Manual)
    );
}

#[test]
fn a_window_for_another_object_or_app_does_not_cover_the_change() {
    let (app, object) = (AppRef::new("tether", "shop"), web());
    let fields = [replicas_written_by(Some("kubectl-scale"))];
    let observation = observe(&app, &object, LiveState::Present(&fields));
    let api = ObjectRef {
        name: "api".into(),
        ..web()
    };
    let other_object = open_for_an_hour(app.clone(), vec![api]);
    let other_app = open_for_an_hour(AppRef::new("tether", "billing"), vec![]);
    assert_eq!(
        classify(&observation, &[other_object, other_app], at(60)),
        Some(DriftKind::Manual)
    );
}

#[test]
fn differences_tether_itself_wrote_are_a_pending_sync_unless_the_sync_was_interrupted() {
    let (app, object) = (AppRef::new("tether", "shop"), web());
    let fields = [replicas_written_by(Some("tether"))];
    let mut observation = observe(&app, &object, LiveState::Present(&fields));
    observation.pending = true;
    assert_eq!(classify(&observation, &[], at(0)), None);
    observation.interrupted_sync = true;
    assert_eq!(
        classify(&observation, &[], at(0)),
        Some(DriftKind::Accidental)
    );
}

#[test]
fn a_field_nobody_owns_is_manual_unless_a_new_commit_explains_it() {
    let (app, object) = (AppRef::new("tether", "shop"), web());
    let fields = [replicas_written_by(None)];
    let mut observation = observe(&app, &object, LiveState::Present(&fields));
    assert_eq!(classify(&observation, &[], at(0)), Some(DriftKind::Manual));
    observation.pending = true;
    assert_eq!(classify(&observation, &[], at(0)), None);
}

#[test]
fn a_sync_is_partial_when_some_objects_are_at_the_new_revision_and_some_are_not() {
    assert!(is_partial_sync([Some("b"), Some("a"), None], "b"));
    assert!(!is_partial_sync([Some("b"), Some("b")], "b"));
    assert!(!is_partial_sync([Some("a"), None], "b"));
}

#[test]
fn a_writer_that_keeps_fighting_makes_tether_back_off_exponentially_and_names_it() {
    let mut guard = FlapGuard::new(FlapPolicy::default());
    let object = web();
    let decide = |guard: &mut FlapGuard, t| {
        guard.decide(&object, "spec.replicas", Some("hpa-controller"), at(t))
    };
    for t in [0, 10, 20] {
        assert_eq!(decide(&mut guard, t), HealVerdict::Heal, "revert at {t}s");
    }
    let HealVerdict::BackOff(first) = decide(&mut guard, 30) else {
        panic!("the fourth revert within the window must back off")
    };
    assert_eq!(first.until, at(90));
    assert_eq!(
        first.to_string(),
        "Deployment shop/web: fighting with `hpa-controller` over spec.replicas — \
         add an ignoreDifferences rule or stop the other writer"
    );
    assert!(
        matches!(decide(&mut guard, 60), HealVerdict::BackOff(_)),
        "still backing off"
    );
    assert_eq!(
        decide(&mut guard, 90),
        HealVerdict::Heal,
        "one more try after the back-off"
    );
    let HealVerdict::BackOff(second) = decide(&mut guard, 100) else {
        panic!("flapping again right after a back-off must back off longer")
    };
    assert_eq!((second.backoffs, second.until), (2, at(220)));
}

#[test]
fn a_field_left_alone_for_a_whole_window_starts_afresh() {
    let mut guard = FlapGuard::new(FlapPolicy::default());
    let object = web();
    for t in [0, 10, 20, 30] {
        guard.decide(&object, "spec.replicas", None, at(t));
    }
    for t in [1000, 1010, 1020] {
        assert_eq!(
            guard.decide(&object, "spec.replicas", None, at(t)),
            HealVerdict::Heal
        );
    }
    let HealVerdict::BackOff(fight) = guard.decide(&object, "spec.replicas", None, at(1030)) else {
        panic!("a new run of reverts backs off again")
    };
    assert_eq!(fight.backoffs, 1);
    assert!(
        fight
            .to_string()
            .contains("fighting with an unknown writer")
    );
}

#[test]
fn fights_are_tracked_per_field() {
    let mut guard = FlapGuard::new(FlapPolicy {
        max_reverts: 1,
        ..FlapPolicy::default()
    });
    let object = web();
    assert_eq!(
        guard.decide(&object, "spec.replicas", None, at(0)),
        HealVerdict::Heal
    );
    assert_eq!(
        guard.decide(&object, "metadata.labels.tier", None, at(1)),
        HealVerdict::Heal
    );
    assert!(matches!(
        guard.decide(&object, "spec.replicas", None, at(2)),
        HealVerdict::BackOff(_)
    ));
    guard.forget(&object);
    assert_eq!(
        guard.decide(&object, "spec.replicas", None, at(3)),
        HealVerdict::Heal
    );
}

#[test]
fn drift_kinds_serialize_in_the_words_they_print() {
    for kind in DriftKind::ALL {
        assert_eq!(serde_json::to_value(kind).unwrap(), json!(kind.to_string()));
    }
}
