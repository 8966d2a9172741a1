//! The OpenShift releases the harness can play, and what each one's machine-config-operator does
//! differently where a MachineOSConfig's deletion is concerned (openshift/machine-config-operator,
//! `pkg/controller/build/reconciler.go` and `pkg/server/cluster_server.go` of each release
//! branch). A test picks one with [`crate::scenario::Cluster::seed_on`]: the control plane's
//! ClusterVersion says it, and the simulator behaves as it.
//!
//! | release | MOSC-delete cleanup | image-delete error | MOSB-delete in-use check | MCS serves the layered image |
//! |---|---|---|---|---|
//! | 4.19 | every MOSB with the MOSC's two labels | logged, the build deleted anyway | while the MOSC exists | no |
//! | 4.20 | those the MOSC controls (`IsControlledBy`) | fails the item (retried) | while the MOSC exists | no |
//! | 4.21, 4.22 | as 4.20 | as 4.20 | as 4.20 | yes (`resolveDesiredImageForPool`) |
//! | 4.23 | as 4.20 | as 4.20 | whenever the build's target pool exists (#6348) | yes |
//!
//! The MOSC and MOSB schemas are the same in all of them (`tests/crds/` serves every release).

use std::fmt;

/// An OpenShift release with image mode GA.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Release {
    V4_19,
    V4_20,
    V4_21,
    V4_22,
    V4_23,
}

impl Release {
    /// Every release, oldest first.
    pub const ALL: [Release; 5] = [
        Release::V4_19,
        Release::V4_20,
        Release::V4_21,
        Release::V4_22,
        Release::V4_23,
    ];

    /// The z-stream the ClusterVersion reports (`status.desired.version`).
    pub fn version(self) -> &'static str {
        match self {
            Release::V4_19 => "4.19.17",
            Release::V4_20 => crate::controlplane::DEFAULT_RELEASE,
            Release::V4_21 => "4.21.3",
            Release::V4_22 => "4.22.1",
            Release::V4_23 => "4.23.0",
        }
    }

    /// MOSC-delete cleanup takes every MOSB labelled with the MOSC's name and pool, whoever
    /// controls it (4.19: no `IsControlledBy` filter, so a same-name recreated MOSC loses its
    /// builds too).
    pub fn cleans_up_by_label(self) -> bool {
        self == Release::V4_19
    }

    /// A failed image deletion fails the delete path (and its queue item is retried); 4.19 only
    /// logs it and goes on deleting the build.
    pub fn image_delete_errors_fail(self) -> bool {
        self != Release::V4_19
    }

    /// The MOSB-delete path's in-use check runs whenever the build's
    /// `target-machine-config-pool` pool exists, the MOSC gone or not (#6348, OCPBUGS-59197),
    /// and the images it skips stay in the registry (leaked). Earlier releases check only while
    /// a MOSC of the build's name exists.
    pub fn checks_pool_after_mosc_is_gone(self) -> bool {
        self >= Release::V4_23
    }

    /// The Machine Config Server puts the pool's layered image into a joining machine's
    /// Ignition (`resolveDesiredImageForPool`), which `machine-config-daemon-firstboot` pulls
    /// before the Node exists.
    pub fn serves_layered_image_to_joining_machines(self) -> bool {
        self >= Release::V4_21
    }
}

impl fmt::Display for Release {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.version())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_release_behaves_as_its_branch() {
        let row = |r: Release| {
            (
                r.cleans_up_by_label(),
                r.image_delete_errors_fail(),
                r.checks_pool_after_mosc_is_gone(),
                r.serves_layered_image_to_joining_machines(),
            )
        };
        assert_eq!(row(Release::V4_19), (true, false, false, false));
        assert_eq!(row(Release::V4_20), (false, true, false, false));
        assert_eq!(row(Release::V4_21), (false, true, false, true));
        assert_eq!(row(Release::V4_22), (false, true, false, true));
        assert_eq!(row(Release::V4_23), (false, true, true, true));
    }

    #[test]
    fn versions_name_their_minor_and_4_20_is_the_control_planes_default() {
        for r in Release::ALL {
            let minor = format!(
                "4.{}.",
                19 + Release::ALL.iter().position(|x| *x == r).unwrap_or(0)
            );
            assert!(r.version().starts_with(&minor), "{r:?}: {}", r.version());
        }
        assert_eq!(
            Release::V4_20.version(),
            crate::controlplane::DEFAULT_RELEASE
        );
    }
}
