use super::*;

fn rules(yaml: &str) -> Rules {
    serde_saphyr::from_str(yaml).expect("rules")
}

fn projects() -> Vec<(String, Rules)> {
    vec![
        (
            "platform".into(),
            rules(
                "applicationNamespaces: [platform]\nsourceRepos: ['**']\n\
                 destinationNamespaces: ['**']\nclusterResources: {allow: [{group: '*', kind: '*'}]}\n\
                 allowFileSources: true",
            ),
        ),
        (
            "team-a".into(),
            rules(
                "applicationNamespaces: [team-a, team-a-*]\n\
                 sourceRepos: ['https://git.example/team-a/*']",
            ),
        ),
    ]
}

fn object(group: &str, kind: &str, namespace: Option<&str>, name: &str) -> ObjectRef {
    ObjectRef {
        group: group.into(),
        kind: kind.into(),
        namespace: namespace.map(str::to_string),
        name: name.into(),
    }
}

fn source<'a>(namespace: &'a str, url: &'a str) -> AppSource<'a> {
    AppSource {
        namespace,
        repo_url: url,
        destination: namespace,
        cluster: None,
        verifies: false,
    }
}

fn name_of(membership: Membership<'_>) -> Option<&str> {
    match membership {
        Membership::Project { name, .. } => Some(name),
        Membership::Unrestricted => None,
    }
}

#[test]
fn a_membership_names_its_project() {
    let projects = projects();
    assert_eq!(
        project_of("team-a", None, &projects).unwrap().name(),
        Some("team-a")
    );
    assert_eq!(Membership::Unrestricted.name(), None);
}

#[test]
fn an_app_belongs_to_the_project_that_claims_its_namespace() {
    let projects = projects();
    let member = |ns, named| project_of(ns, named, &projects).map(name_of);
    assert_eq!(member("team-a", None), Ok(Some("team-a")));
    assert_eq!(member("team-a-dev", Some("team-a")), Ok(Some("team-a")));
    assert_eq!(member("platform", None), Ok(Some("platform")));
    // Nobody claims it and there is no Project `default`: unrestricted.
    assert_eq!(member("legacy", None), Ok(None));
    assert_eq!(member("legacy", Some(DEFAULT_PROJECT)), Ok(None));
}

#[test]
fn a_tenant_cannot_name_another_project_or_step_out_into_default() {
    let projects = projects();
    let refused = project_of("team-a", Some("platform"), &projects).unwrap_err();
    assert_eq!(
        refused.to_string(),
        "Project platform does not hold Applications of namespace team-a \
         (namespace team-a belongs to Project team-a)"
    );
    assert!(matches!(
        project_of("team-a", Some(DEFAULT_PROJECT), &projects),
        Err(Violation::NotAdmitted { .. })
    ));
    assert_eq!(
        project_of("team-a", Some("nope"), &projects)
            .unwrap_err()
            .to_string(),
        "Project nope does not exist"
    );
}

#[test]
fn a_default_project_locks_down_the_unclaimed_namespaces() {
    let mut projects = projects();
    projects.push((DEFAULT_PROJECT.into(), Rules::default()));
    let membership = project_of("legacy", None, &projects).unwrap();
    assert_eq!(name_of(membership), Some(DEFAULT_PROJECT));
    let violations = admit_source(membership, source("legacy", "https://git.example/x"));
    assert_eq!(
        violations[0].to_string(),
        "repository https://git.example/x is not allowed by Project default (sourceRepos: none)"
    );
}

#[test]
fn two_projects_claiming_one_namespace_make_the_app_name_one() {
    let mut projects = projects();
    projects.push((
        "team-a-too".into(),
        rules("applicationNamespaces: ['team-*']"),
    ));
    let refused = project_of("team-a", None, &projects).unwrap_err();
    assert_eq!(
        refused.to_string(),
        "namespace team-a is claimed by Projects team-a, team-a-too; name one in spec.project"
    );
    let named = project_of("team-a", Some("team-a-too"), &projects).unwrap();
    assert_eq!(name_of(named), Some("team-a-too"));
}

