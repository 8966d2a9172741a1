//! The OpenShift releases the harness can play, and what each one's machine-config-operator does
//! differently where a MachineOSConfig's deletion is concerned (openshift/machine-config-operator,
//! `pkg/controller/build/reconciler.go`, `pkg/controller/node/node_controller.go` and
//! `pkg/server/cluster_server.go` of each release branch), as one table: [`TABLE`], one [`Row`]
//! per release. A test picks a release, or one side of a z-stream fix ([`ZStream`]), with
//! [`crate::scenario::Cluster::seed_on`]: the control plane's ClusterVersion says it, and the
//! simulator behaves as it.
//!
//! | release | MOSC-delete cleanup | image-delete error | in-use check after the MOSC is gone | MCS serves the layered image | pre-built images, `status.machineOSBuild` | node controller's build | a failed rebase's `reason` |
//! |---|---|---|---|---|---|---|---|
//! | 4.19 | by label, every z-stream | logged, the build deleted anyway | no | no | no | the first for the pool's config | `Failed to update OS to <image> after retries: timed out ...` |
//! | 4.20 | by label before #6305 (2026-07-27), by controller after | fails the item (retried) | no | no | no | as 4.19 | rpm-ostree's error, "manifest unknown" (the report's) |
//! | 4.21 | by label before #6138 (2026-06-08), by controller after | as 4.20 | no | yes | yes | the annotated one first | as 4.19 |
//! | 4.22 | by label before #6115 (2026-06-07), by controller after | as 4.20 | no | yes | yes | as 4.21, and clears a stale annotation | `failed to update OS to <image> after retries: <rpm-ostree's error>: timed out ...` |
//! | 4.23 | by controller (`IsControlledBy`), every z-stream | as 4.20 | yes, nodes of the build's pool (#6348) | yes | yes | as 4.22 | as 4.22 |
//!
//! **The z-stream numbers are stand-ins.** Which 4.20.z, 4.21.z and 4.22.z were built after the
//! cleanup fix merged into their branch cannot be known from the sources (a version string alone
//! does not tell which side of the merge a cluster is on): each row names one plausible early and
//! one plausible late z-stream, and the harness plays the early one's cleanup by label and the
//! late one's by controller. [`Release::version`] is the late one, the behaviour every test
//! before z-streams were modelled expected.
//!
//! The rebase reason is one per row too ([`RebaseReason`]), chosen from each branch's
//! `updateLayeredOS`: its retry wrapper (OCPBUGS-43406) is on release-4.19 to 4.21 since
//! 2025-07-22, and keeps the last error on release-4.22 and main since 2026-08-17
//! (OCPBUGS-109739); 4.20 plays the text the report shows, rpm-ostree's own.
//!
//! The MOSC and MOSB schemas are the same in all of them (`tests/crds/` serves every release).

use std::fmt;

mod reason;

pub use reason::RebaseReason;

/// An OpenShift release with image mode GA (its minor version).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Release {
    V4_19,
    V4_20,
    V4_21,
    V4_22,
    V4_23,
}

/// When a release's MOSC-delete cleanup started to take only the builds the deleted MOSC
/// controls (`metav1.IsControlledBy`) instead of every build labelled with its name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CleanupFix {
    /// Never: every z-stream cleans up by label.
    Never,
    /// Backported by `pr` to the release branch, merged on `merged` (YYYY-MM-DD): z-streams
    /// built before clean up by label, later ones by controller.
    Backported { pr: u32, merged: &'static str },
    /// In the release from its first z-stream.
    FromStart,
}

