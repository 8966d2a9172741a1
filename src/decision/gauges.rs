//! The gauges of what the engine would decide now, computed on each `/metrics` scrape from the
//! caches it decides from: the release rules it applies, whether each MachineOSConfig's deletion
//! would be refused, the nodes stuck on a lost image per pool, and the builds `prune` would
//! delete per MachineOSConfig. Routes only ask for the text.

use std::collections::BTreeMap;

use k8s_openapi::jiff::Timestamp;

use crate::access::view::ClusterView;
use crate::core::policy::{self, Deletion, PolicyMode};
use crate::core::prune;
use crate::core::recovery::stuck::stuck_per_pool;
use crate::core::snapshot::Snapshot;

use super::Engine;

impl<V: ClusterView> Engine<V> {
    /// Sets the cluster gauges from the caches, then renders every metric (OpenMetrics text);
    /// `ready` is the guard's readiness, exported beside them.
    pub fn render_metrics(&self, ready: bool) -> String {
        let view = &*self.view;
        let mut objects = view.objects();
        self.metrics.release_rules(&objects.rules());
        self.metrics
            .deletion_blocked(objects.machine_os_configs.iter().map(|mosc| {
                let verdict = self.cached(Deletion::MachineOSConfig(mosc));
                (mosc.name().to_string(), verdict.blocked_by())
            }));
        self.metrics
            .deletable_builds(deletable_builds(view, &objects));
        // Only the nodes that have not reached their desired image: the others cannot be stuck.
        objects.nodes = view.unreached_nodes();
        self.metrics.nodes_stuck(stuck_per_pool(&objects));
        self.metrics.render(&view.sizes(), &view.stale(), ready)
    }
}

/// `prune`'s plan with its defaults, per MachineOSConfig (every config, 0 included): each
/// build's verdict the indexed one (in-use, as the plan requires), and every node only when
/// the plan reads them (a build without an image of its own, rarely).
fn deletable_builds<V: ClusterView>(view: &V, objects: &Snapshot) -> BTreeMap<String, usize> {
    let mut all = objects.clone();
    if prune::reads_every_node(objects) {
        all.nodes = view.nodes(None, PolicyMode::InUse);
    }
    let plan = prune::plan_with(
        &all,
        &prune::Options::default(),
        Timestamp::now(),
        |build| {
            policy::evaluate_indexed(
                objects,
                Deletion::MachineOSBuild(build),
                PolicyMode::InUse,
                |digests| view.nodes(digests, PolicyMode::InUse),
            )
        },
    );
    let mut counts: BTreeMap<String, usize> = objects
        .machine_os_configs
        .iter()
        .map(|c| (c.name().to_string(), 0))
        .collect();
    for build in plan.deletable() {
        *counts
            .entry(build.config.clone().unwrap_or_default())
            .or_default() += 1;
    }
    counts
}
