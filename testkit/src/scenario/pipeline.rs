//! MCO's build pipeline as steps, played through the API server as MCO plays it (the build
//! controller as the machine-os-builder, [`crate::mco::MOB_USER`]): a pool's rendered config
//! changed mid-rollout, a MOSC's Containerfile changed (the fix superseding a failed build),
//! builds failing or their Jobs refused, a pre-built image (4.21 on), a MOSC deleted leaving its
//! builds behind, an upgrade in flight and finished; waiting for a named build to exist, have
//! its Job or succeed; and what the webhook refused of MCO's requests.
//!
//! The knobs that need no API call are the simulator's: [`crate::simulator::Simulator`]
//! `fail_builds`, `set_build_delay`, `restart_builder`, `roll_out_mco`, `refused_by_webhook`.

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{ResourceQuota, Secret};
use kube::api::{Api, DeleteParams, DynamicObject, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

use super::cluster::{Build, Cluster, STEP_TIMEOUT};
use super::wait::wait_for;
use crate::Result;
use crate::clusterversion;
use crate::image_ref::ImageRef;
use crate::mco::{self, CURRENT_MOSB, PRE_BUILT_IMAGE, str_at};
use crate::release::{Release, TABLE, ZStream};
use crate::simulator::{MCO_NAMESPACE, job_name};

/// The ResourceQuota that refuses build Jobs ([`block_build_jobs`]).
pub const NO_BUILD_JOBS_QUOTA: &str = "mosc-guard-e2e-no-build-jobs";

/// The push secret the kit's MOSCs name (`spec.renderedImagePushSecret.name`).
pub const PUSH_SECRET: &str = "push-secret";

/// The z-stream whose version string is `version`, if the table has it.
pub fn z_stream_of(version: &str) -> Option<ZStream> {
    TABLE.iter().find_map(|row| {
        [row.release.early(), row.release.late()]
            .into_iter()
            .find(|z| z.version() == version)
    })
}

/// Sets pool `pool`'s `spec.configuration` to the rendered MachineConfig `rendered`, created
/// first unless it exists (what the render controller does when a MachineConfig changes; it is
/// not simulated). A layered pool's MOSC then gets a new build; its nodes wait for it.
pub async fn render_pool(cluster: &Cluster, pool: &str, rendered: &str) -> Result<()> {
    super::create::create_rendered_config(&cluster.client, pool, rendered).await?;
    mco::mcps(&cluster.client)
        .patch(
            pool,
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"configuration": {"name": rendered}}})),
        )
        .await?;
    tracing::info!("scenario: pool {pool} now renders {rendered}");
    Ok(())
}

/// Replaces MOSC `mosc`'s Containerfile with `content` (the admin's fix of a failing build):
/// the build inputs change, so MCO names a new build for the same rendered config, and starting
/// it deletes the builds of the MOSC that have not succeeded.
pub async fn change_containerfile(cluster: &Cluster, mosc: &str, content: &str) -> Result<()> {
    let patch =
        json!({"spec": {"containerFile": [{"containerfileArch": "NoArch", "content": content}]}});
    mco::moscs(&cluster.client)
        .patch(mosc, &PatchParams::default(), &Patch::Merge(&patch))
        .await?;
    tracing::info!("scenario: MachineOSConfig {mosc}'s Containerfile changed");
    Ok(())
}

/// Builds that finish from now on fail (`true`) or succeed again (`false`).
pub fn fail_builds(cluster: &Cluster, fail: bool) {
    cluster.sim.fail_builds(fail);
}

/// Makes the API server refuse (`true`) or accept again (`false`) new build Jobs in
/// `openshift-machine-config-operator`: a ResourceQuota of 0 `count/jobs.batch` (with its
/// usage written, as the quota controller would), so the machine-os-builder's Job create gets
/// a real 403 "exceeded quota". MCO keeps the MOSB unstarted and retries the start.
pub async fn block_build_jobs(cluster: &Cluster, block: bool) -> Result<()> {
    let api: Api<ResourceQuota> = Api::namespaced(cluster.client.clone(), MCO_NAMESPACE);
    if !block {
        match api
            .delete(NO_BUILD_JOBS_QUOTA, &DeleteParams::default())
            .await
        {
            Ok(_) => {}
            Err(kube::Error::Api(s)) if s.code == 404 => {}
            Err(e) => return Err(e.into()),
        }
        // The quota admission reads quotas through an informer: wait until a Job goes through.
        return wait_jobs_admitted(cluster, true).await;
    }
    let quota: ResourceQuota = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "ResourceQuota",
        "metadata": {"name": NO_BUILD_JOBS_QUOTA, "namespace": MCO_NAMESPACE},
        "spec": {"hard": {"count/jobs.batch": "0"}},
    }))?;
    let mut created = api.create(&PostParams::default(), &quota).await?;
    created.status = Some(serde_json::from_value(json!({
        "hard": {"count/jobs.batch": "0"}, "used": {"count/jobs.batch": "0"},
    }))?);
    api.replace_status(NO_BUILD_JOBS_QUOTA, &PostParams::default(), &created)
        .await?;
    wait_jobs_admitted(cluster, false).await
}

