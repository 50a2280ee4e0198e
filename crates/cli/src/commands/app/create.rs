//! `tether app create`: an Application from flags. Without `--renderer`
//! the renderer is detected from the files at `--path` in the repository
//! at `--revision`, as Argo CD does it (see `tether_source::detect`).

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{Context, bail};
use kube::api::{Api, Patch, PatchParams};
use kube::{Resource, ResourceExt};
use serde_json::{Map, Value, json};
use tether_controller::api::Application;
use tether_core::Action;
use tether_core::tracking::FIELD_MANAGER;
use tether_source::detect::RendererKind;
use tether_source::{Renderer, Source};

use super::super::out::{outln, print_as};

#[derive(Debug, clap::Args)]
pub struct CreateArgs {
    pub name: String,
    /// Git repository URL; with --chart, a Helm repository
    /// (`https://…` serving index.yaml) or an OCI path (`oci://…`).
    #[arg(long)]
    pub repo: String,
    /// A chart of the Helm repository or OCI path given as --repo
    /// (rendered with Helm; the --helm-* flags apply).
    #[arg(long)]
    pub chart: Option<String>,
    /// The chart's version: exact, a range (`1.2.x`), or for OCI a digest
    /// (default: the highest stable).
    #[arg(long = "version", value_name = "VERSION", requires = "chart")]
    pub chart_version: Option<String>,
    /// Plain HTTP to an oci:// registry.
    #[arg(long, requires = "chart")]
    pub insecure: bool,
    /// Branch, tag, semver range or commit (default: the remote's HEAD).
    #[arg(long, default_value = "")]
    pub revision: String,
    /// Directory inside the repository.
    #[arg(long, default_value = "")]
    pub path: String,
    /// Namespace for objects that do not name one.
    #[arg(long)]
    pub dest_namespace: String,
    /// A cluster registered with `tether cluster add` (default: the
    /// cluster Tether runs in).
    #[arg(long, value_name = "NAME")]
    pub dest_cluster: Option<String>,
    /// directory | kustomize | helm | jsonnet. Default: detected from the
    /// files at --path at --revision (kustomization.yaml, kustomization.yml
    /// or Kustomization: kustomize; Chart.yaml: helm; any *.jsonnet:
    /// jsonnet; else directory).
    #[arg(long, value_parser = crate::commands::word::<RendererKind>())]
    pub renderer: Option<RendererKind>,
    /// Helm: a values file, relative to the chart directory (repeatable, in order).
    #[arg(long = "helm-values", value_name = "FILE")]
    pub helm_values: Vec<String>,
    /// Helm: a value, KEY=VALUE with a dotted KEY (`image.tag=1.2`); one
    /// per flag, repeatable; applied after the values files. `true`,
    /// `false`, `null` and integers are typed, as `helm --set` types them.
    #[arg(long = "helm-set", value_name = "KEY=VALUE")]
    pub helm_set: Vec<String>,
    /// Helm: the release name (default: the last component of --path).
    #[arg(long, value_name = "NAME")]
    pub helm_release_name: Option<String>,
    /// Jsonnet: the entry file, relative to --path (default main.jsonnet,
    /// or the only *.jsonnet file when detected).
    #[arg(long, value_name = "FILE")]
    pub jsonnet_main: Option<String>,
    /// Jsonnet: a top-level argument NAME=VALUE, as a string (repeatable).
    #[arg(long = "jsonnet-tla", value_name = "NAME=VALUE")]
    pub jsonnet_tla: Vec<String>,
    /// Jsonnet: an external variable (`std.extVar`) NAME=VALUE, as a string (repeatable).
    #[arg(long = "jsonnet-ext-var", value_name = "NAME=VALUE")]
    pub jsonnet_ext_var: Vec<String>,
    /// Revert changes made outside Git (the default); `--self-heal=false`
    /// only reports them.
    #[arg(long, value_name = "BOOL", num_args = 0..=1, require_equals = true,
          default_missing_value = "true", conflicts_with = "no_self_heal")]
    pub self_heal: Option<bool>,
    /// Report drift but do not revert it (same as --self-heal=false).
    #[arg(long)]
    pub no_self_heal: bool,
    /// Delete objects removed from Git.
    #[arg(long)]
    pub prune: bool,
    /// Create the destination namespace if it does not exist.
    #[arg(long)]
    pub create_namespace: bool,
    /// How often to look for new commits without a webhook (`10s`, `3m`,
    /// `1h`; default 3m, or `tether run --poll-interval`).
    #[arg(long, value_name = "DURATION", value_parser = duration)]
    pub interval: Option<String>,
    /// Raise `NotSyncedTooLong` when the app has not been Synced for this
    /// long (`90s`, `15m`, `1h`; default `tether run --alert-not-synced-after`).
    #[arg(long, value_name = "DURATION", value_parser = duration)]
    pub alert_not_synced_after: Option<String>,
    /// The Secret (in the Application's namespace, labelled
    /// `tether.dev/secret-type=repository`) with the repository's credentials.
    #[arg(long)]
    pub secret: Option<String>,
    /// The ServiceAccount (in the Application's namespace) whose rights the
    /// app's changes are made with (`spec.serviceAccountName`).
    #[arg(long, value_name = "NAME")]
    pub service_account: Option<String>,
    /// The Project that holds the app (`spec.project`; default: the one
    /// that claims its namespace).
    #[arg(long, value_name = "NAME")]
    pub project: Option<String>,
    /// Print the Application (as -o says, default YAML) instead of creating it.
    #[arg(long)]
    pub dry_run: bool,
}

