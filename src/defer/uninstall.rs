//! `mosc-guard remove-finalizers`: the uninstall step of defer mode. Removes mosc-guard's
//! finalizer from every MachineOSConfig, so removing mosc-guard strands none of them.
//!
//! A deletion still deferred (nodes need its images) is kept unless `--force`: letting it go
//! would let MCO delete an image a node is rolling to. Re-run once the rollout settles.

use std::fmt::Write as _;

use kube::api::{Api, Patch};

use crate::access::live::{self, LiveError};
use crate::core::finalizer::{self, Uninstall};
use crate::core::message;
use crate::core::model::MachineOSConfig;
use crate::core::policy::{self, Deletion, PolicyMode};
use crate::defer::controller::patch_params;

/// Attempts per object when its resourceVersion changes under us.
const ATTEMPTS: usize = 3;
/// How long to wait before checking that no finalizer came back (a running controller adds
/// it again within a watch event's delay).
const SETTLE: std::time::Duration = std::time::Duration::from_secs(2);

/// What `remove-finalizers` did.
#[derive(Debug, Default)]
pub struct Summary {
    /// Names whose finalizer was removed.
    pub removed: Vec<String>,
    /// Deferred deletions kept, with the reason.
    pub kept: Vec<(String, String)>,
    /// Objects that got the finalizer back at once: the mutating webhook is still active.
    pub readded: Vec<String>,
    /// Objects whose finalizer could not be removed, with the reason (RBAC, another webhook
    /// refusing the update, the API server unreachable); the run goes on with the others.
    pub failed: Vec<(String, RemovalError)>,
}

impl Summary {
    /// True when no MachineOSConfig carries the finalizer any more.
    pub fn complete(&self) -> bool {
        self.kept.is_empty() && self.readded.is_empty() && self.failed.is_empty()
    }

    /// Lines for the terminal.
    pub fn render(&self) -> String {
        let mut out = String::new();
        for name in &self.removed {
            let _ = writeln!(out, "removed the finalizer from machineosconfig/{name}");
        }
        for (name, why) in &self.kept {
            let _ = writeln!(out, "kept machineosconfig/{name}: {why}");
        }
        for name in &self.readded {
            let _ = writeln!(
                out,
                "machineosconfig/{name}: the finalizer came back: the MutatingWebhookConfiguration mosc-guard is still \
                 registered, or a mosc-guard replica runs without --no-new-finalizers. Delete the webhook configuration \
                 (kubectl delete mutatingwebhookconfiguration mosc-guard) and drain the guard first, then re-run."
            );
        }
        for (name, why) in &self.failed {
            let _ = writeln!(
                out,
                "could not remove the finalizer from machineosconfig/{name}: {why}"
            );
        }
        if self.removed.is_empty() && self.complete() {
            out.push_str("no MachineOSConfig carries the finalizer\n");
        }
        out
    }
}

/// What happened to one MachineOSConfig.
enum Removal {
    Done,
    Readded,
    Kept(String),
    /// No finalizer of ours, or gone meanwhile.
    Nothing,
}

