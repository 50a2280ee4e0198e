//! What an Application's page shows, decided from its status and the live
//! objects read for it: the commit link, the object tree, the words of a
//! condition. Pure, so each rule is tested without a cluster.

use std::collections::BTreeMap;

use serde_json::Value;
use tether_controller::api::stored::INVALID_SPEC_REASON;
use tether_controller::report::status::{RECONCILED_REASON, Step};
use tether_core::HealthStatus;
use tether_core::health::assess;

/// A link to `revision` on the forge that hosts `repo_url`, when it is one
/// whose commit pages are known (GitHub, GitLab, Bitbucket, Codeberg,
/// Gitea/Forgejo-style hosts named `gitea.*`/`forgejo.*`, and self-hosted
/// GitLab named `gitlab.*`). SSH forms (`git@host:owner/repo.git`,
/// `ssh://git@host/owner/repo`) are linked on their web host. Nothing for
/// `file://`, unknown hosts, or a revision that is not a commit id.
pub fn commit_link(repo_url: &str, revision: &str) -> Option<String> {
    if revision.len() < 7 || !revision.chars().all(|c| c.is_ascii_hexdigit()) {
        return None;
    }
    let (host, path) = host_and_path(repo_url)?;
    let path = path.trim_matches('/').trim_end_matches(".git");
    if path.split('/').filter(|part| !part.is_empty()).count() < 2 {
        return None;
    }
    let commit = match forge(&host)? {
        Forge::GitHub | Forge::Gitea => format!("commit/{revision}"),
        Forge::GitLab => format!("-/commit/{revision}"),
        Forge::Bitbucket => format!("commits/{revision}"),
    };
    Some(format!("https://{host}/{path}/{commit}"))
}

enum Forge {
    GitHub,
    GitLab,
    Bitbucket,
    Gitea,
}

fn forge(host: &str) -> Option<Forge> {
    let first = host.split('.').next().unwrap_or_default();
    match host {
        "github.com" => Some(Forge::GitHub),
        "gitlab.com" => Some(Forge::GitLab),
        "bitbucket.org" => Some(Forge::Bitbucket),
        "codeberg.org" => Some(Forge::Gitea),
        _ if first == "gitlab" => Some(Forge::GitLab),
        _ if first == "gitea" || first == "forgejo" => Some(Forge::Gitea),
        _ => None,
    }
}

/// The web host and the repository path of a Git URL.
fn host_and_path(url: &str) -> Option<(String, String)> {
    if let Some(rest) = url
        .strip_prefix("https://")
        .or_else(|| url.strip_prefix("http://"))
        .or_else(|| url.strip_prefix("ssh://"))
        .or_else(|| url.strip_prefix("git://"))
    {
        let (authority, path) = rest.split_once('/')?;
        let host = authority.rsplit('@').next()?;
        // A port is the SSH or HTTP server's, not the web page's.
        let host = host.split(':').next()?;
        return Some((host.to_ascii_lowercase(), path.to_string()));
    }
    // scp-like: git@github.com:owner/repo.git
    let (authority, path) = url.split_once(':')?;
    if authority.contains('/') || path.starts_with("//") {
        return None;
    }
    let host = authority.rsplit('@').next()?;
    Some((host.to_ascii_lowercase(), path.to_string()))
}

/// A live object under a managed one: its kind, name, health, and the
/// objects under it.
#[derive(Debug, Clone, PartialEq)]
pub struct Node {
    pub kind: String,
    pub name: String,
    pub health: Option<HealthStatus>,
    /// The health check's message, or the pod's phase.
    pub message: String,
    pub children: Vec<Node>,
}

/// The live objects (ReplicaSets, Pods, Jobs) of one namespace, grouped
/// by the kind and name of their controlling owner.
#[derive(Debug, Default)]
pub struct Owned {
    by_owner: BTreeMap<(String, String), Vec<Value>>,
}

