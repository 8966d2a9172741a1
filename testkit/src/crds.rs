//! Installing the harness's MCO CRDs (`tests/crds/`) and making their first use fast.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::jiff::{self, Timestamp};
use kube::api::{Api, Patch, PatchParams};

use crate::Result;

pub use crate::FIELD_MANAGER;

/// Applies every CRD and waits until each is Established; the returned [`Established`] is
/// then [`Established::warm_up`]ed (apart, so a control plane starts its garbage collector,
/// whose discovery must see the CRDs, during the warm-up).
pub async fn install(client: &kube::Client) -> Result<Established> {
    apply_crds(client).await.map(Established)
}

/// The CRDs applied and Established, at the latest Established transition time.
#[must_use = "warm the CRDs up before the first test request"]
pub struct Established(Timestamp);

impl Established {
    /// [`warm_up`].
    pub async fn warm_up(self, client: &kube::Client) -> Result<()> {
        warm_up(client, self.0).await
    }
}

/// The harness's CRD manifests (`tests/crds/*.yaml`), sorted by file name.
pub fn crd_files() -> Result<Vec<PathBuf>> {
    let dir = crate::repo_root().join("tests/crds");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .map_err(|e| format!("reading {}: {e}", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "yaml"))
        .collect();
    files.sort();
    Ok(files)
}

/// Server-side applies every CRD and waits until each is Established; returns the latest
/// Established transition time.
async fn apply_crds(client: &kube::Client) -> Result<Timestamp> {
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    let mut names = Vec::new();
    for file in crd_files()? {
        let text = std::fs::read_to_string(&file)?;
        let crd: CustomResourceDefinition = serde_yaml_ng::from_str(&text)
            .map_err(|e| format!("parsing {}: {e}", file.display()))?;
        let name = crd
            .metadata
            .name
            .clone()
            .ok_or_else(|| format!("{} has no name", file.display()))?;
        api.patch(
            &name,
            &PatchParams::apply(FIELD_MANAGER).force(),
            &Patch::Apply(&crd),
        )
        .await
        .map_err(|e| format!("applying {}: {e}", file.display()))?;
        names.push(name);
    }
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut latest = Timestamp::UNIX_EPOCH;
    for name in names {
        loop {
            let crd = api.get(&name).await?;
            let established = crd
                .status
                .as_ref()
                .and_then(|s| s.conditions.as_ref())
                .and_then(|cs| {
                    cs.iter()
                        .find(|c| c.type_ == "Established" && c.status == "True")
                })
                .map(|c| {
                    c.last_transition_time
                        .as_ref()
                        .map_or(Timestamp::now(), |t| t.0)
                });
            if let Some(at) = established {
                latest = latest.max(at);
                break;
            }
            if Instant::now() >= deadline {
                return Err(
                    format!("CRD {name} not Established after 30s: {:?}", crd.status).into(),
                );
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    Ok(latest)
}

/// Makes the first test requests on custom resources fast: the API server answers the first
/// request of each resource with 429 while its watch cache starts (kube retries after 1 s), and
/// it delays every create by 2 s while a CRD was Established less than 2 s ago (by its
/// second-precision `lastTransitionTime`). Both are paid here, concurrently.
async fn warm_up(client: &kube::Client, established: Timestamp) -> Result<()> {
    let lists = async {
        let (pools, configs, builds, rendered) = (
            crate::mco::mcps(client),
            crate::mco::moscs(client),
            crate::mco::mosbs(client),
            crate::mco::mcs(client),
        );
        let params = kube::api::ListParams::default().limit(1);
        tokio::try_join!(
            pools.list(&params),
            configs.list(&params),
            builds.list(&params),
            rendered.list(&params)
        )
    };
    let create_delay = async {
        let ready_at = established + jiff::SignedDuration::from_millis(2100);
        let wait = Timestamp::now().duration_until(ready_at);
        if wait.is_positive() {
            tokio::time::sleep(wait.unsigned_abs()).await;
        }
    };
    let (listed, ()) = tokio::join!(lists, create_delay);
    listed?;
    Ok(())
}
