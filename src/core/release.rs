//! What each OpenShift release with image mode does on a deletion, one row each ([`ROWS`];
//! docs/policy.md, section 8), and the rules a decision applies: the row of the release the
//! cluster runs or, during an upgrade, the most cautious combination of every release that may
//! still run the machine-os-builder. An unknown release gets [`CAUTIOUS`]. A row is a minor: where
//! a fix landed mid-z-stream the row takes the older z-streams' (cautious) behaviour and says so.

use std::fmt;

/// How a MachineOSConfig's deletion picks the builds whose images MCO deletes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cleanup {
    /// Every build labelled with the config's name and pool, whoever controls it (a config
    /// deleted and recreated with the same name loses the new one's builds too).
    ByLabel,
    /// The builds the config controls (`metav1.IsControlledBy`).
    ByController,
}

/// One release's behaviour, where the guard's verdicts depend on it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Row {
    /// `4.20`, or `unknown` for [`CAUTIOUS`].
    pub release: &'static str,
    /// Its minor version (4.x), `None` for [`CAUTIOUS`].
    minor: Option<u32>,
    pub cleanup: Cleanup,
    /// Why `cleanup` is what it is (the z-streams it stands for).
    pub cleanup_note: &'static str,
    /// The Machine Config Server puts the pool's layered image into a joining machine's
    /// Ignition, which pulls it at first boot before its Node exists.
    pub serves_joining_machines: bool,
    /// The MOSB-delete path skips images that nodes of the build's target pool use (and
    /// leaks them).
    pub keeps_in_use_images: bool,
}

/// Every release the table knows, oldest first: adding one is adding a row.
pub const ROWS: &[Row] = &[
    Row {
        release: "4.19",
        minor: Some(19),
        cleanup: Cleanup::ByLabel,
        cleanup_note: "no controller check in any 4.19 z-stream",
        serves_joining_machines: false,
        keeps_in_use_images: false,
    },
    Row {
        release: "4.20",
        minor: Some(20),
        cleanup: Cleanup::ByLabel,
        cleanup_note: "by label before release-4.20 PR #6305 (merged 2026-07-27), by controller \
                       after it; a version string cannot tell which side a cluster is on",
        serves_joining_machines: false,
        keeps_in_use_images: false,
    },
    Row {
        release: "4.21",
        minor: Some(21),
        cleanup: Cleanup::ByLabel,
        cleanup_note: "by label before release-4.21 PR #6138 (merged 2026-06-08), by controller \
                       after it; a version string cannot tell which side a cluster is on",
        serves_joining_machines: true,
        keeps_in_use_images: false,
    },
    Row {
        release: "4.22",
        minor: Some(22),
        cleanup: Cleanup::ByLabel,
        cleanup_note: "by label before release-4.22 PR #6115 (merged 2026-06-07), by controller \
                       after it; a version string cannot tell which side a cluster is on",
        serves_joining_machines: true,
        keeps_in_use_images: false,
    },
    Row {
        release: "4.23",
        minor: Some(23),
        cleanup: Cleanup::ByController,
        cleanup_note: "by controller in every 4.23 z-stream",
        serves_joining_machines: true,
        keeps_in_use_images: true,
    },
];

/// The rules for a release the table does not know (newer, older, none, unparseable): each
/// column the way that refuses most, because a wrong allow degrades a pool and a wrong refusal
/// costs a retry.
pub const CAUTIOUS: Row = Row {
    release: "unknown",
    minor: None,
    cleanup: Cleanup::ByLabel,
    cleanup_note: "the most cautious: every build labelled with the config's name",
    serves_joining_machines: true,
    keeps_in_use_images: false,
};

/// "4.19 to 4.23": the releases the table knows, for every message that names them.
pub fn known_range() -> String {
    format!("{} to {}", ROWS[0].release, ROWS[ROWS.len() - 1].release)
}

/// The row of `version` (`4.21.3`, `4.20.0-rc.1`, `v4.22`): its minor release's, or
/// [`CAUTIOUS`] when it is not one the table knows.
pub fn row_of(version: &str) -> &'static Row {
    let minor = minor_of(version);
    ROWS.iter()
        .find(|r| minor.is_some() && r.minor == minor)
        .unwrap_or(&CAUTIOUS)
}

/// What the cluster runs, as its ClusterVersion says (or an admin gave).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ClusterRelease {
    /// `status.desired.version`: the release the cluster runs or is upgrading to.
    pub desired: Option<String>,
    /// Releases whose machine-os-builder may still be running besides the desired one: while
    /// an upgrade is in flight (or the history does not end on the desired release), the
    /// versions of the history entries from the newest down to the newest `Completed` one.
    /// The previous release's builder runs until MCO itself is upgraded.
    pub also_running: Vec<String>,
    /// `status.history[0].state` is Partial, or condition Progressing is True.
    pub upgrading: bool,
}

impl ClusterRelease {
    /// `--openshift-version`: this release, and no other.
    pub fn given(version: &str) -> Self {
        ClusterRelease {
            desired: Some(version.trim().to_string()).filter(|v| !v.is_empty()),
            ..Default::default()
        }
    }
}