/// Creates (or updates) the Application, or prints it with `--dry-run`.
/// `output` is `-o`: the format to print the Application in.
pub async fn run(
    create: CreateArgs,
    namespace: &str,
    kubeconfig: Option<&Path>,
    output: Option<&str>,
) -> anyhow::Result<()> {
    let what = format!("Application {namespace}/{}", create.name);
    // The cluster is needed for the Secret a detection reads with, and
    // for the create itself; a dry run without --secret needs none.
    let client = match (create.dry_run, &create.secret) {
        (true, None) => None,
        _ => Some(tether_cluster::connect(kubeconfig).await?),
    };
    let renderer = match (create.renderer, &create.chart) {
        (Some(kind), _) => Renderer::of_kind(kind),
        // A chart is rendered with Helm; nothing to detect.
        (None, Some(_)) => Renderer::of_kind(RendererKind::Helm),
        (None, None) => detect(&create, namespace, client.as_ref()).await?,
    };
    let renderer = configure(renderer, &create)?;
    let manifest = manifest(&create, namespace, &renderer)?;
    // What the API server will read back: a flag this would lose is a bug.
    serde_json::from_value::<Application>(manifest.clone())
        .with_context(|| format!("{what}: the Application built from the flags is not valid"))?;
    if create.dry_run {
        print_as(&manifest, output.unwrap_or("yaml"))?;
        return Ok(());
    }
    let Some(client) = client else {
        unreachable!("a create that is not a dry run has connected")
    };
    let apps: Api<Application> = Api::namespaced(client, namespace);
    let before = apps.get_opt(&create.name).await.context(what.clone())?;
    let after = apps
        .patch(
            &create.name,
            &PatchParams::apply(FIELD_MANAGER),
            &Patch::Apply(&manifest),
        )
        .await
        .context(what.clone())?;
    match output {
        Some(format) => print_as(&after, format)?,
        None => {
            let version = |app: &Application| app.resource_version().unwrap_or_default();
            let action =
                Action::of_apply(before.as_ref().map(version).as_deref(), &version(&after));
            outln!("{what} {action}");
        }
    }
    Ok(())
}

