//! `tether render`: print the desired objects a source renders to.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use tether_source::render::SandboxMode;
use tether_source::spec::{HelmOptions, JsonnetOptions, KustomizeOptions};
use tether_source::{
    Credentials, DirectoryOptions, Rendered, Renderer, Repositories, Sandbox, Source, Verification,
    VerifyMode,
};

use tether_core::diff::secret::masked_for_display;

use super::out::{out, outln, print_as, yaml};

/// Render a source and print its objects as a YAML stream, each preceded by
/// its origin (`# ConfigMap shop/web: apps/web/cm.yaml:3`), or with `-o
/// json` as one JSON `List` (the commit and origins then go to stderr).
///
/// Without `--repo`, `--path` is a local directory. With `--repo`, the
/// revision is fetched, verified and `--path` is rendered from it. With
/// `--chart`, `--repo` is a Helm repository or an `oci://` path and the
/// chart's `--version` (exact, a range, or a digest) is rendered with Helm.
///
/// Examples:
///   tether render --path examples/shop
///   tether render --repo https://charts.example.com/stable --chart web --version 1.2.x
///   tether render --repo https://git.example.com/shop.git --revision '>=1.2.0 <2.0.0' \
///       --path apps/web --renderer kustomize --verify tag --trusted-key ops.asc
#[derive(Debug, clap::Args)]
pub struct RenderArgs {
    /// Repository URL (file://, http(s)://, ssh://, git://, git@host:path).
    #[arg(long)]
    pub repo: Option<String>,
    /// Branch, tag, semver range over tags, full commit SHA (default: HEAD).
    #[arg(long, default_value = "")]
    pub revision: String,
    /// Directory inside the repository, or a local directory without --repo.
    #[arg(long)]
    pub path: Option<PathBuf>,
    /// A chart of the Helm repository or OCI path given as --repo.
    #[arg(long, requires = "repo")]
    pub chart: Option<String>,
    /// The chart's version: exact, a range (1.2.x), or for OCI a digest
    /// (default: the highest stable).
    #[arg(long = "version", default_value = "", requires = "chart")]
    pub chart_version: String,
    /// Plain HTTP to an oci:// registry.
    #[arg(long, requires = "chart")]
    pub insecure: bool,
    /// Output format: yaml (a YAML stream with origins as comments) or json.
    #[arg(long, short = 'o', default_value = "yaml", value_parser = ["yaml", "json"])]
    pub output: String,
    /// Print the values of Secrets as they are (by default every value
    /// under a Secret's `data` and `stringData` is masked, as in every
    /// other output of Tether).
    #[arg(long)]
    pub show_secrets: bool,
    #[command(flatten)]
    pub options: Box<RenderOptions>,
}

/// Renderer, verification and fetch options of `tether render`.
#[derive(Debug, clap::Args)]
pub struct RenderOptions {
    /// directory | kustomize | helm | jsonnet
    #[arg(long, default_value = "directory")]
    pub renderer: String,
    /// Directory renderer: only files matching these globs.
    #[arg(long)]
    pub include: Vec<String>,
    /// Directory renderer: skip files matching these globs.
    #[arg(long)]
    pub exclude: Vec<String>,
    /// Helm: release name.
    #[arg(long, default_value = "")]
    pub release_name: String,
    /// Helm: namespace.
    #[arg(long, default_value = "")]
    pub helm_namespace: String,
    /// Helm: values file relative to the chart (repeatable).
    #[arg(long = "values")]
    pub value_files: Vec<String>,
    /// Jsonnet: entry file (default main.jsonnet).
    #[arg(long, default_value = "")]
    pub jsonnet_main: String,
    /// Jsonnet: external variable NAME=VALUE (repeatable).
    #[arg(long = "ext-var")]
    pub ext_vars: Vec<String>,
    /// Jsonnet: top-level argument NAME=VALUE, as a string (repeatable).
    #[arg(long = "tla")]
    pub tlas: Vec<String>,
    /// Signature verification: which signatures the revision must carry.
    #[arg(long, default_value = "none", value_parser = super::word::<VerifyMode>())]
    pub verify: VerifyMode,
    /// ASCII-armored OpenPGP public key file to trust (repeatable).
    #[arg(long)]
    pub trusted_key: Vec<PathBuf>,
    /// allowed_signers file of trusted SSH keys.
    #[arg(long)]
    pub allowed_signers: Option<PathBuf>,
    /// Credentials file (YAML: username, password or token, caCert; or sshPrivateKey and knownHosts).
    #[arg(long)]
    pub credentials: Option<PathBuf>,
    /// Where object stores are kept (default: a temporary directory).
    #[arg(long)]
    pub cache_dir: Option<PathBuf>,
    /// Renderer time limit in seconds.
    #[arg(long, default_value_t = 60)]
    pub timeout: u64,
    /// Run renderers (helm, kustomize, Jsonnet) in a bubblewrap sandbox:
    /// required | off.
    #[arg(long, default_value = "required", value_parser = super::word::<SandboxMode>())]
    pub render_sandbox: SandboxMode,
}