/// What one release's machine-config-operator does, as the harness plays it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Row {
    pub release: Release,
    /// A z-stream built before [`Row::cleanup_fix`] (a stand-in number).
    pub early: &'static str,
    /// A z-stream built after it (a stand-in number); what [`Release::version`] says.
    pub late: &'static str,
    pub cleanup_fix: CleanupFix,
    /// A failed image deletion fails the delete path (its queue item is retried); 4.19 only
    /// logs it (`klog.Warningf`) and goes on deleting the build.
    pub image_delete_errors_fail: bool,
    /// The MOSB-delete path's in-use check runs whenever the build's
    /// `target-machine-config-pool` pool exists, the MOSC gone or not (#6348, OCPBUGS-59197),
    /// and the images it skips stay in the registry (leaked). Earlier releases check only while
    /// a MOSC of the build's name exists.
    pub in_use_check_after_mosc_is_gone: bool,
    /// The Machine Config Server puts the pool's layered image into a joining machine's
    /// Ignition (`resolveDesiredImageForPool`), which `machine-config-daemon-firstboot` pulls
    /// before the Node exists.
    pub mcs_serves_joining_machines: bool,
    /// A MOSC annotated `machineconfiguration.openshift.io/pre-built-image` is seeded with a
    /// synthetic build (`seedMachineOSConfigWithExistingImage`).
    pub seeds_pre_built_images: bool,
    /// A succeeded build is also named in the MOSC's `status.machineOSBuild`
    /// (`updateMachineOSConfigStatus`); every release names it in the
    /// `current-machine-os-build` annotation, from the build's start.
    pub writes_mosc_build_reference: bool,
    /// The node controller's `getConfigAndBuild` takes the build the MOSC's
    /// `current-machine-os-build` annotation names when it is for the pool's
    /// `spec.configuration`, before the first build of the MOSC for that config.
    pub node_controller_prefers_annotated_build: bool,
    /// The node controller removes a `current-machine-os-build` annotation that names a build
    /// that is gone or for another config.
    pub node_controller_clears_stale_annotation: bool,
    /// What a node's daemon writes in its `reason` when the rebase to its desiredImage fails.
    pub rebase_reason: RebaseReason,
    /// The pool conditions that stop every new or reused build while True
    /// (`createNewMachineOSBuildOrReuseExisting`: 4.19's `IsPoolAnyDegraded`, from 4.20
    /// `shouldPreventBuildDueToDegradation`, which leaves out `Degraded` so that a build
    /// failure alone can be retried).
    pub builds_wait_while: &'static [&'static str],
}

/// 4.19's `IsPoolAnyDegraded`.
const ANY_DEGRADED: &[&str] = &["Degraded", "NodeDegraded", "RenderDegraded"];
/// 4.20 on: `shouldPreventBuildDueToDegradation`'s `nonBuildDegradedTypes`.
const NON_BUILD_DEGRADED: &[&str] = &[
    "NodeDegraded",
    "RenderDegraded",
    "PinnedImageSetsDegraded",
    "SynchronizerDegraded",
];

