//! The gauges of what the engine would decide now, computed on each `/metrics` scrape from the
//! caches it decides from: the release rules it applies, whether each MachineOSConfig's deletion
//! would be refused, and the nodes stuck on a lost image per pool. Routes only ask for the text.

use crate::access::view::ClusterView;
use crate::core::policy::Deletion;
use crate::core::recovery::stuck::stuck_per_pool;

use super::Engine;

impl<V: ClusterView> Engine<V> {
    /// Sets the cluster gauges from the caches, then renders every metric (OpenMetrics text);
    /// `ready` is the guard's readiness, exported beside them.
    pub fn render_metrics(&self, ready: bool) -> String {
        let view = &self.view;
        let mut objects = view.objects();
        self.metrics.release_rules(&objects.rules());
        self.metrics
            .deletion_blocked(objects.machine_os_configs.iter().map(|mosc| {
                let verdict = self.cached(Deletion::MachineOSConfig(mosc));
                (mosc.name().to_string(), verdict.blocked_by())
            }));
        // Only the nodes that have not reached their desired image: the others cannot be stuck.
        objects.nodes = view.unreached_nodes();
        self.metrics.nodes_stuck(stuck_per_pool(&objects));
        self.metrics.render(&view.sizes(), &view.stale(), ready)
    }
}