#[test]
fn a_repository_outside_the_projects_patterns_is_refused_naming_the_rule() {
    let projects = projects();
    let team_a = project_of("team-a", None, &projects).unwrap();
    let ok = |url| admit_source(team_a, source("team-a", url)).is_empty();
    assert!(ok("https://git.example/team-a/shop"));
    assert!(ok("https://git.example/team-a/shop.git"));
    assert!(ok("https://git.example/team-a/shop/"));
    assert!(!ok("https://git.example/team-b/shop"));
    assert!(!ok("https://git.example/team-a/x/shop"));
    let violations = admit_source(team_a, source("team-a", "https://git.example/team-b/shop"));
    assert_eq!(
        violations[0].to_string(),
        "repository https://git.example/team-b/shop is not allowed by Project team-a \
         (sourceRepos: https://git.example/team-a/*)"
    );
}

#[test]
fn dot_segments_cannot_walk_out_of_an_allowed_prefix() {
    let projects = projects();
    let team_a = project_of("team-a", None, &projects).unwrap();
    let violations = admit_source(
        team_a,
        source("team-a", "https://git.example/team-a/../team-b/shop"),
    );
    assert!(matches!(violations[0], Violation::DotSegments { .. }));
}

#[test]
fn local_repositories_need_the_project_to_allow_them() {
    let projects = projects();
    let team_a = project_of("team-a", None, &projects).unwrap();
    for url in [
        "file:///var/cache/tether/team-b-1234.git",
        "/srv/git/x",
        "./x",
    ] {
        let violations = admit_source(team_a, source("team-a", url));
        assert!(
            matches!(violations[0], Violation::FileSource { .. }),
            "{url}: {violations:?}"
        );
    }
    assert!(!is_local("git@git.example:team-a/shop.git"));
    assert!(!is_local("ssh://git@git.example/team-a/shop"));
    let platform = project_of("platform", None, &projects).unwrap();
    assert!(admit_source(platform, source("platform", "file:///srv/git/platform")).is_empty());
}

#[test]
fn the_destination_defaults_to_the_apps_own_namespace() {
    let projects = projects();
    let team_a = project_of("team-a", None, &projects).unwrap();
    let mut app = source("team-a", "https://git.example/team-a/shop");
    app.destination = "team-b";
    assert_eq!(
        admit_source(team_a, app)[0].to_string(),
        "destination namespace team-b is not allowed by Project team-a \
         (destinationNamespaces: team-a only (the Application's own))"
    );
}

#[test]
fn a_project_can_require_signed_commits() {
    let projects = vec![(
        "signed".to_string(),
        rules("applicationNamespaces: [s]\nsourceRepos: ['**']\nrequireVerification: true"),
    )];
    let signed = project_of("s", None, &projects).unwrap();
    let mut app = source("s", "https://git.example/s");
    assert!(matches!(
        admit_source(signed, app)[0],
        Violation::Verification { .. }
    ));
    app.verifies = true;
    assert!(admit_source(signed, app).is_empty());
}

#[test]
fn tenants_get_no_cluster_scoped_kinds_and_only_their_namespace() {
    let projects = projects();
    let team_a = project_of("team-a", None, &projects).unwrap();
    let binding = object(
        "rbac.authorization.k8s.io",
        "ClusterRoleBinding",
        None,
        "root",
    );
    let elsewhere = object("", "ConfigMap", Some("team-b"), "settings");
    let own = object("apps", "Deployment", Some("team-a"), "web");
    let violations = admit_objects(team_a, "team-a", [&binding, &elsewhere, &own]);
    let messages: Vec<String> = violations.iter().map(ToString::to_string).collect();
    assert_eq!(
        messages,
        [
            "ClusterRoleBinding root: cluster-scoped kind rbac.authorization.k8s.io/ClusterRoleBinding \
             is not allowed by Project team-a (clusterResources.allow: none)",
            "ConfigMap team-b/settings: namespace team-b is not allowed by Project team-a \
             (destinationNamespaces: team-a only (the Application's own))",
        ]
    );
}