impl Owned {
    /// Groups `objects` (whole objects as JSON) by their controller
    /// owner reference.
    pub fn of(objects: impl IntoIterator<Item = Value>) -> Owned {
        let mut by_owner: BTreeMap<(String, String), Vec<Value>> = BTreeMap::new();
        for object in objects {
            let owner = object["metadata"]["ownerReferences"]
                .as_array()
                .and_then(|owners| {
                    owners
                        .iter()
                        .find(|o| o["controller"] == true)
                        .or(owners.first())
                })
                .and_then(|o| Some((o["kind"].as_str()?, o["name"].as_str()?)));
            if let Some((kind, name)) = owner {
                by_owner
                    .entry((kind.to_string(), name.to_string()))
                    .or_default()
                    .push(object);
            }
        }
        for children in by_owner.values_mut() {
            children.sort_by(|a, b| {
                let name = |o: &Value| o["metadata"]["name"].as_str().unwrap_or("").to_string();
                name(a).cmp(&name(b))
            });
        }
        Owned { by_owner }
    }

    /// The tree under the object `kind`/`name`, at most `depth` levels
    /// (Deployment → ReplicaSet → Pod; CronJob → Job → Pod).
    pub fn under(&self, kind: &str, name: &str, depth: usize) -> Vec<Node> {
        if depth == 0 {
            return Vec::new();
        }
        let Some(children) = self.by_owner.get(&(kind.to_string(), name.to_string())) else {
            return Vec::new();
        };
        children
            .iter()
            .filter(|child| !is_retired_replica_set(child))
            .map(|child| {
                let kind = child["kind"].as_str().unwrap_or_default().to_string();
                let name = child["metadata"]["name"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string();
                let health = assess(child);
                Node {
                    children: self.under(&kind, &name, depth - 1),
                    health: health.as_ref().map(|h| h.status),
                    message: health.map(|h| h.message).unwrap_or_default(),
                    kind,
                    name,
                }
            })
            .collect()
    }
}

/// An old ReplicaSet a Deployment keeps for rollbacks (no replicas):
/// history, not part of what runs.
fn is_retired_replica_set(object: &Value) -> bool {
    object["kind"] == "ReplicaSet"
        && object["spec"]["replicas"].as_i64() == Some(0)
        && object["status"]["replicas"].as_i64().unwrap_or(0) == 0
}

/// The kinds whose live children the page shows.
pub fn has_children(kind: &str) -> bool {
    matches!(
        kind,
        "Deployment" | "ReplicaSet" | "StatefulSet" | "DaemonSet" | "Job" | "CronJob"
    )
}

/// A condition's reason in a sentence, for the reasons Tether writes on
/// the `Reconciled` condition (every [`Step`] has one); others are shown as
/// they are.
pub fn reason_words(reason: &str) -> Option<&'static str> {
    if reason == RECONCILED_REASON {
        return Some("The last sync applied the commit.");
    }
    if reason == INVALID_SPEC_REASON {
        return Some("The Application's spec is not valid.");
    }
    Some(match reason.parse::<Step>().ok()? {
        Step::Identity => {
            "The controller requires a service account to apply as, and the Application names none."
        }
        Step::Project => "The project does not allow this repository, namespace or kind.",
        Step::Fetch => "The repository could not be fetched.",
        Step::Verify => "The commit's signature could not be verified, so nothing was applied.",
        Step::Render => "The manifests could not be rendered.",
        Step::Destination => "An object is outside the namespaces this Application may use.",
        Step::Diff => "The desired objects could not be compared with the live ones.",
        Step::Ownership => "An object is managed by another Application.",
        Step::Validate => "The API server's dry run refused the commit; nothing of it was applied.",
        Step::Apply => "Applying the commit failed.",
        Step::Cluster => "The destination cluster is not registered or does not answer.",
        Step::Dependency => "The app waits for the apps it depends on to be Synced and Healthy.",
        Step::DependencyCycle => "The app's dependencies lead back to the app itself.",
        Step::SyncWindow => "A sync window is malformed or refuses the sync.",
        Step::Hook => "A sync hook failed or did not finish in time.",
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const SHA: &str = "0123456789abcdef0123456789abcdef01234567";

    #[test]
    fn known_forges_link_the_commit_and_others_do_not() {
        let cases = [
            (
                "https://github.com/acme/shop.git",
                Some(format!("https://github.com/acme/shop/commit/{SHA}")),
            ),
            (
                "git@github.com:acme/shop.git",
                Some(format!("https://github.com/acme/shop/commit/{SHA}")),
            ),
            (
                "ssh://git@gitlab.com/acme/platform/shop",
                Some(format!(
                    "https://gitlab.com/acme/platform/shop/-/commit/{SHA}"
                )),
            ),
            (
                "https://gitlab.example.com/acme/shop",
                Some(format!(
                    "https://gitlab.example.com/acme/shop/-/commit/{SHA}"
                )),
            ),
            (
                "https://user@bitbucket.org/acme/shop.git",
                Some(format!("https://bitbucket.org/acme/shop/commits/{SHA}")),
            ),
            (
                "https://codeberg.org/acme/shop",
                Some(format!("https://codeberg.org/acme/shop/commit/{SHA}")),
            ),
            ("file:///srv/git/shop.git", None),
            ("https://git.example.com/acme/shop.git", None),
            ("https://github.com/acme", None),
        ];
        for (url, link) in cases {
            assert_eq!(commit_link(url, SHA), link, "{url}");
        }
        assert_eq!(commit_link("https://github.com/acme/shop", "main"), None);
    }

    fn object(kind: &str, name: &str, owner: Option<(&str, &str)>, status: Value) -> Value {
        let api_version = if kind == "Pod" { "v1" } else { "apps/v1" };
        let replicas = status["replicas"].clone();
        let mut object = json!({"apiVersion": api_version, "kind": kind,
            "metadata": {"name": name, "namespace": "shop", "generation": 1},
            "spec": {"replicas": replicas}, "status": status});
        if let Some((kind, name)) = owner {
            object["metadata"]["ownerReferences"] = json!([{"kind": kind, "name": name, "controller": true, "uid": "u", "apiVersion": "v1"}]);
        }
        object
    }

    #[test]
    fn a_deployment_has_its_replica_set_and_pods_beneath_it_with_their_health() {
        let owned = Owned::of([
            object(
                "Pod",
                "web-1-b",
                Some(("ReplicaSet", "web-1")),
                json!({"phase": "Running",
                "conditions": [{"type": "Ready", "status": "True"}]}),
            ),
            object(
                "Pod",
                "web-1-a",
                Some(("ReplicaSet", "web-1")),
                json!({"phase": "Pending"}),
            ),
            object(
                "ReplicaSet",
                "web-1",
                Some(("Deployment", "web")),
                json!({"replicas": 2, "readyReplicas": 1}),
            ),
            object(
                "ReplicaSet",
                "web-0",
                Some(("Deployment", "web")),
                json!({"replicas": 0}),
            ),
            object("Pod", "stray", None, json!({"phase": "Running"})),
        ]);
        let tree = owned.under("Deployment", "web", 3);
        assert_eq!(
            tree.len(),
            1,
            "the retired ReplicaSet is left out: {tree:?}"
        );
        assert_eq!(tree[0].name, "web-1");
        assert!(tree[0].health.is_some(), "{tree:?}");
        let pods: Vec<&str> = tree[0].children.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(pods, ["web-1-a", "web-1-b"]);
        assert_eq!(tree[0].children[0].health, Some(HealthStatus::Progressing));
        assert_eq!(tree[0].children[1].health, Some(HealthStatus::Healthy));
        assert!(owned.under("Deployment", "other", 3).is_empty());
    }

    #[test]
    fn tethers_reasons_read_as_sentences() {
        assert!(
            reason_words("ValidationFailed")
                .unwrap()
                .contains("nothing of it")
        );
        assert_eq!(reason_words("SomethingElse"), None);
        assert!(reason_words("Succeeded").is_some());
        assert!(reason_words("HookFailed").unwrap().contains("hook"));
    }
}