/// Waits until a server-side dry-run create of a Job in MCO's namespace is admitted (`true`)
/// or refused by the quota (`false`).
async fn wait_jobs_admitted(cluster: &Cluster, admitted: bool) -> Result<()> {
    let jobs: Api<Job> = Api::namespaced(cluster.client.clone(), MCO_NAMESPACE);
    let probe: Job = serde_json::from_value(json!({
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": "mosc-guard-e2e-quota-probe"},
        "spec": {"template": {"spec": {"restartPolicy": "Never",
                  "containers": [{"name": "probe", "image": "registry.example.com/probe:1"}]}}},
    }))?;
    let params = PostParams {
        dry_run: true,
        ..PostParams::default()
    };
    wait_for(
        || async {
            let result = jobs.create(&params, &probe).await;
            Ok((result.is_ok() == admitted).then_some(()))
        },
        STEP_TIMEOUT,
        &format!(
            "build Jobs to be {}",
            if admitted { "admitted" } else { "refused" }
        ),
    )
    .await
}

/// The ValidatingAdmissionPolicy of [`refuse_build_deletions_by_mob`].
pub const REFUSE_MOB_DELETES_POLICY: &str = "mosc-guard-e2e-refuse-mob-build-deletes";

/// Makes the API server refuse (`true`) or allow again (`false`) every MachineOSBuild deletion
/// the machine-os-builder makes, with a ValidatingAdmissionPolicy (not a webhook, so the
/// refusals are not [`crate::simulator::Simulator::refused_by_webhook`]'s): an error in
/// `deleteOtherBuildsForMachineOSConfig`, which aborts the start of a new build. Waits until
/// the policy is in effect, probed with a server-side dry run of deleting MachineOSBuild
/// `probe` (which must exist) as the builder.
pub async fn refuse_build_deletions_by_mob(
    cluster: &Cluster,
    refuse: bool,
    probe: &str,
) -> Result<()> {
    if refuse {
        let yaml = format!(
            r#"
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {{name: {REFUSE_MOB_DELETES_POLICY}}}
spec:
  failurePolicy: Fail
  matchConstraints:
    resourceRules:
    - apiGroups: [machineconfiguration.openshift.io]
      apiVersions: ["*"]
      operations: [DELETE]
      resources: [machineosbuilds]
  validations:
  - expression: request.userInfo.username != "{user}"
    message: the test refuses the machine-os-builder's build deletions
    reason: Forbidden
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {{name: {REFUSE_MOB_DELETES_POLICY}}}
spec:
  policyName: {REFUSE_MOB_DELETES_POLICY}
  validationActions: [Deny]
"#,
            user = crate::mco::MOB_USER
        );
        crate::users::apply(&cluster.cp, &yaml).await?;
    } else {
        for kind in [
            "validatingadmissionpolicybinding",
            "validatingadmissionpolicy",
        ] {
            let out = cluster
                .cp
                .kubectl([
                    "delete",
                    kind,
                    REFUSE_MOB_DELETES_POLICY,
                    "--ignore-not-found",
                ])
                .await?;
            if !out.success() {
                return Err(format!("kubectl delete {kind}: {out:?}").into());
            }
        }
    }
    let mob = crate::controlplane::client_from_kubeconfig(cluster.sim.builder_kubeconfig()).await?;
    let api = mco::mosbs(&mob);
    let params = DeleteParams {
        dry_run: true,
        ..DeleteParams::default()
    };
    wait_for(
        || async {
            let refused = match api.delete(probe, &params).await {
                Ok(_) => false,
                Err(kube::Error::Api(s)) if s.message.contains(REFUSE_MOB_DELETES_POLICY) => true,
                Err(e) => return Err(e.into()),
            };
            Ok((refused == refuse).then_some(()))
        },
        STEP_TIMEOUT,
        &format!(
            "the machine-os-builder's build deletions to be {}",
            if refuse { "refused" } else { "allowed" }
        ),
    )
    .await
}