/// The renderer the files at `--path` need, fetched from the repository
/// at `--revision` with the CLI's Git cache; said on stderr.
async fn detect(
    create: &CreateArgs,
    namespace: &str,
    client: Option<&kube::Client>,
) -> anyhow::Result<Renderer> {
    let source = Source {
        repo_url: create.repo.clone(),
        revision: create.revision.clone(),
        path: create.path.clone(),
        secret_ref: create
            .secret
            .clone()
            .map(|name| tether_source::spec::SecretRef { name }),
        ..Default::default()
    };
    let credentials = match client {
        Some(client) => tether_controller::credentials::read(client, namespace, &source).await?,
        None => None,
    };
    let repositories = super::super::local::repositories();
    let detected = tokio::task::spawn_blocking({
        let source = source.clone();
        move || repositories.detect(&source, credentials.as_ref())
    })
    .await?
    .map_err(|error| {
        // A repository only the cluster reaches can still be created,
        // with its renderer named.
        let hint = match error.is_retryable() {
            true => "; give --renderer to create it without reading it here",
            false => "",
        };
        anyhow::anyhow!(
            "reading {} to detect its renderer: {error}{hint}",
            place(&source)
        )
    })?;
    let renderer = detected.renderer;
    let commit = &detected.commit[..detected.commit.len().min(12)];
    match &detected.detection.file {
        Some(file) => eprintln!(
            "renderer: {} (detected from {} at {commit})",
            renderer.name(),
            in_path(&create.path, file)
        ),
        None => eprintln!(
            "renderer: directory (detected: no kustomization, Chart.yaml or *.jsonnet in {} at {commit})",
            place(&source)
        ),
    }
    Ok(renderer)
}

/// `repo` and `path`, for messages.
fn place(source: &Source) -> String {
    match source.path.trim_matches('/') {
        "" => source.repo_url.clone(),
        path => format!("{} path {path}", source.repo_url),
    }
}

fn in_path(path: &str, file: &str) -> String {
    match path.trim_matches('/') {
        "" => file.to_string(),
        path => format!("{path}/{file}"),
    }
}

/// `renderer` with the options the flags give; an error for a flag of
/// another renderer than this one.
fn configure(renderer: Renderer, create: &CreateArgs) -> anyhow::Result<Renderer> {
    let helm_flags = [
        ("--helm-values", !create.helm_values.is_empty()),
        ("--helm-set", !create.helm_set.is_empty()),
        ("--helm-release-name", create.helm_release_name.is_some()),
    ];
    let jsonnet_flags = [
        ("--jsonnet-main", create.jsonnet_main.is_some()),
        ("--jsonnet-tla", !create.jsonnet_tla.is_empty()),
        ("--jsonnet-ext-var", !create.jsonnet_ext_var.is_empty()),
    ];
    let (own, foreign): (&str, Vec<&str>) = match &renderer {
        Renderer::Helm(_) => ("helm", given(&jsonnet_flags)),
        Renderer::Jsonnet(_) => ("jsonnet", given(&helm_flags)),
        other => (
            other.name(),
            [given(&helm_flags), given(&jsonnet_flags)].concat(),
        ),
    };
    if let Some(flag) = foreign.first() {
        let how = match create.renderer {
            Some(_) => "given with --renderer",
            None => "detected; give --renderer to choose another",
        };
        bail!("{flag} does not apply to the {own} renderer ({how})");
    }
    Ok(match renderer {
        Renderer::Helm(mut options) => {
            // `.Release.Namespace` is the destination, as Argo CD has it
            // (else helm says `default`).
            options.namespace.clone_from(&create.dest_namespace);
            options.value_files.clone_from(&create.helm_values);
            if let Some(name) = &create.helm_release_name {
                options.release_name.clone_from(name);
            }
            if !create.helm_set.is_empty() {
                options.values = helm_values(&create.helm_set)?;
            }
            Renderer::Helm(options)
        }
        Renderer::Jsonnet(mut options) => {
            if let Some(main) = &create.jsonnet_main {
                options.main.clone_from(main);
            }
            options.tlas = pairs("--jsonnet-tla", &create.jsonnet_tla)?;
            options.ext_vars = pairs("--jsonnet-ext-var", &create.jsonnet_ext_var)?;
            Renderer::Jsonnet(options)
        }
        other => other,
    })
}

fn given<'a>(flags: &[(&'a str, bool)]) -> Vec<&'a str> {
    flags
        .iter()
        .filter(|(_, given)| *given)
        .map(|(flag, _)| *flag)
        .collect()
}