/// Every release the harness plays, oldest first.
pub const TABLE: [Row; 5] = [
    Row {
        release: Release::V4_19,
        early: "4.19.9",
        late: "4.19.17",
        cleanup_fix: CleanupFix::Never,
        image_delete_errors_fail: false,
        in_use_check_after_mosc_is_gone: false,
        mcs_serves_joining_machines: false,
        seeds_pre_built_images: false,
        writes_mosc_build_reference: false,
        node_controller_prefers_annotated_build: false,
        node_controller_clears_stale_annotation: false,
        rebase_reason: RebaseReason::AfterRetries,
        builds_wait_while: ANY_DEGRADED,
    },
    Row {
        release: Release::V4_20,
        early: "4.20.3",
        late: "4.20.15",
        cleanup_fix: CleanupFix::Backported {
            pr: 6305,
            merged: "2026-07-27",
        },
        image_delete_errors_fail: true,
        in_use_check_after_mosc_is_gone: false,
        mcs_serves_joining_machines: false,
        seeds_pre_built_images: false,
        writes_mosc_build_reference: false,
        node_controller_prefers_annotated_build: false,
        node_controller_clears_stale_annotation: false,
        rebase_reason: RebaseReason::RpmOstree,
        builds_wait_while: NON_BUILD_DEGRADED,
    },
    Row {
        release: Release::V4_21,
        early: "4.21.3",
        late: "4.21.12",
        cleanup_fix: CleanupFix::Backported {
            pr: 6138,
            merged: "2026-06-08",
        },
        image_delete_errors_fail: true,
        in_use_check_after_mosc_is_gone: false,
        mcs_serves_joining_machines: true,
        seeds_pre_built_images: true,
        writes_mosc_build_reference: true,
        node_controller_prefers_annotated_build: true,
        node_controller_clears_stale_annotation: false,
        rebase_reason: RebaseReason::AfterRetries,
        builds_wait_while: NON_BUILD_DEGRADED,
    },
    Row {
        release: Release::V4_22,
        early: "4.22.1",
        late: "4.22.5",
        cleanup_fix: CleanupFix::Backported {
            pr: 6115,
            merged: "2026-06-07",
        },
        image_delete_errors_fail: true,
        in_use_check_after_mosc_is_gone: false,
        mcs_serves_joining_machines: true,
        seeds_pre_built_images: true,
        writes_mosc_build_reference: true,
        node_controller_prefers_annotated_build: true,
        node_controller_clears_stale_annotation: true,
        rebase_reason: RebaseReason::AfterRetriesWithLastError,
        builds_wait_while: NON_BUILD_DEGRADED,
    },
    Row {
        release: Release::V4_23,
        early: "4.23.0",
        late: "4.23.2",
        cleanup_fix: CleanupFix::FromStart,
        image_delete_errors_fail: true,
        in_use_check_after_mosc_is_gone: true,
        mcs_serves_joining_machines: true,
        seeds_pre_built_images: true,
        writes_mosc_build_reference: true,
        node_controller_prefers_annotated_build: true,
        node_controller_clears_stale_annotation: true,
        rebase_reason: RebaseReason::AfterRetriesWithLastError,
        builds_wait_while: NON_BUILD_DEGRADED,
    },
];

impl Release {
    /// Every release, oldest first (the order of [`TABLE`]).
    pub const ALL: [Release; 5] = [
        Release::V4_19,
        Release::V4_20,
        Release::V4_21,
        Release::V4_22,
        Release::V4_23,
    ];

    /// This release's row of [`TABLE`].
    pub fn row(self) -> &'static Row {
        // The table has one row per release in `ALL`'s order (a unit test checks it).
        &TABLE[self as usize]
    }

    /// The z-stream the ClusterVersion reports (`status.desired.version`): the late one.
    pub fn version(self) -> &'static str {
        self.row().late
    }

    /// This release's z-stream built before its cleanup fix (4.19: every one; 4.23: none, so
    /// the same as [`Release::late`] in behaviour).
    pub fn early(self) -> ZStream {
        ZStream {
            release: self,
            side: Side::Early,
        }
    }

    /// This release's z-stream built after its cleanup fix (what `Release` alone means).
    pub fn late(self) -> ZStream {
        ZStream {
            release: self,
            side: Side::Late,
        }
    }

    /// The MOSC-delete cleanup of [`Release::version`] takes every MOSB labelled with the
    /// MOSC's name and pool, whoever controls it.
    pub fn cleans_up_by_label(self) -> bool {
        self.late().cleans_up_by_label()
    }

    /// See [`Row::image_delete_errors_fail`].
    pub fn image_delete_errors_fail(self) -> bool {
        self.row().image_delete_errors_fail
    }

    /// See [`Row::in_use_check_after_mosc_is_gone`].
    pub fn checks_pool_after_mosc_is_gone(self) -> bool {
        self.row().in_use_check_after_mosc_is_gone
    }

    /// See [`Row::mcs_serves_joining_machines`].
    pub fn serves_layered_image_to_joining_machines(self) -> bool {
        self.row().mcs_serves_joining_machines
    }

    /// See [`Row::seeds_pre_built_images`].
    pub fn seeds_pre_built_images(self) -> bool {
        self.row().seeds_pre_built_images
    }

    /// See [`Row::writes_mosc_build_reference`].
    pub fn writes_mosc_build_reference(self) -> bool {
        self.row().writes_mosc_build_reference
    }
}

