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

use super::out::outln;

/// Render a source and print its objects as a YAML stream, each preceded by
/// its origin (`# ConfigMap shop/web: apps/web/cm.yaml:3`).
///
/// Without `--repo`, `--path` is a local directory. With `--repo`, the
/// revision is fetched, verified and `--path` is rendered from it.
///
/// Examples:
///   tether render --path examples/shop
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
    /// Signature verification: none | head | tag | tag-and-head.
    #[arg(long, default_value = "none")]
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
    #[arg(long, default_value = "required")]
    pub render_sandbox: SandboxMode,
}

pub fn run(args: RenderArgs) -> anyhow::Result<ExitCode> {
    let renderer = renderer(&args.options)?;
    let sandbox = Sandbox {
        timeout: std::time::Duration::from_secs(args.options.timeout),
        ..sandbox(args.options.render_sandbox)
    };
    let rendered = match &args.repo {
        None => {
            let dir = args.path.clone().unwrap_or_else(|| PathBuf::from("."));
            tether_source::render_local(&dir, &renderer, &sandbox)
                .with_context(|| format!("rendering {}", dir.display()))?
        }
        Some(repo) => fetch(&args, repo, renderer, sandbox)?,
    };
    print(&rendered)?;
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
        secret_ref: None,
        interval: None,
        repo_url: repo.to_string(),
        revision: args.revision.clone(),
        path: args
            .path
            .as_ref()
            .map(|p| p.to_string_lossy().into_owned())
            .unwrap_or_default(),
        renderer,
        verify: Verification {
            mode: options.verify,
            openpgp_keys,
            allowed_signers: allowed_signers.unwrap_or_default(),
        },
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
            .spawn(|| repositories.fetch(&source, credentials.as_ref()))
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
    Ok(match args.renderer.as_str() {
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
            let mut ext_vars = BTreeMap::new();
            for pair in &args.ext_vars {
                let (name, value) = pair
                    .split_once('=')
                    .with_context(|| format!("--ext-var {pair:?}: expected NAME=VALUE"))?;
                ext_vars.insert(name.to_string(), value.to_string());
            }
            Renderer::Jsonnet(JsonnetOptions {
                main: args.jsonnet_main.clone(),
                ext_vars,
            })
        }
        other => anyhow::bail!("unknown renderer {other:?} (directory, kustomize, helm, jsonnet)"),
    })
}

fn print(rendered: &Rendered) -> anyhow::Result<()> {
    if !rendered.commit.is_empty() {
        let tag = rendered.tag.as_deref().unwrap_or("-");
        outln!(
            "# commit {} tree {} tag {tag}",
            rendered.commit,
            rendered.tree
        );
        for key in &rendered.verified_by {
            outln!("# verified: signed by {key}");
        }
    }
    for manifest in rendered.manifests.iter() {
        outln!("---\n# {}: {}", manifest.id, manifest.origin);
        outln!("{}", serde_json::to_string_pretty(&manifest.object)?);
    }
    if rendered.empty {
        eprintln!("warning: the source rendered no objects (an empty render)");
    }
    Ok(())
}