/// `NAME=VALUE` flags as a map.
fn pairs(flag: &str, given: &[String]) -> anyhow::Result<BTreeMap<String, String>> {
    let mut map = BTreeMap::new();
    for pair in given {
        let (name, value) = split_pair(flag, pair)?;
        map.insert(name.to_string(), value.to_string());
    }
    Ok(map)
}

fn split_pair<'a>(flag: &str, pair: &'a str) -> anyhow::Result<(&'a str, &'a str)> {
    match pair.split_once('=') {
        Some((name, value)) if !name.trim().is_empty() => Ok((name.trim(), value)),
        _ => bail!("{flag} {pair:?}: expected NAME=VALUE"),
    }
}

/// `--helm-set` values as one YAML document (the renderer's inline
/// values): dotted keys nest, and `true`, `false`, `null` and integers
/// are typed as `helm --set` types them.
fn helm_values(set: &[String]) -> anyhow::Result<String> {
    let mut root = Map::new();
    for pair in set {
        let (key, value) = split_pair("--helm-set", pair)?;
        if key.contains(['[', ']']) || key.split('.').any(str::is_empty) {
            bail!(
                "--helm-set {pair:?}: KEY must be dotted names (`image.tag`); \
                 for lists use a values file (--helm-values)"
            );
        }
        let names: Vec<&str> = key.split('.').collect();
        let (last, parents) = names.split_last().expect("split yields one name at least");
        let mut map = &mut root;
        for name in parents {
            let entry = map
                .entry(name.to_string())
                .or_insert_with(|| Value::Object(Map::new()));
            if !entry.is_object() {
                *entry = Value::Object(Map::new());
            }
            map = entry.as_object_mut().expect("made an object just above");
        }
        map.insert(last.to_string(), typed(value));
    }
    Ok(serde_saphyr::to_string(&Value::Object(root))?)
}

/// A `--helm-set` value as helm reads it.
fn typed(value: &str) -> Value {
    match value {
        "true" => Value::Bool(true),
        "false" => Value::Bool(false),
        "null" => Value::Null,
        _ => match value.parse::<i64>() {
            // helm keeps "007" a string: only a canonical integer is one.
            Ok(number) if number.to_string() == value => json!(number),
            _ => Value::String(value.to_string()),
        },
    }
}

/// The Application the flags describe: only what they say, so that a
/// server-side apply owns nothing more (defaults are the API's).
fn manifest(create: &CreateArgs, namespace: &str, renderer: &Renderer) -> anyhow::Result<Value> {
    let mut source = json!({"repoURL": create.repo});
    if let Some(chart) = &create.chart {
        source["chart"] = json!(chart);
        if let Some(version) = &create.chart_version {
            source["version"] = json!(version);
        }
        if create.insecure {
            source["insecure"] = json!(true);
        }
    }
    if !create.revision.is_empty() {
        source["revision"] = json!(create.revision);
    }
    if !create.path.is_empty() {
        source["path"] = json!(create.path);
    }
    source["renderer"] = serde_json::to_value(renderer)?;
    if let Some(secret) = &create.secret {
        source["secretRef"] = json!({"name": secret});
    }
    if let Some(interval) = &create.interval {
        source["interval"] = json!(interval);
    }
    let self_heal = create.self_heal.unwrap_or(!create.no_self_heal);
    let mut sync_policy = json!({"selfHeal": self_heal, "prune": create.prune});
    if create.create_namespace {
        sync_policy["createNamespace"] = json!(true);
    }
    if let Some(after) = &create.alert_not_synced_after {
        sync_policy["alertNotSyncedAfter"] = json!(after);
    }
    let mut app = json!({
        "apiVersion": Application::api_version(&()),
        "kind": Application::kind(&()),
        "metadata": {"name": create.name, "namespace": namespace},
        "spec": {
            "source": source,
            "destination": {"namespace": create.dest_namespace},
            "syncPolicy": sync_policy,
        }
    });
    if let Some(cluster) = &create.dest_cluster {
        app["spec"]["destination"]["cluster"] = json!(cluster);
    }
    if let Some(account) = &create.service_account {
        app["spec"]["serviceAccountName"] = json!(account);
    }
    if let Some(project) = &create.project {
        app["spec"]["project"] = json!(project);
    }
    Ok(app)
}