impl fmt::Display for Release {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.version())
    }
}

/// Which side of its release's cleanup fix a z-stream is on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Side {
    Early,
    Late,
}

/// One z-stream of a release: what the harness plays. A [`Release`] alone is its late
/// z-stream (`From<Release>`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ZStream {
    pub release: Release,
    pub side: Side,
}

impl From<Release> for ZStream {
    fn from(release: Release) -> Self {
        release.late()
    }
}

impl ZStream {
    /// The version the ClusterVersion reports (`4.20.3`): the row's early or late stand-in.
    pub fn version(self) -> &'static str {
        match self.side {
            Side::Early => self.release.row().early,
            Side::Late => self.release.row().late,
        }
    }

    /// The MOSC-delete cleanup takes every MOSB labelled with the MOSC's name and pool, whoever
    /// controls it (no `IsControlledBy` filter, so a same-name recreated MOSC loses its builds
    /// too): every 4.19, and the z-streams of 4.20-4.22 built before the fix.
    pub fn cleans_up_by_label(self) -> bool {
        match self.release.row().cleanup_fix {
            CleanupFix::Never => true,
            CleanupFix::Backported { .. } => self.side == Side::Early,
            CleanupFix::FromStart => false,
        }
    }
}

impl fmt::Display for ZStream {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.version())
    }
}

