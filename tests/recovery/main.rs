//! A pool the bug already degraded, and the way back, on a real control plane, registry and the
//! MCO simulator: the report's deletion without the guard leaves the updating node Degraded,
//! cordoned and drained, its daemon retrying for ever, and with the default `maxUnavailable: 1`
//! nothing else in the pool moves; cancelling the failed target brings it back without a reboot
//! and MCO finishes the pool. One file per story: [`by_hand`] (the runbook's plain `kubectl`
//! steps, on 4.20 and on 4.22, whose reasons differ).
//!
//! Every test runs the simulator at the real machine-os-builder's timing
//! (`SimConfig::real_timing`) and starts its own control plane.

mod by_hand;

use testkit::scenario::*;
use testkit::simulator::SimConfig;
