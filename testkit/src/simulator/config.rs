//! [`SimConfig`]: the simulated MCO's timing and behaviour switches.

use std::time::Duration;

/// Timing and behaviour of the simulated MCO. Every test says which timing it runs at:
/// [`SimConfig::real_timing`] (also `Default`), the machine-os-builder's own timing, or
/// [`SimConfig::fast`] for suites that run many rollouts or faults (soak, chaos).
#[derive(Debug, Clone)]
pub struct SimConfig {
    /// How long a daemon takes, once drained, to prepare an update before it pulls the image.
    pub pull_delay: Duration,
    /// Extra pull attempts after the first failed one (MCO: about 5 over ~75 s).
    pub pull_retries: u32,
    /// Pause between pull attempts, and the first back-off after a failed update pass.
    pub retry_interval: Duration,
    /// The longest back-off between two update passes of a node whose update failed (MCO's
    /// daemon queue: from 1 s, doubling, at most 60 s; here from [`SimConfig::retry_interval`]).
    pub retry_cap: Duration,
    /// How often each loop reads the API server.
    pub poll_interval: Duration,
    /// How long a build runs between MOSB creation and its image being pushed (at least until
    /// the next second, so that buildEnd is later than buildStart). [`super::Simulator::set_build_delay`]
    /// changes it at run time. Keep it longer than [`SimConfig::delete_delay`], as every real
    /// build is: a same-name rebuild (a MOSC deleted and recreated, the rebuild annotation)
    /// pushes to the old build's tag, and a rebuild finished before the old build's delete event
    /// is handled would have its new image deleted by that tag.
    pub build_delay: Duration,
    /// How long after a MOSC or MOSB is gone from the API its delete event is handled: the
    /// machine-os-builder queues every event with its `UpdateDelay`, 5 s in 4.20.
    pub delete_delay: Duration,
    /// MCO's in-use check before it deletes a MOSB's image (while the MOSC exists; on 4.23
    /// whenever the build's pool exists). On by default; off models a stale informer cache that
    /// misses the node.
    pub in_use_check: bool,
    /// The daemon (and a machine's first boot) pulls as a node does ([`crate::node_pull`]:
    /// the ControllerConfig's pull secret and per-host CAs, the ImageDigestMirrorSets, HTTPS with
    /// token auth), so a registry the guard's audit asks is the one the node fails on. Off (the
    /// default): the kit's open registry, directly.
    pub pull_as_node: bool,
    /// How long a Machine stays Provisioning before its cloud instance exists (Provisioned).
    pub provision_delay: Duration,
    /// How long a Provisioned machine takes to boot and fetch its Ignition from the Machine
    /// Config Server; its first boot then pulls the served image and registers the Node.
    pub boot_delay: Duration,
    /// How long after a node's `desiredDrain` changes the drain controller acts on it (its
    /// queue's `UpdateDelay`: 5 s in MCO, `drain_controller.go`).
    pub drain_delay: Duration,
    /// How long after a change to a pool, its MachineOSConfig, its builds or one of its nodes
    /// the node controller syncs the pool (`enqueueDefault`: `updateDelay`, 5 s in MCO,
    /// `node_controller.go`). Zero: every pass syncs every pool (level-triggered).
    pub pool_sync_delay: Duration,
    /// How often a daemon checks whether the drain controller applied its drain or uncordon
    /// request, the first check one interval after the request (`performDrain` and
    /// `completeUpdate` poll every 10 s in MCO, `drain.go`, `daemon.go`).
    pub drain_check_interval: Duration,
}

impl SimConfig {
    /// The real machine-os-builder's timing where a verdict can depend on it: delete events
    /// handled 5 s late, builds of 6 s (a real one takes minutes, 17-22 s with an instant
    /// builder pod; what matters is that it outlasts the delete delay). The node daemons stay
    /// quick (drain, reboot and rpm-ostree's ~75 s of retries take well under a second each),
    /// which only shortens a rollout; so do the machines (a real one boots in minutes): a test
    /// that needs one caught between its Ignition and its Node holds it
    /// ([`super::Simulator::hold_machine`]).
    pub fn real_timing() -> Self {
        Self {
            build_delay: Duration::from_secs(6),
            delete_delay: Duration::from_secs(5),
            ..Self::fast()
        }
    }

    /// Everything in milliseconds (the harness's timing before the real builder was
    /// measured), delete events handled after 100 ms: for suites that run many rollouts.
    pub fn fast() -> Self {
        Self {
            pull_delay: Duration::from_millis(200),
            pull_retries: 3,
            retry_interval: Duration::from_millis(200),
            retry_cap: Duration::from_secs(1),
            poll_interval: Duration::from_millis(100),
            build_delay: Duration::from_millis(300),
            delete_delay: Duration::from_millis(100),
            in_use_check: true,
            pull_as_node: false,
            provision_delay: Duration::from_millis(300),
            boot_delay: Duration::from_millis(300),
            drain_delay: Duration::ZERO,
            pool_sync_delay: Duration::ZERO,
            drain_check_interval: Duration::from_millis(100),
        }
    }

    /// MCO's delays on a node's way through an update, as its controllers' queues and the
    /// daemon's polls take them: the drain controller acts 5 s after a request, the node
    /// controller syncs a pool 5 s after a change, the daemon looks for its drain or uncordon
    /// every 10 s, and its queue waits from 1 s doubling to 60 s on every node event and
    /// failure. With them a daemon that finishes a no-op update leaves its node schedulable but
    /// still Degraded for about 5 s, the window in which MCO's node controller, synced by
    /// another event of the pool, sends it the pool's target (a pool with `maxUnavailable`
    /// above 1). Every node update takes 20 s or more, so only the tests of that window play
    /// them ([`super::Simulator::play_mco_node_delays`] switches to them mid-run).
    pub fn with_mco_node_delays(self) -> Self {
        Self {
            drain_delay: Duration::from_secs(5),
            pool_sync_delay: Duration::from_secs(5),
            drain_check_interval: Duration::from_secs(10),
            retry_interval: Duration::from_secs(1),
            retry_cap: Duration::from_secs(60),
            ..self
        }
    }
}

impl SimConfig {
    /// This timing, pulling as a node does ([`SimConfig::pull_as_node`]).
    pub fn pulling_as_node(self) -> Self {
        Self {
            pull_as_node: true,
            ..self
        }
    }
}

impl Default for SimConfig {
    fn default() -> Self {
        Self::real_timing()
    }
}