/// Pushes a new image to the kit's MOSC push spec tag ([`Cluster::push_spec`], `<repo>:latest`,
/// where an admin's pre-built image lives) and returns it digested (`<repo>@sha256:...`).
pub async fn push_pre_built_image(cluster: &Cluster) -> Result<String> {
    let target = ImageRef::parse(&cluster.push_spec())?;
    let tag = target.tag.clone().unwrap_or_else(|| "latest".to_owned());
    let digest = cluster.registry.push_image(&target.repo, &tag).await?;
    Ok(target.with_digest(&digest))
}

/// Creates the push secret MCO's seeding requires in `openshift-machine-config-operator`
/// (an admin's, before the MOSC), unless it exists.
pub async fn create_push_secret(cluster: &Cluster) -> Result<()> {
    let api: Api<Secret> = Api::namespaced(cluster.client.clone(), MCO_NAMESPACE);
    let secret: Secret = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": PUSH_SECRET, "namespace": MCO_NAMESPACE},
        "type": "kubernetes.io/dockerconfigjson",
        "stringData": {".dockerconfigjson": "{\"auths\":{}}"},
    }))?;
    match api.create(&PostParams::default(), &secret).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.code == 409 => Ok(()),
        Err(e) => Err(e.into()),
    }
}

/// Creates MOSC `pool` annotated `machineconfiguration.openshift.io/pre-built-image: image`
/// (and the push secret it needs): from 4.21 MCO seeds it with a synthetic build of that image
/// instead of building; earlier releases ignore the annotation and build.
pub async fn create_pre_built_mosc(cluster: &Cluster, pool: &str, image: &str) -> Result<()> {
    create_push_secret(cluster).await?;
    super::create::create_mosc_annotated(
        &cluster.client,
        pool,
        &cluster.push_spec(),
        &[(PRE_BUILT_IMAGE, image)],
    )
    .await?;
    tracing::info!("scenario: MachineOSConfig {pool} annotated with pre-built image {image}");
    Ok(())
}

/// Deletes MOSC `name` with `--cascade=orphan`: the garbage collector takes the ownerReference
/// off its builds instead of deleting them, so they stay, labelled with its name.
pub async fn delete_mosc_orphaning(cluster: &Cluster, name: &str) -> Result<()> {
    let out = cluster
        .cp
        .kubectl(["delete", "machineosconfig", name, "--cascade=orphan"])
        .await?;
    if !out.success() {
        return Err(format!("kubectl delete --cascade=orphan {name}: {out:?}").into());
    }
    Ok(())
}

/// The name of the build MOSC `mosc` gets for the pool's current config and its current spec
/// (what MCO names `<mosc>-<hash of the inputs>`).
pub async fn build_name_for(cluster: &Cluster, mosc: &str) -> Result<String> {
    let m = mco::moscs(&cluster.client).get(mosc).await?;
    let pool = str_at(&m.data, &["spec", "machineConfigPool", "name"])
        .ok_or("the MOSC names no pool")?
        .to_owned();
    let pool = mco::mcps(&cluster.client).get(&pool).await?;
    Ok(crate::simulator::build_name(
        &m,
        &mco::pool_target_config(&pool),
    ))
}

/// Waits until MachineOSBuild `name` exists and returns it.
pub async fn wait_build_exists(cluster: &Cluster, name: &str) -> Result<DynamicObject> {
    wait_for(
        || async { Ok(mco::mosbs(&cluster.client).get_opt(name).await?) },
        STEP_TIMEOUT,
        &format!("MachineOSBuild {name} to exist"),
    )
    .await
}

/// Waits until MachineOSBuild `name`'s build Job exists (the build started).
pub async fn wait_build_job(cluster: &Cluster, name: &str) -> Result<Job> {
    let jobs: Api<Job> = Api::namespaced(cluster.client.clone(), MCO_NAMESPACE);
    let job = job_name(name);
    wait_for(
        || async { Ok(jobs.get_opt(&job).await?) },
        STEP_TIMEOUT,
        &format!("Job {job} of MachineOSBuild {name} to exist"),
    )
    .await
}

/// Waits until MachineOSBuild `name` has Succeeded and returns it with its image.
pub async fn wait_build_succeeded(cluster: &Cluster, name: &str) -> Result<Build> {
    wait_build_state(cluster, name, "Succeeded").await
}

/// Waits until MachineOSBuild `name` has Failed.
pub async fn wait_build_failed(cluster: &Cluster, name: &str) -> Result<()> {
    wait_build_state(cluster, name, "Failed").await.map(|_| ())
}

async fn wait_build_state(cluster: &Cluster, name: &str, condition: &str) -> Result<Build> {
    wait_for(
        || async {
            let b = mco::mosbs(&cluster.client).get_opt(name).await?;
            Ok(b.filter(|b| mco::condition_true(b, condition))
                .map(|b| Build {
                    mosb: name.to_owned(),
                    image: str_at(&b.data, &["status", "digestedImagePushSpec"])
                        .unwrap_or_default()
                        .to_owned(),
                }))
        },
        STEP_TIMEOUT,
        &format!("MachineOSBuild {name} to be {condition}"),
    )
    .await
}

