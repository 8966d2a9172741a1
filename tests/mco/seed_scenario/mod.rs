//! The report's scenario on a real control plane, registry and the MCO simulator (on 4.20):
//! create a MOSC for the worker pool, wait for the build and the first node to start updating,
//! delete the MOSC. Without mosc-guard the pool degrades with "manifest unknown".
//!
//! Every test runs the simulator at the real machine-os-builder's timing
//! (`SimConfig::real_timing`: delete events handled 5 s late, builds of seconds).
//!
//! Each test starts its own control plane (a few seconds) and drops it at the end.
//!
//! One test binary, its tests in [`unguarded`] (the report's failure reproduced), [`denials`]
//! (the guard's refusals, their dry runs and their races) and [`overrides`] (the override
//! annotation, the in-use policy, the guard down).

mod denials;
mod overrides;
mod unguarded;

use testkit::cli::CliRun;
use testkit::guard::GuardBin;
use testkit::mco::{DESIRED_IMAGE, STATE};
use testkit::scenario::*;
use testkit::simulator::SimConfig;

const BIN: GuardBin = GuardBin::at(env!("CARGO_BIN_EXE_mosc-guard"));
