//! `mosc-guard release-finalizers`: the uninstall step of defer mode. Removes mosc-guard's
//! finalizer from every MachineOSConfig, so removing mosc-guard strands none of them.
//!
//! A deletion still deferred (nodes need its images) is kept unless `--force`: releasing it
//! would let MCO delete an image a node is rolling to. Re-run once the rollout settles.

use std::fmt::Write as _;

use kube::api::{Api, Patch, PatchParams};

use crate::controller::FIELD_MANAGER;
use crate::finalizer::{self, Uninstall};
use crate::live;
use crate::message;
use crate::model::MachineOSConfig;
use crate::policy::{self, Deletion, PolicyMode};

/// Attempts per object when its resourceVersion changes under us.
const ATTEMPTS: usize = 3;

/// What `release-finalizers` did.
#[derive(Debug, Default)]
pub struct Summary {
    /// Names whose finalizer was removed.
    pub released: Vec<String>,
    /// Deferred deletions kept, with the reason.
    pub kept: Vec<(String, String)>,
    /// Objects that got the finalizer back at once: the mutating webhook is still active.
    pub readded: Vec<String>,
}

impl Summary {
    /// True when no MachineOSConfig carries the finalizer any more.
    pub fn complete(&self) -> bool {
        self.kept.is_empty() && self.readded.is_empty()
    }

    /// Lines for the terminal.
    pub fn render(&self) -> String {
        let mut out = String::new();
        for name in &self.released {
            let _ = writeln!(out, "released machineosconfig/{name}");
        }
        for (name, why) in &self.kept {
            let _ = writeln!(out, "kept machineosconfig/{name}: {why}");
        }
        for name in &self.readded {
            let _ = writeln!(
                out,
                "machineosconfig/{name}: the finalizer came straight back: the MutatingWebhookConfiguration \
                 mosc-guard is still active. Delete it first (kubectl delete mutatingwebhookconfiguration mosc-guard), then re-run."
            );
        }
        if self.released.is_empty() && self.complete() {
            out.push_str("no MachineOSConfig carries the finalizer\n");
        }
        out
    }
}

/// Releases every MachineOSConfig's finalizer (see the module docs).
pub async fn release_all(client: &kube::Client, force: bool) -> Result<Summary, String> {
    let api: Api<MachineOSConfig> = Api::all(client.clone());
    let mut summary = Summary::default();
    let (snapshot, missing) = live::snapshot(client).await.map_err(|e| e.to_string())?;
    if let Some(what) = missing.iter().find(|m| m.starts_with("machineosconfigs")) {
        return Err(format!("the cluster does not serve {what}"));
    }
    for listed in &snapshot.machine_os_configs {
        let name = listed.name().to_string();
        let mut current = listed.as_ref().clone();
        let mut done = false;
        for _ in 0..ATTEMPTS {
            // Deletion is judged in-flight whatever the webhook's policy: in-use would keep a
            // settled pool's configuration forever.
            let verdict = policy::evaluate(
                &snapshot,
                Deletion::MachineOSConfig(&current),
                PolicyMode::InFlight,
            );
            match finalizer::uninstall(&current.metadata, Some(&verdict), force) {
                Uninstall::Skip => {}
                Uninstall::Keep { .. } => {
                    let why = format!(
                        "{} Re-run when the rollout settles, or pass --force to release it now (the pool may degrade).",
                        message::deferred(&verdict).trim_start_matches("mosc-guard: ")
                    );
                    summary.kept.push((name.clone(), why));
                }
                Uninstall::Remove => {
                    let rv = current.metadata.resource_version.as_deref();
                    let Some(patch) = finalizer::remove_patch(&current.metadata, rv) else {
                        done = true;
                        break;
                    };
                    let params = PatchParams {
                        field_manager: Some(FIELD_MANAGER.to_string()),
                        ..Default::default()
                    };
                    match api.patch(&name, &params, &Patch::Json::<()>(patch)).await {
                        Ok(after) if finalizer::has(&after.metadata) => {
                            summary.readded.push(name.clone())
                        }
                        Ok(_) => summary.released.push(name.clone()),
                        Err(kube::Error::Api(s)) if s.code == 404 => {}
                        Err(kube::Error::Api(s)) if s.code == 409 || s.code == 422 => {
                            // Changed since listed: read it again and re-plan.
                            match api.get_opt(&name).await {
                                Ok(Some(fresh)) => {
                                    current = fresh;
                                    continue;
                                }
                                Ok(None) => {}
                                Err(e) => {
                                    return Err(format!("reading machineosconfig {name}: {e}"));
                                }
                            }
                        }
                        Err(e) => {
                            return Err(format!(
                                "removing the finalizer from machineosconfig {name}: {e}"
                            ));
                        }
                    }
                }
            }
            done = true;
            break;
        }
        if !done {
            return Err(format!(
                "machineosconfig {name} kept changing; {ATTEMPTS} attempts to remove the finalizer conflicted"
            ));
        }
    }
    Ok(summary)
}