/// Waits until MOSC `mosc`'s current-build annotation names a build other than `previous`
/// (MCO names a build when it starts) and returns its name.
pub async fn wait_current_build_other_than(
    cluster: &Cluster,
    mosc: &str,
    previous: &str,
) -> Result<String> {
    wait_for(
        || async {
            let m = mco::moscs(&cluster.client).get_opt(mosc).await?;
            Ok(m.and_then(|m| {
                m.metadata
                    .annotations
                    .and_then(|mut a| a.remove(CURRENT_MOSB))
                    .filter(|n| !n.is_empty() && n != previous)
            }))
        },
        STEP_TIMEOUT,
        &format!("MachineOSConfig {mosc} to name a build other than {previous}"),
    )
    .await
}

/// The MOSC's `status.currentImagePullSpec`, if any.
pub async fn current_image(cluster: &Cluster, mosc: &str) -> Result<Option<String>> {
    let m = mco::moscs(&cluster.client).get(mosc).await?;
    Ok(str_at(&m.data, &["status", "currentImagePullSpec"]).map(str::to_owned))
}

/// Asserts no request of MCO's (the machine-os-builder's above all) was refused by a webhook,
/// and the simulator wrote nothing a real API server rejects.
pub fn assert_mco_never_refused(cluster: &Cluster) {
    assert_eq!(
        cluster.sim.refused_by_webhook(),
        Vec::<String>::new(),
        "requests of MCO refused by a webhook"
    );
    assert_eq!(
        cluster.sim.rejected_writes(),
        Vec::<String>::new(),
        "the simulator wrote objects the API server rejected"
    );
}

impl Cluster {
    /// Starts an upgrade to `target` (a [`Release`] is its late z-stream): the ClusterVersion
    /// says it is in flight (`history[0]` Partial for the target, `history[1]` Completed for
    /// the release running, Progressing=True, `desired` = the target). MCO keeps playing the
    /// running release ([`Cluster::roll_out_mco`] switches it, as MCO's operator does when it
    /// rolls out the new release's components).
    pub async fn start_upgrade(&self, target: impl Into<ZStream>) -> Result<()> {
        let target = target.into();
        self.cp.start_upgrade(target.version()).await?;
        tracing::info!(
            "scenario: upgrading from {} to {target} (MCO still plays {})",
            self.z_stream,
            self.sim.z_stream()
        );
        Ok(())
    }

    /// MCO's operator rolls out `target`'s components mid-upgrade: the machine-os-builder, the
    /// node controller and the Machine Config Server behave as `target`'s from now on.
    pub fn roll_out_mco(&self, target: impl Into<ZStream>) {
        self.sim.roll_out_mco(target);
    }

    /// The upgrade in flight completes: MCO plays the target (if it was not rolled out yet; an
    /// upgrade completes only once MCO has been upgraded), then the ClusterVersion says
    /// Completed.
    pub async fn finish_upgrade(&self) -> Result<()> {
        let version = clusterversion::desired_version(&self.client)
            .await?
            .ok_or("the ClusterVersion has no desired version")?;
        let target =
            z_stream_of(&version).ok_or_else(|| format!("{version} is not in the kit's table"))?;
        if self.sim.z_stream() != target {
            self.sim.roll_out_mco(target);
        }
        self.cp.finish_upgrade().await?;
        tracing::info!("scenario: upgrade to {target} completed");
        Ok(())
    }
}

/// The ClusterVersion's history as (version, state, completionTime) triples, newest first.
pub async fn release_history(cluster: &Cluster) -> Result<Vec<(String, String, Value)>> {
    let cv = clusterversion::api(&cluster.client)
        .get(clusterversion::NAME)
        .await?;
    let text = |h: &Value, k: &str| h.get(k).and_then(Value::as_str).unwrap_or("").to_owned();
    Ok(cv
        .data
        .pointer("/status/history")
        .and_then(Value::as_array)
        .map(|hs| {
            hs.iter()
                .map(|h| {
                    (
                        text(h, "version"),
                        text(h, "state"),
                        h.get("completionTime").cloned().unwrap_or(Value::Null),
                    )
                })
                .collect()
        })
        .unwrap_or_default())
}

/// Every z-stream the kit plays, oldest first (each release's early, then late).
pub fn all_z_streams() -> Vec<ZStream> {
    Release::ALL
        .iter()
        .flat_map(|r| [r.early(), r.late()])
        .collect()
}