/// Why one MachineOSConfig's finalizer could not be removed.
#[derive(Debug, thiserror::Error)]
pub enum RemovalError {
    #[error("reading the cluster to decide: {0}")]
    Read(#[from] LiveError),
    #[error("removing the finalizer: {}", live::chain(.0))]
    Patch(kube::Error),
    #[error("reading it again: {}", live::chain(.0))]
    Reread(kube::Error),
    #[error("it kept changing; {ATTEMPTS} attempts to remove the finalizer conflicted")]
    KeptChanging,
}

/// Removes one MachineOSConfig's finalizer, re-reading it when it changed under us.
async fn remove_one(
    client: &kube::Client,
    api: &Api<MachineOSConfig>,
    snapshot: &crate::core::snapshot::Snapshot,
    listed: &MachineOSConfig,
    force: bool,
) -> Result<Removal, RemovalError> {
    let name = listed.name();
    let mut current = listed.clone();
    for _ in 0..ATTEMPTS {
        // A deferred deletion is judged on nodes and builds read just now, not at the start
        // of a long run; in-flight whatever the webhook's policy (in-use would keep a
        // settled pool's configuration forever).
        let fresh;
        let source = if finalizer::is_terminating(&current.metadata) && !force {
            fresh = live::snapshot(client).await?.0;
            &fresh
        } else {
            snapshot
        };
        let verdict = policy::evaluate(
            source,
            Deletion::MachineOSConfig(&current),
            PolicyMode::InFlight,
        );
        match finalizer::uninstall(&current.metadata, Some(&verdict), force) {
            Uninstall::Skip => return Ok(Removal::Nothing),
            Uninstall::Keep { .. } => {
                return Ok(Removal::Kept(format!(
                    "{} Re-run when the rollout settles, or pass --force to let it go now (the pool may degrade).",
                    message::deferred(&verdict).trim_start_matches("mosc-guard: ")
                )));
            }
            Uninstall::Remove => {}
        }
        let rv = current.metadata.resource_version.as_deref();
        // Forcing a deletion still deferred records why, which also tells the validating
        // webhook that the removal is deliberate.
        let forced = (force && finalizer::is_terminating(&current.metadata))
            .then_some("mosc-guard remove-finalizers --force");
        let Some(patch) = finalizer::remove_patch(&current.metadata, rv, forced) else {
            return Ok(Removal::Nothing);
        };
        match api
            .patch(name, &patch_params(), &Patch::Json::<()>(patch))
            .await
        {
            Ok(after) if finalizer::has(&after.metadata) => return Ok(Removal::Readded),
            Ok(_) => return Ok(Removal::Done),
            Err(kube::Error::Api(s)) if s.code == 404 => return Ok(Removal::Nothing),
            Err(kube::Error::Api(s)) if s.code == 409 || s.code == 422 => {
                // Changed since listed (or refused as invalid): read it again and re-plan;
                // an object that did not change gets the refusal as its reason.
                match api.get_opt(name).await {
                    Ok(Some(fresh))
                        if fresh.metadata.resource_version != current.metadata.resource_version =>
                    {
                        current = fresh;
                    }
                    Ok(Some(_)) => return Err(RemovalError::Patch(kube::Error::Api(s))),
                    Ok(None) => return Ok(Removal::Nothing),
                    Err(e) => return Err(RemovalError::Reread(e)),
                }
            }
            Err(e) => return Err(RemovalError::Patch(e)),
        }
    }
    Err(RemovalError::KeptChanging)
}

/// Why `remove-finalizers` could read nothing to remove.
#[derive(Debug, thiserror::Error)]
pub enum UninstallError {
    #[error(transparent)]
    Live(#[from] LiveError),
    #[error("the cluster does not serve {0}")]
    NotServed(&'static str),
    #[error("listing machineosconfigs again: {}", live::chain(.0))]
    Relist(kube::Error),
}

/// Removes every MachineOSConfig's finalizer (see the module docs). Errs only when nothing
/// can be read at all; an object whose finalizer cannot be removed is named in
/// [`Summary::failed`].
pub async fn remove_all(client: &kube::Client, force: bool) -> Result<Summary, UninstallError> {
    let api: Api<MachineOSConfig> = Api::all(client.clone());
    let mut summary = Summary::default();
    let (snapshot, missing) = live::snapshot(client).await?;
    if let Some(what) = missing.iter().find(|m| m.starts_with("machineosconfigs")) {
        return Err(UninstallError::NotServed(what));
    }
    for listed in &snapshot.machine_os_configs {
        let name = listed.name().to_string();
        // One object's failure (a 403, a refused update) does not stop the others.
        match remove_one(client, &api, &snapshot, listed, force).await {
            Ok(Removal::Done) => summary.removed.push(name),
            Ok(Removal::Readded) => summary.readded.push(name),
            Ok(Removal::Kept(why)) => summary.kept.push((name, why)),
            Ok(Removal::Nothing) => {}
            Err(why) => summary.failed.push((name, why)),
        }
    }
    if !summary.removed.is_empty() {
        tokio::time::sleep(SETTLE).await;
        let now = api
            .list(&Default::default())
            .await
            .map_err(UninstallError::Relist)?;
        let back: Vec<String> = now
            .items
            .iter()
            .filter(|m| finalizer::has(&m.metadata))
            .map(|m| m.name().to_string())
            .filter(|name| summary.removed.contains(name))
            .collect();
        summary.removed.retain(|name| !back.contains(name));
        summary.readded.extend(back);
    }
    Ok(summary)
}