/// `--interval` and `--alert-not-synced-after`: a duration of whole seconds, minutes, hours or days, or a
/// sum of them (`90s`, `3m`, `1h30m`), at least a second: what the CRD
/// schema takes, checked before anything is sent.
fn duration(text: &str) -> Result<String, String> {
    let invalid = || format!("{text:?} is not a duration like 10s, 3m or 1h30m");
    let mut total = 0u64;
    let mut digits = String::new();
    for c in text.chars() {
        match c {
            '0'..='9' => digits.push(c),
            's' | 'm' | 'h' | 'd' if !digits.is_empty() => {
                let n: u64 = digits.parse().map_err(|_| invalid())?;
                let unit = match c {
                    's' => 1,
                    'm' => 60,
                    'h' => 3600,
                    _ => 86_400,
                };
                total = n
                    .checked_mul(unit)
                    .and_then(|s| total.checked_add(s))
                    .ok_or_else(invalid)?;
                digits.clear();
            }
            _ => return Err(invalid()),
        }
    }
    if !digits.is_empty() || text.is_empty() {
        return Err(invalid());
    }
    if total == 0 {
        return Err(format!("{text:?}: the duration must be at least 1s"));
    }
    Ok(text.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Debug, clap::Parser)]
    struct Cli {
        #[command(flatten)]
        create: CreateArgs,
    }

    fn args(extra: &[&str]) -> CreateArgs {
        let mut argv = vec![
            "create",
            "shop",
            "--repo",
            "file:///srv/git/shop.git",
            "--path",
            "apps/shop",
            "--dest-namespace",
            "shop",
        ];
        argv.extend_from_slice(extra);
        Cli::try_parse_from(argv).unwrap().create
    }

    fn application(create: &CreateArgs) -> Application {
        let renderer = Renderer::of_kind(create.renderer.unwrap_or(RendererKind::Directory));
        let renderer = configure(renderer, create).unwrap();
        serde_json::from_value(manifest(create, "tether-system", &renderer).unwrap()).unwrap()
    }

    #[test]
    fn a_chart_from_a_registry_lands_as_chart_version_and_insecure() {
        let create = args(&[
            "--chart",
            "web",
            "--version",
            "1.2.x",
            "--insecure",
            "--helm-set",
            "replicaCount=2",
            "--renderer",
            "helm",
        ]);
        let app = application(&create);
        let source = &app.spec.source;
        assert_eq!(
            (
                source.chart.as_str(),
                source.version.as_str(),
                source.insecure
            ),
            ("web", "1.2.x", true)
        );
        assert!(matches!(source.renderer, Renderer::Helm(_)));
    }

    #[test]
    fn every_flag_lands_in_the_application() {
        let create = args(&[
            "--renderer",
            "helm",
            "--helm-values",
            "values-prod.yaml",
            "--helm-values",
            "../shared.yaml",
            "--helm-set",
            "image.tag=1.2",
            "--helm-set",
            "replicaCount=3",
            "--helm-set",
            "ingress.enabled=true",
            "--revision",
            "v1.2.0",
            "--self-heal=false",
            "--prune",
            "--create-namespace",
            "--interval",
            "10s",
            "--alert-not-synced-after",
            "15m",
            "--service-account",
            "deployer",
            "--project",
            "team-a",
        ]);
        let app = application(&create);
        let source = &app.spec.source;
        assert_eq!(source.revision, "v1.2.0");
        assert_eq!(source.interval.as_deref(), Some("10s"));
        let Renderer::Helm(helm) = &source.renderer else {
            panic!("{source:?}")
        };
        assert_eq!(helm.value_files, ["values-prod.yaml", "../shared.yaml"]);
        assert_eq!(helm.namespace, "shop");
        let values: Value = serde_saphyr::from_str(&helm.values).unwrap();
        assert_eq!(
            values,
            json!({"image": {"tag": "1.2"}, "replicaCount": 3, "ingress": {"enabled": true}})
        );
        let policy = &app.spec.sync_policy;
        assert!(!policy.self_heal && policy.prune && policy.create_namespace);
        assert_eq!(policy.alert_not_synced_after.as_deref(), Some("15m"));
        assert_eq!(app.spec.service_account_name.as_deref(), Some("deployer"));
        assert_eq!(app.spec.project.as_deref(), Some("team-a"));
    }

    #[test]
    fn self_heal_is_on_unless_turned_off() {
        assert!(application(&args(&[])).spec.sync_policy.self_heal);
        assert!(
            application(&args(&["--self-heal"]))
                .spec
                .sync_policy
                .self_heal
        );
        assert!(
            !application(&args(&["--no-self-heal"]))
                .spec
                .sync_policy
                .self_heal
        );
        let both = ["create", "a", "--repo", "r", "--dest-namespace", "d"];
        let both = [&both[..], &["--self-heal", "--no-self-heal"]].concat();
        assert!(Cli::try_parse_from(both).is_err());
    }

    #[test]
    fn jsonnet_flags_set_tlas_and_ext_vars() {
        let create = args(&[
            "--renderer",
            "jsonnet",
            "--jsonnet-tla",
            "replicas=2",
            "--jsonnet-ext-var",
            "env=prod=eu",
            "--jsonnet-main",
            "app.jsonnet",
        ]);
        let Renderer::Jsonnet(options) = application(&create).spec.source.renderer else {
            panic!()
        };
        assert_eq!(options.main, "app.jsonnet");
        assert_eq!(options.tlas["replicas"], "2");
        assert_eq!(options.ext_vars["env"], "prod=eu");
    }

    #[test]
    fn a_flag_of_another_renderer_is_refused() {
        let create = args(&["--renderer", "kustomize", "--helm-set", "a=1"]);
        let error = configure(Renderer::of_kind(RendererKind::Kustomize), &create)
            .unwrap_err()
            .to_string();
        assert_eq!(
            error,
            "--helm-set does not apply to the kustomize renderer (given with --renderer)"
        );
        let create = args(&["--jsonnet-tla", "a=1"]);
        let error = configure(Renderer::of_kind(RendererKind::Helm), &create)
            .unwrap_err()
            .to_string();
        assert!(error.contains("detected; give --renderer"), "{error}");
        let bad = args(&["--renderer", "jsonnet", "--jsonnet-tla", "novalue"]);
        assert!(configure(Renderer::of_kind(RendererKind::Jsonnet), &bad).is_err());
    }

    #[test]
    fn helm_set_types_values_as_helm_does_and_refuses_list_indices() {
        assert_eq!(typed("3"), json!(3));
        assert_eq!(typed("007"), json!("007"));
        assert_eq!(typed("1.2"), json!("1.2"));
        assert_eq!(typed("false"), json!(false));
        assert_eq!(typed("yes"), json!("yes"));
        let yaml = helm_values(&["a.b=yes".into(), "a.c=0755".into()]).unwrap();
        // Read back as a YAML 1.1 reader would: still strings.
        let read: Value = serde_saphyr::from_str_with_options(
            &yaml,
            serde_saphyr::options! {legacy_octal_numbers: true, strict_booleans: false},
        )
        .unwrap();
        assert_eq!(read, json!({"a": {"b": "yes", "c": "0755"}}));
        assert!(helm_values(&["list[0]=x".into()]).is_err());
        assert!(helm_values(&["a..b=x".into()]).is_err());
    }

    #[test]
    fn intervals_are_durations_of_seconds_minutes_or_hours() {
        for good in ["10s", "3m", "1h", "1h30m", "90s", "1d"] {
            assert_eq!(duration(good).as_deref(), Ok(good));
        }
        for bad in ["", "10", "3 m", "1w", "m", "0s", "-5s", "1.5m", "10ms"] {
            assert!(duration(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_detected_renderer_keeps_its_jsonnet_main() {
        let detected = Renderer::detect(&["app.jsonnet"]);
        let create = args(&["--jsonnet-tla", "x=1"]);
        let Renderer::Jsonnet(options) = configure(detected, &create).unwrap() else {
            panic!()
        };
        assert_eq!(options.main, "app.jsonnet");
        assert_eq!(options.tlas["x"], "1");
    }
}