/// The rules a decision applies.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rules {
    /// The rows that decided, oldest first (one, or two or more while an upgrade is in flight).
    pub rows: Vec<&'static Row>,
    /// The release the cluster runs or upgrades to, as written (`None` when nothing says).
    pub version: Option<String>,
    /// The other releases that may still be running (an upgrade in flight), as written.
    pub also_running: Vec<String>,
    pub upgrading: bool,
    pub cleanup: Cleanup,
    pub serves_joining_machines: bool,
    pub keeps_in_use_images: bool,
}

impl Rules {
    /// The rules for what the cluster runs: the most cautious combination of the rows of the
    /// desired release and of every release that may still be running.
    pub fn for_release(release: &ClusterRelease) -> Rules {
        let mut rows: Vec<&'static Row> = release
            .also_running
            .iter()
            .map(|v| Some(v.as_str()))
            .chain([release.desired.as_deref()])
            .map(|v| v.map_or(&CAUTIOUS, row_of))
            .collect();
        rows.sort_by_key(|r| r.minor.unwrap_or(u32::MAX));
        rows.dedup();
        let by_label = rows.iter().any(|r| r.cleanup == Cleanup::ByLabel);
        Rules {
            cleanup: if by_label {
                Cleanup::ByLabel
            } else {
                Cleanup::ByController
            },
            serves_joining_machines: rows.iter().any(|r| r.serves_joining_machines),
            // Only changes what an override warns: claimed only when every running builder keeps.
            keeps_in_use_images: rows.iter().all(|r| r.keeps_in_use_images),
            version: release.desired.clone(),
            also_running: release.also_running.clone(),
            upgrading: release.upgrading,
            rows,
        }
    }

    /// Whether a row that decided is the cautious one for a release the table does not know.
    pub fn cautious(&self) -> bool {
        self.rows.iter().any(|r| r.minor.is_none())
    }

    /// The rows' names, e.g. `["4.22", "4.23"]`.
    pub fn row_names(&self) -> Vec<&'static str> {
        self.rows.iter().map(|r| r.release).collect()
    }

    /// The note that says a decision used the cautious rules, and why.
    pub fn note(&self) -> Option<String> {
        if !self.cautious() {
            return None;
        }
        let unknown: Vec<&str> = self
            .also_running
            .iter()
            .map(String::as_str)
            .chain(self.version.as_deref())
            .filter(|v| row_of(v).minor.is_none())
            .collect();
        let what = if self.version.is_none() {
            "the OpenShift release is unknown (no ClusterVersion, and no --openshift-version)"
                .to_string()
        } else {
            format!(
                "OpenShift {} is not a release mosc-guard knows ({})",
                unknown.join(", "),
                known_range()
            )
        };
        Some(format!(
            "{what}: deciding with the most cautious rules (every build labelled with a config's \
             name counts as deleted with it; joining machines count)"
        ))
    }

    /// One sentence naming the release(s) that decided, for denials and `check`.
    pub fn decided_by(&self) -> String {
        let known: Vec<&str> = self
            .rows
            .iter()
            .filter(|r| r.minor.is_some())
            .map(|r| r.release)
            .collect();
        let rules = match (known.as_slice(), self.cautious()) {
            ([], _) => "the most cautious rules".to_string(),
            ([one], false) => format!("the rules of OpenShift {one}"),
            (many, false) => format!(
                "the most cautious of the rules of OpenShift {}",
                many.join(" and ")
            ),
            (some, true) => format!(
                "the most cautious of the rules of OpenShift {} and the cautious rules",
                some.join(" and ")
            ),
        };
        let cluster = match (&self.version, self.also_running.as_slice()) {
            (None, _) => "no release known".to_string(),
            (Some(v), []) if self.cautious() => {
                format!("{v} is not a release mosc-guard knows: {}", known_range())
            }
            (Some(v), []) => format!("the cluster runs {v}"),
            (Some(v), running) => format!(
                "an upgrade to {v} is in flight; MCO's builder of {} may still run",
                running.join(", ")
            ),
        };
        format!("Decided with {rules} ({cluster}).")
    }
}

impl fmt::Display for Rules {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let rows = self.row_names().join("+");
        match &self.version {
            Some(v) if self.also_running.is_empty() => write!(f, "{v} (rules of {rows})"),
            Some(v) => write!(
                f,
                "{} -> {v} (upgrade in flight: rules of {rows})",
                self.also_running.join(", ")
            ),
            None => write!(f, "unknown release (rules of {rows})"),
        }
    }
}

/// The minor version of an OpenShift 4 release string.
fn minor_of(version: &str) -> Option<u32> {
    let v = version.trim().trim_start_matches('v');
    let mut parts = v.split(['.', '-', '+']);
    let major: u32 = parts.next()?.parse().ok()?;
    let minor: u32 = parts.next()?.parse().ok()?;
    (major == 4).then_some(minor)
}

#[cfg(test)]
mod tests;
