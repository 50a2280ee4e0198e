//! `tether import`: Argo CD and Flux objects — from files, or from a
//! cluster where Argo CD or Flux runs — as Tether Applications and
//! Projects (`tether_core::import` converts), printed as YAML or applied.
//! Every field that could not be carried over is reported on stderr, one
//! line each: `FILE:LINE: Kind ns/name: field X not mapped: why`.
//!
//! The renderer of a Git directory (which Argo CD and Flux decide from its
//! files) is detected by reading the repository with the CLI's Git cache,
//! as `tether app create` does; `--no-detect` reads nothing.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, bail};
use kube::api::{Api, DynamicObject, ListParams, Patch, PatchParams};
use kube::discovery::Discovery;
use kube::{Client, ResourceExt};
use tether_controller::api::{Application, Project};
use tether_core::import::{self, Imported, Input, Options, Place, Renderer, Verdict};
use tether_core::tracking::FIELD_MANAGER;
use tether_source::Source;

use super::out::{out, outln, yaml};

/// The kinds `--from-cluster` reads, by API group.
const CLUSTER_KINDS: &[(&str, &[&str])] = &[
    (
        "argoproj.io",
        &["AppProject", "Application", "ApplicationSet"],
    ),
    (
        "source.toolkit.fluxcd.io",
        &["GitRepository", "OCIRepository", "HelmRepository"],
    ),
    ("kustomize.toolkit.fluxcd.io", &["Kustomization"]),
    ("helm.toolkit.fluxcd.io", &["HelmRelease"]),
];

/// Convert Argo CD and Flux objects into Tether Applications and Projects:
/// Argo CD Application, ApplicationSet (list generators), AppProject; Flux
/// Kustomization and HelmRelease with their GitRepository, OCIRepository or
/// HelmRepository. Prints them as YAML (or applies them with --apply) and
/// reports on stderr every field it could not map, and why. Imported apps
/// take over what Argo CD or Flux applied in place
/// (syncPolicy.adoptExisting): nothing is deleted or recreated.
#[derive(Debug, clap::Args)]
pub struct ImportArgs {
    /// A YAML file, or a directory read recursively (every .yaml, .yml
    /// and .json file); may be repeated. Other objects in them are skipped.
    #[arg(short = 'f', long = "filename", value_name = "FILE|DIR")]
    pub files: Vec<PathBuf>,
    /// Read the objects from the cluster (every namespace) where Argo CD
    /// or Flux runs, with their status (which namespaces each app writes
    /// to).
    #[arg(long)]
    pub from_cluster: bool,
    /// The namespace the Applications go to (default: the namespace of
    /// the object each comes from).
    #[arg(short = 'n', long)]
    pub namespace: Option<String>,
    /// Apply the Tether objects (server-side) instead of printing them.
    #[arg(long)]
    pub apply: bool,
    /// Do not read repositories to detect renderers: a Git directory Argo
    /// CD or Flux would render by its files is read as plain YAML.
    #[arg(long)]
    pub no_detect: bool,
    /// Kubeconfig file (default: $KUBECONFIG or ~/.kube/config).
    #[arg(long, env = "TETHER_KUBECONFIG")]
    pub kubeconfig: Option<PathBuf>,
}