pub fn run(args: RenderArgs) -> anyhow::Result<ExitCode> {
    // A chart renders with Helm, whatever --renderer says by default.
    let renderer = match (&args.chart, args.options.renderer.as_str()) {
        (Some(_), "directory") => renderer_named("helm", &args.options)?,
        _ => renderer(&args.options)?,
    };
    let sandbox = Sandbox {
        timeout: std::time::Duration::from_secs(args.options.timeout),
        ..sandbox(args.options.render_sandbox)
    };
    let rendered = match &args.repo {
        None => {
            let dir = args.path.clone().unwrap_or_else(|| PathBuf::from("."));
            // No cluster here: Helm renders with its default capabilities.
            tether_source::render_local(&dir, &renderer, &sandbox, &Default::default())
                .with_context(|| format!("rendering {}", dir.display()))?
        }
        Some(repo) => fetch(&args, repo, renderer, sandbox)?,
    };
    print(&rendered, &args.output, args.show_secrets)?;
    Ok(ExitCode::SUCCESS)
}

/// The renderer sandbox of this binary: `mode`, and Jsonnet evaluated by
/// this very executable (`tether __render-jsonnet`).
pub fn sandbox(mode: SandboxMode) -> Sandbox {
    let defaults = Sandbox::default();
    Sandbox {
        mode,
        render_program: std::env::current_exe().unwrap_or(defaults.render_program.clone()),
        ..defaults
    }
}

fn fetch(
    args: &RenderArgs,
    repo: &str,
    renderer: Renderer,
    sandbox: Sandbox,
) -> anyhow::Result<Rendered> {
    let options = &args.options;
    let mut openpgp_keys = Vec::new();
    for file in &options.trusted_key {
        openpgp_keys.push(read(file)?);
    }
    let allowed_signers = options.allowed_signers.as_ref().map(read).transpose()?;
    let source = Source {
        repo_url: repo.to_string(),
        revision: args.revision.clone(),
        path: args
            .path
            .as_ref()
            .map(|p| p.to_string_lossy().into_owned())
            .unwrap_or_default(),
        chart: args.chart.clone().unwrap_or_default(),
        version: args.chart_version.clone(),
        insecure: args.insecure,
        renderer,
        verify: Verification {
            mode: options.verify,
            openpgp_keys,
            allowed_signers: allowed_signers.unwrap_or_default(),
        },
        ..Default::default()
    };
    let credentials = match &options.credentials {
        Some(file) => Some(Credentials::from_file_text(&read(file)?)?),
        None => None,
    };
    let temp = cache_dir(&options.cache_dir)?;
    let repositories = Repositories::new(temp).with_sandbox(sandbox);
    // Git transports block; keep them off the async runtime's thread.
    std::thread::scope(|scope| {
        scope
            .spawn(|| repositories.fetch(&source, credentials.as_ref(), &Default::default()))
            .join()
            .expect("the fetch thread does not panic")
    })
    .map_err(anyhow::Error::from)
}

