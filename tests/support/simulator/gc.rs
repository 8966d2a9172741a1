//! The garbage collector's part for MOSC -> MOSB ownership (there is no kube-controller-manager):
//! foreground and orphan deletion of MOSCs, and removal of MOSBs whose owner is gone.

use std::collections::HashSet;

use kube::api::{DeleteParams, DynamicObject, Patch, PatchParams};
use serde_json::json;

use super::super::Result;
use super::super::mco;
use super::{Ctx, Reconciler, is_not_found};

const FOREGROUND: &str = "foregroundDeletion";
const ORPHAN: &str = "orphan";

pub(super) struct GarbageCollector {
    ctx: Ctx,
}

impl GarbageCollector {
    pub(super) fn new(ctx: Ctx) -> Self {
        Self { ctx }
    }

    async fn delete_mosb(&self, mosb: &DynamicObject, why: &str) -> Result<()> {
        if mosb.metadata.deletion_timestamp.is_some() {
            return Ok(());
        }
        let name = mosb.metadata.name.clone().unwrap_or_default();
        match mco::mosbs(&self.ctx.client)
            .delete(&name, &DeleteParams::background())
            .await
        {
            Ok(_) => {
                tracing::info!("sim gc: deleted MachineOSBuild {name} ({why})");
                Ok(())
            }
            Err(e) if is_not_found(&e) => Ok(()),
            Err(e) => Err(format!("gc deleting MachineOSBuild {name}: {e}").into()),
        }
    }

    /// Removes `finalizer` from the MOSC (guarded by its resourceVersion).
    async fn drop_finalizer(&self, mosc: &DynamicObject, finalizer: &str) -> Result<()> {
        let name = mosc.metadata.name.clone().unwrap_or_default();
        let rest: Vec<&String> = mosc
            .metadata
            .finalizers
            .iter()
            .flatten()
            .filter(|f| f.as_str() != finalizer)
            .collect();
        let patch = json!({"metadata": {"finalizers": rest, "resourceVersion": mosc.metadata.resource_version}});
        mco::moscs(&self.ctx.client)
            .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
            .await?;
        tracing::info!("sim gc: removed finalizer {finalizer} from MachineOSConfig {name}");
        Ok(())
    }
}

impl Reconciler for GarbageCollector {
    async fn sync(&mut self) -> Result<()> {
        // MOSBs first: an owner that existed when a MOSB was listed shows up in the later MOSC list
        // unless it was deleted meanwhile (the other order could miss a MOSC created in between).
        let mosbs = mco::list_all(&mco::mosbs(&self.ctx.client)).await?;
        let moscs = mco::list_all(&mco::moscs(&self.ctx.client)).await?;
        let live: HashSet<&str> = moscs
            .iter()
            .filter_map(|m| m.metadata.uid.as_deref())
            .collect();
        let owners = |b: &DynamicObject| -> Vec<(String, String)> {
            b.metadata
                .owner_references
                .iter()
                .flatten()
                .filter(|r| r.kind == "MachineOSConfig")
                .map(|r| (r.name.clone(), r.uid.clone()))
                .collect()
        };

        // Background deletion: every owner is gone (confirmed by a live read, as the GC does).
        for mosb in &mosbs {
            let refs = owners(mosb);
            if refs.is_empty() || refs.iter().any(|(_, uid)| live.contains(uid.as_str())) {
                continue;
            }
            let mut owner_alive = false;
            for (name, uid) in &refs {
                let current = mco::moscs(&self.ctx.client).get_opt(name).await?;
                owner_alive |=
                    current.and_then(|m| m.metadata.uid).as_deref() == Some(uid.as_str());
            }
            if !owner_alive {
                self.delete_mosb(mosb, "its MachineOSConfig is gone")
                    .await?;
            }
        }

        for mosc in moscs
            .iter()
            .filter(|m| m.metadata.deletion_timestamp.is_some())
        {
            let uid = mosc.metadata.uid.clone().unwrap_or_default();
            let finalizers = mosc.metadata.finalizers.clone().unwrap_or_default();
            let dependents: Vec<&DynamicObject> = mosbs
                .iter()
                .filter(|b| owners(b).iter().any(|(_, u)| *u == uid))
                .collect();
            if finalizers.iter().any(|f| f == ORPHAN) {
                for mosb in &dependents {
                    let name = mosb.metadata.name.clone().unwrap_or_default();
                    let patch = json!({"metadata": {"ownerReferences": null}});
                    mco::mosbs(&self.ctx.client)
                        .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
                        .await?;
                    tracing::info!("sim gc: orphaned MachineOSBuild {name}");
                }
                self.drop_finalizer(mosc, ORPHAN).await?;
            } else if finalizers.iter().any(|f| f == FOREGROUND) {
                if dependents.is_empty() {
                    self.drop_finalizer(mosc, FOREGROUND).await?;
                } else {
                    for mosb in dependents {
                        self.delete_mosb(mosb, "foreground deletion of its MachineOSConfig")
                            .await?;
                    }
                }
            }
        }
        Ok(())
    }
}