pub async fn run(args: ImportArgs) -> anyhow::Result<ExitCode> {
    if args.files.is_empty() && !args.from_cluster {
        bail!("nothing to import: give -f FILE|DIR or --from-cluster");
    }
    let client = match args.apply || args.from_cluster {
        true => Some(tether_cluster::connect(args.kubeconfig.as_deref()).await?),
        false => None,
    };
    let mut inputs = Vec::new();
    for path in &args.files {
        inputs.extend(read_path(path)?);
    }
    if let Some(client) = client.as_ref().filter(|_| args.from_cluster) {
        inputs.extend(from_cluster(client).await?);
    }
    let options = Options {
        namespace: args.namespace.clone(),
    };
    let no_detect = args.no_detect;
    let imported = tokio::task::spawn_blocking(move || {
        let repositories = super::local::repositories();
        let mut detect = |place: &Place| match no_detect {
            true => Err("--no-detect".to_string()),
            false => detect(&repositories, place),
        };
        import::import(&inputs, &options, &mut detect)
    })
    .await?;
    report(&imported);
    check(&imported)?;
    match client.filter(|_| args.apply) {
        Some(client) => apply(&client, &imported).await?,
        None => {
            for (index, object) in imported.objects.iter().enumerate() {
                if index > 0 {
                    outln!("---");
                }
                out!("{}", yaml(object)?);
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// The documents of `path`, a file or a directory (recursively, in path
/// order), named as given on the command line.
fn read_path(path: &Path) -> anyhow::Result<Vec<Input>> {
    let mut files = Vec::new();
    collect(path, &mut files).with_context(|| format!("{}: cannot read", path.display()))?;
    files.sort();
    let mut inputs = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(&file)
            .with_context(|| format!("{}: cannot read", file.display()))?;
        inputs.extend(import::read(&file.display().to_string(), &text)?);
    }
    Ok(inputs)
}

fn collect(path: &Path, files: &mut Vec<PathBuf>) -> std::io::Result<()> {
    if !path.is_dir() {
        files.push(path.to_path_buf());
        return Ok(());
    }
    for entry in std::fs::read_dir(path)? {
        let path = entry?.path();
        let hidden = path
            .file_name()
            .is_some_and(|name| name.to_string_lossy().starts_with('.'));
        let manifest = path
            .extension()
            .is_some_and(|e| e == "yaml" || e == "yml" || e == "json");
        if hidden {
            continue;
        }
        if path.is_dir() {
            collect(&path, files)?;
        } else if manifest {
            files.push(path);
        }
    }
    Ok(())
}

/// Every Argo CD and Flux object of the cluster, of the kinds it serves.
async fn from_cluster(client: &Client) -> anyhow::Result<Vec<Input>> {
    let groups: Vec<&str> = CLUSTER_KINDS.iter().map(|(group, _)| *group).collect();
    let discovery = Discovery::new(client.clone())
        .filter(&groups)
        .run()
        .await
        .context("reading which Argo CD and Flux kinds the cluster serves")?;
    let mut inputs = Vec::new();
    for (group, kinds) in CLUSTER_KINDS {
        let Some(served) = discovery.groups().find(|g| g.name() == *group) else {
            continue;
        };
        for kind in *kinds {
            let Some((resource, _)) = served.recommended_kind(kind) else {
                continue;
            };
            let api: Api<DynamicObject> = Api::all_with(client.clone(), &resource);
            let list = api
                .list(&ListParams::default())
                .await
                .with_context(|| format!("listing {kind}.{group}"))?;
            for mut object in list.items {
                object.managed_fields_mut().clear();
                let mut value = serde_json::to_value(&object)?;
                value["apiVersion"] = resource.api_version.clone().into();
                value["kind"] = resource.kind.clone().into();
                let text = serde_saphyr::to_string(&value)?;
                inputs.push(Input {
                    file: "cluster".to_string(),
                    line: 1,
                    text,
                    object: value,
                });
            }
        }
    }
    Ok(inputs)
}

/// The renderer the files at `place` call for, read with the CLI's Git
/// cache (public repositories and local ones: no credentials are read).
fn detect(repositories: &tether_source::Repositories, place: &Place) -> Result<Renderer, String> {
    let source = Source {
        repo_url: place.repo_url.clone(),
        revision: place.revision.clone(),
        path: place.path.clone(),
        ..Default::default()
    };
    let detected = repositories
        .detect(&source, None)
        .map_err(|error| error.to_string())?;
    Ok(match detected.renderer {
        tether_source::Renderer::Directory(_) => Renderer::Directory,
        tether_source::Renderer::Kustomize(_) => Renderer::Kustomize,
        tether_source::Renderer::Helm(_) => Renderer::Helm,
        tether_source::Renderer::Jsonnet(options) => Renderer::Jsonnet { main: options.main },
    })
}

/// The findings on stderr, one line each, and a summary.
fn report(imported: &Imported) {
    for finding in &imported.findings {
        eprintln!("{finding}");
    }
    let count = |kind: &str| {
        imported
            .objects
            .iter()
            .filter(|o| o["kind"] == kind)
            .count()
    };
    let not_mapped = imported
        .findings
        .iter()
        .filter(|f| f.verdict == Verdict::NotMapped)
        .count();
    let notes = imported.findings.len() - not_mapped;
    eprintln!(
        "imported {} Application(s) and {} Project(s); {not_mapped} field(s) not mapped, \
         {notes} note(s); {} other object(s) skipped",
        count("Application"),
        count("Project"),
        imported.skipped
    );
}

/// Every object made reads back as the Tether kind it claims to be: one
/// that does not is a bug of the conversion, never applied.
fn check(imported: &Imported) -> anyhow::Result<()> {
    for object in &imported.objects {
        let what = format!(
            "{} {}",
            object["kind"].as_str().unwrap_or("?"),
            object["metadata"]["name"].as_str().unwrap_or("?")
        );
        let checked = match object["kind"].as_str() {
            Some("Project") => serde_json::from_value::<Project>(object.clone()).map(|_| ()),
            _ => serde_json::from_value::<Application>(object.clone()).map(|_| ()),
        };
        checked.with_context(|| format!("{what}: the imported object is not valid"))?;
    }
    Ok(())
}

/// Applies the objects (Projects first), server-side as `tether`.
async fn apply(client: &Client, imported: &Imported) -> anyhow::Result<()> {
    let params = PatchParams::apply(FIELD_MANAGER);
    for object in &imported.objects {
        let name = object["metadata"]["name"].as_str().unwrap_or_default();
        let namespace = object["metadata"]["namespace"].as_str();
        let (what, before, after) = match (object["kind"].as_str(), namespace) {
            (Some("Project"), _) => {
                let api: Api<Project> = Api::all(client.clone());
                let before = api.get_opt(name).await?.map(|p| p.resource_version());
                let after = api.patch(name, &params, &Patch::Apply(object)).await;
                (
                    format!("Project {name}"),
                    before,
                    after.map(|p| p.resource_version()),
                )
            }
            (_, Some(namespace)) => {
                let api: Api<Application> = Api::namespaced(client.clone(), namespace);
                let before = api.get_opt(name).await?.map(|a| a.resource_version());
                let after = api.patch(name, &params, &Patch::Apply(object)).await;
                (
                    format!("Application {namespace}/{name}"),
                    before,
                    after.map(|a| a.resource_version()),
                )
            }
            (_, None) => bail!("Application {name}: no namespace"),
        };
        let after = after.with_context(|| what.clone())?;
        let action =
            tether_core::Action::of_apply(before.flatten().as_deref(), &after.unwrap_or_default());
        outln!("{what} {action}");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_directory_is_read_recursively_in_path_order_and_hidden_files_are_left_out() {
        let dir = std::env::temp_dir().join(format!("tether-import-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("b/.git")).unwrap();
        std::fs::write(dir.join("b/app.yaml"), "kind: B\n").unwrap();
        std::fs::write(dir.join("b/.git/x.yaml"), "kind: X\n").unwrap();
        std::fs::write(dir.join("a.yml"), "kind: A\n").unwrap();
        std::fs::write(dir.join("README.md"), "# no\n").unwrap();
        let kinds: Vec<String> = read_path(&dir)
            .unwrap()
            .iter()
            .map(|input| input.object["kind"].as_str().unwrap().to_string())
            .collect();
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!(kinds, ["A", "B"]);
    }
}