fn cache_dir(cache_dir: &Option<PathBuf>) -> anyhow::Result<PathBuf> {
    let dir = match cache_dir {
        Some(dir) => dir.clone(),
        None => std::env::temp_dir().join("tether-render-cache"),
    };
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    Ok(dir)
}

fn read(file: &PathBuf) -> anyhow::Result<String> {
    std::fs::read_to_string(file).with_context(|| format!("reading {}", file.display()))
}

fn renderer(args: &RenderOptions) -> anyhow::Result<Renderer> {
    renderer_named(&args.renderer, args)
}

fn renderer_named(name: &str, args: &RenderOptions) -> anyhow::Result<Renderer> {
    Ok(match name {
        "directory" => Renderer::Directory(DirectoryOptions {
            include: args.include.clone(),
            exclude: args.exclude.clone(),
        }),
        "kustomize" => Renderer::Kustomize(KustomizeOptions {}),
        "helm" => Renderer::Helm(HelmOptions {
            release_name: args.release_name.clone(),
            namespace: args.helm_namespace.clone(),
            value_files: args.value_files.clone(),
            values: String::new(),
        }),
        "jsonnet" => {
            // Built field by field: options this command has no flag for
            // keep their defaults.
            let mut options = JsonnetOptions {
                main: args.jsonnet_main.clone(),
                ..Default::default()
            };
            options.ext_vars = pairs("--ext-var", &args.ext_vars)?;
            options.tlas = pairs("--tla", &args.tlas)?;
            Renderer::Jsonnet(options)
        }
        other => anyhow::bail!("unknown renderer {other:?} (directory, kustomize, helm, jsonnet)"),
    })
}

/// `NAME=VALUE` flags as a map.
fn pairs(flag: &str, given: &[String]) -> anyhow::Result<BTreeMap<String, String>> {
    let mut map = BTreeMap::new();
    for pair in given {
        let (name, value) = pair
            .split_once('=')
            .with_context(|| format!("{flag} {pair:?}: expected NAME=VALUE"))?;
        map.insert(name.to_string(), value.to_string());
    }
    Ok(map)
}

/// The rendered objects as a YAML stream with the commit and each origin
/// as comments, or (`json`) as one `List` with those lines on stderr.
fn print(rendered: &Rendered, format: &str, show_secrets: bool) -> anyhow::Result<()> {
    let shown = |object: &serde_json::Value| match show_secrets {
        true => object.clone(),
        false => masked_for_display(object),
    };
    let mut header = Vec::new();
    if !rendered.commit.is_empty() {
        let tag = rendered.tag.as_deref().unwrap_or("-");
        header.push(format!(
            "# commit {} tree {} tag {tag}",
            rendered.commit, rendered.tree
        ));
        for key in &rendered.verified_by {
            header.push(format!("# verified: signed by {key}"));
        }
    }
    if format == "json" {
        for line in &header {
            eprintln!("{line}");
        }
        for manifest in rendered.manifests.iter() {
            eprintln!("# {}: {}", manifest.id, manifest.origin);
        }
        let items: Vec<serde_json::Value> = rendered
            .manifests
            .iter()
            .map(|m| shown(&m.object))
            .collect();
        let list = serde_json::json!({"apiVersion": "v1", "kind": "List", "items": items});
        print_as(&list, "json")?;
    } else {
        for line in &header {
            outln!("{line}");
        }
        for manifest in rendered.manifests.iter() {
            outln!("---\n# {}: {}", manifest.id, manifest.origin);
            out!("{}", yaml(&shown(&manifest.object))?);
        }
    }
    if rendered.empty {
        eprintln!("warning: the source rendered no objects (an empty render)");
    }
    Ok(())
}