#[test]
fn denied_kinds_win_over_allowed_ones() {
    let projects = vec![(
        "p".to_string(),
        rules(
            "applicationNamespaces: [p]\nnamespacedResources:\n  deny: [{group: '', kind: Secret}]\n\
             clusterResources:\n  allow: [{group: '*', kind: '*'}]\n  deny: [{group: rbac.authorization.k8s.io, kind: '*'}]",
        ),
    )];
    let p = project_of("p", None, &projects).unwrap();
    let secret = object("", "Secret", Some("p"), "s");
    let role = object("rbac.authorization.k8s.io", "ClusterRole", None, "r");
    let namespace = object("", "Namespace", None, "n");
    let messages: Vec<String> = admit_objects(p, "p", [&secret, &role, &namespace])
        .iter()
        .map(ToString::to_string)
        .collect();
    assert_eq!(
        messages,
        [
            "Secret p/s: kind Secret is denied by Project p (namespacedResources.deny: Secret)",
            "ClusterRole r: kind rbac.authorization.k8s.io/ClusterRole is denied by Project p \
             (clusterResources.deny: rbac.authorization.k8s.io/*)",
        ]
    );
}

#[test]
fn an_unrestricted_app_is_never_refused() {
    let binding = object(
        "rbac.authorization.k8s.io",
        "ClusterRoleBinding",
        None,
        "root",
    );
    assert!(admit_objects(Membership::Unrestricted, "x", [&binding]).is_empty());
    assert!(admit_source(Membership::Unrestricted, source("x", "file:///x")).is_empty());
}

#[test]
fn a_project_lets_its_apps_deploy_only_to_the_clusters_it_lists() {
    let rules = Rules {
        application_namespaces: vec!["team-a".into()],
        source_repos: vec!["https://git.example/*".into()],
        destination_clusters: vec!["staging-*".into()],
        ..Rules::default()
    };
    let member = Membership::Project {
        name: "team-a",
        rules: &rules,
    };
    let on = |cluster| AppSource {
        cluster,
        ..source("team-a", "https://git.example/shop")
    };
    assert!(admit_source(member, on(None)).is_empty());
    assert!(admit_source(member, on(Some("staging-eu"))).is_empty());
    let refused = admit_source(member, on(Some("prod")));
    assert_eq!(
        refused.iter().map(ToString::to_string).collect::<Vec<_>>(),
        [
            "destination cluster prod is not allowed by Project team-a (destinationClusters: staging-*)"
        ]
    );
    let none = Rules {
        destination_clusters: Vec::new(),
        ..rules.clone()
    };
    let member = Membership::Project {
        name: "team-a",
        rules: &none,
    };
    assert_eq!(
        admit_source(member, on(Some("prod")))[0].to_string(),
        "destination cluster prod is not allowed by Project team-a (destinationClusters: none: only the cluster Tether runs in)"
    );
}

#[test]
fn a_projects_sync_windows_apply_to_the_apps_its_patterns_or_its_selector_name() {
    let window = |applications: &[&str], selector: &[(&str, &str)]| ProjectWindow {
        window: crate::sync_window::WindowSpec {
            kind: "deny".into(),
            schedule: "0 18 * * 5".into(),
            duration: "62h".into(),
            time_zone: Some("Europe/Berlin".into()),
            manual_sync: false,
        },
        applications: applications.iter().map(|a| a.to_string()).collect(),
        selector: (!selector.is_empty()).then(|| super::WindowSelector {
            match_labels: labels(selector),
        }),
    };
    let rules = Rules {
        sync_windows: vec![
            window(&["shop-*"], &[]),
            window(&[], &[]),
            window(&[], &[("tier", "frontend"), ("env", "prod")]),
            window(&["billing"], &[("freeze", "yes")]),
        ],
        ..Rules::default()
    };
    let none = labels(&[]);
    assert_eq!(rules.windows_for("shop-web", &none).len(), 2);
    assert_eq!(rules.windows_for("billing", &none).len(), 2);
    assert_eq!(rules.windows_for("other", &none).len(), 1);
    let front = labels(&[("tier", "frontend"), ("env", "prod"), ("team", "a")]);
    assert_eq!(rules.windows_for("other", &front).len(), 2);
    let staging = labels(&[("tier", "frontend"), ("env", "staging")]);
    assert_eq!(rules.windows_for("other", &staging).len(), 1);
    assert_eq!(
        rules
            .windows_for("other", &labels(&[("freeze", "yes")]))
            .len(),
        2
    );
    assert_eq!(
        rules.windows_for("billing", &none)[0].kind,
        crate::sync_window::WindowKind::Deny
    );
}

fn labels(pairs: &[(&str, &str)]) -> std::collections::BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}