/// `4.<minor>.<z>` of a version string, if it is one.
pub fn parse_version(version: &str) -> Option<(u32, u32)> {
    let mut parts = version.split('.');
    let (major, minor, z) = (parts.next()?, parts.next()?, parts.next()?);
    if parts.next().is_some() || major != "4" {
        return None;
    }
    Some((minor.parse().ok()?, z.parse().ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_has_one_row_per_release_in_order() {
        assert_eq!(TABLE.len(), Release::ALL.len());
        for (row, release) in TABLE.iter().zip(Release::ALL) {
            assert_eq!(row.release, release);
            assert_eq!(release.row().release, release);
        }
    }

    #[test]
    fn versions_parse_name_their_minor_and_early_comes_before_late() {
        for (i, row) in TABLE.iter().enumerate() {
            let minor = 19 + u32::try_from(i).expect("small");
            let early = parse_version(row.early).unwrap_or_else(|| panic!("{}", row.early));
            let late = parse_version(row.late).unwrap_or_else(|| panic!("{}", row.late));
            assert_eq!((early.0, late.0), (minor, minor), "{row:?}");
            assert!(
                early.1 < late.1,
                "{row:?}: early z {} < late z {}",
                early.1,
                late.1
            );
        }
        assert_eq!(parse_version("4.20"), None);
        assert_eq!(parse_version("5.0.1"), None);
        assert_eq!(parse_version("4.20.x"), None);
    }

    /// The harness plays what the guard's own table (`mosc_guard::core::release`) decides by:
    /// the same releases in the same order, each z-stream the harness plays finding its
    /// release's row, and the columns both tables have agreeing (the guard's cleanup is the
    /// cautious side of a backport: by label if any z-stream cleans up by label).
    #[test]
    fn the_harness_plays_the_releases_the_guards_table_knows() {
        use mosc_guard::core::release::{self as product, Cleanup};
        let names: Vec<String> = TABLE
            .iter()
            .map(|r| {
                let (minor, _) = parse_version(r.late).expect("version");
                format!("4.{minor}")
            })
            .collect();
        let product_names: Vec<&str> = product::ROWS.iter().map(|r| r.release).collect();
        assert_eq!(names, product_names);
        for row in &TABLE {
            let early = product::row_of(row.early);
            let late = product::row_of(row.late);
            assert_eq!(early, late, "{row:?}: one row for every z-stream");
            let name = &names[row.release as usize];
            assert_eq!(late.release, name.as_str(), "{row:?}");
            let any_by_label =
                row.release.early().cleans_up_by_label() || row.release.late().cleans_up_by_label();
            assert_eq!(
                late.cleanup == Cleanup::ByLabel,
                any_by_label,
                "{row:?}: {late:?}"
            );
            assert_eq!(
                late.serves_joining_machines, row.mcs_serves_joining_machines,
                "{row:?}: {late:?}"
            );
            assert_eq!(
                late.keeps_in_use_images, row.in_use_check_after_mosc_is_gone,
                "{row:?}: {late:?}"
            );
            if let CleanupFix::Backported { pr, merged } = row.cleanup_fix {
                for said in [format!("#{pr}"), merged.to_owned()] {
                    assert!(
                        late.cleanup_note.contains(&said),
                        "{row:?}: the guard's note names {said}: {}",
                        late.cleanup_note
                    );
                }
            }
        }
        // The control plane's default ClusterVersion is a release the guard knows, 4.20.
        assert_eq!(
            product::row_of(crate::controlplane::DEFAULT_RELEASE).release,
            "4.20"
        );
    }

    #[test]
    fn backports_name_a_pr_and_a_date_and_only_4_20_to_4_22_have_one() {
        for row in TABLE {
            let backported = matches!(row.cleanup_fix, CleanupFix::Backported { .. });
            assert_eq!(
                backported,
                (Release::V4_20..=Release::V4_22).contains(&row.release),
                "{row:?}"
            );
            if let CleanupFix::Backported { pr, merged } = row.cleanup_fix {
                assert!(pr > 6000, "{row:?}");
                merged
                    .parse::<k8s_openapi::jiff::civil::Date>()
                    .unwrap_or_else(|e| panic!("{row:?}: {merged}: {e}"));
            }
        }
    }

    #[test]
    fn early_z_streams_clean_up_by_label_until_the_fix_and_4_23_never() {
        let by_label = |z: ZStream| z.cleans_up_by_label();
        assert!(by_label(Release::V4_19.early()) && by_label(Release::V4_19.late()));
        for r in [Release::V4_20, Release::V4_21, Release::V4_22] {
            assert!(by_label(r.early()), "{r:?} early");
            assert!(!by_label(r.late()), "{r:?} late");
            assert!(!r.cleans_up_by_label(), "{r:?} alone is late");
        }
        assert!(!by_label(Release::V4_23.early()) && !by_label(Release::V4_23.late()));
        assert_eq!(ZStream::from(Release::V4_21), Release::V4_21.late());
    }

    #[test]
    fn features_start_at_their_release_and_stay() {
        // Each capability, once a release has it, every later release has too.
        type Column = (&'static str, fn(&Row) -> bool);
        let columns: [Column; 6] = [
            ("image_delete_errors_fail", |r| r.image_delete_errors_fail),
            ("in_use_check_after_mosc_is_gone", |r| {
                r.in_use_check_after_mosc_is_gone
            }),
            ("mcs_serves_joining_machines", |r| {
                r.mcs_serves_joining_machines
            }),
            ("seeds_pre_built_images", |r| r.seeds_pre_built_images),
            ("node_controller_prefers_annotated_build", |r| {
                r.node_controller_prefers_annotated_build
            }),
            ("node_controller_clears_stale_annotation", |r| {
                r.node_controller_clears_stale_annotation
            }),
        ];
        for (name, column) in columns {
            let values: Vec<bool> = TABLE.iter().map(column).collect();
            let first = values.iter().position(|v| *v);
            assert!(
                first.is_some_and(|f| values[f..].iter().all(|v| *v)),
                "{name}: {values:?}"
            );
        }
        assert_eq!(
            Release::V4_20.version(),
            crate::controlplane::DEFAULT_RELEASE
        );
    }
}
