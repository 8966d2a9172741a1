//! What each OpenShift release with image mode does on a deletion, as one table. The guard
//! reads the running release (`clusterversions.config.openshift.io/version`,
//! `status.desired.version`) and decides with that row; a release it does not know, or none,
//! gets the most cautious row and a note saying so.
//!
//! | release | MOSC cleanup deletes | MCS serves the image to joining machines | MOSB-delete keeps in-use images |
//! |---|---|---|---|
//! | 4.19 | every MOSB labelled with its name | no | no |
//! | 4.20 | MOSBs it controls (labels + `IsControlledBy`) | no | no |
//! | 4.21, 4.22 | MOSBs it controls | yes (`resolveDesiredImageForPool`) | no |
//! | 4.23 | MOSBs it controls | yes | yes, for nodes of the build's pool (#6348) |
//! | unknown, or newer | (cautious) every MOSB labelled with its name | (cautious) yes | (cautious) no |
//!
//! 4.23's in-use check changes no verdict: it compares exact strings against nodes of one pool
//! in a cache, so a node of another pool, another spelling, a stale cache or a joining machine
//! still loses the image, and the guard still protects all of them. It changes what an override
//! costs: MCO then keeps (and leaks) the images nodes of the build's pool use.

use std::fmt;

/// How a MachineOSConfig's deletion picks the builds whose images MCO deletes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cleanup {
    /// 4.19: every build labelled with the config's name, whoever controls it (a config deleted
    /// and recreated with the same name loses the new one's builds too).
    ByLabel,
    /// 4.20 and later: the builds the config controls (`metav1.IsControlledBy`).
    ByController,
}

/// The rules of one release, as the policy applies them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rules {
    /// The row used: `4.20`, or `unknown` for the cautious one.
    pub row: &'static str,
    /// The release read from the cluster or given, as written (`None` when none was).
    pub version: Option<String>,
    pub cleanup: Cleanup,
    /// The Machine Config Server puts the pool's layered image into a joining machine's
    /// Ignition, which pulls it at first boot before its Node exists.
    pub serves_joining_machines: bool,
    /// The MOSB-delete path skips images that nodes of the build's target pool use (and
    /// leaks them).
    pub keeps_in_use_images: bool,
}

/// Releases the table knows, oldest first.
const KNOWN: [(u32, Cleanup, bool, bool); 5] = [
    (19, Cleanup::ByLabel, false, false),
    (20, Cleanup::ByController, false, false),
    (21, Cleanup::ByController, true, false),
    (22, Cleanup::ByController, true, false),
    (23, Cleanup::ByController, true, true),
];
const ROWS: [&str; 5] = ["4.19", "4.20", "4.21", "4.22", "4.23"];

impl Rules {
    /// The rules for `version` (`4.21.3`, `4.20.0-rc.1`, `4.22`): its minor release's row, or the
    /// cautious row when it is absent, unparseable, not 4.x, older than 4.19 or newer than 4.23.
    pub fn for_version(version: Option<&str>) -> Rules {
        let minor = version.and_then(minor_of);
        let row = minor.and_then(|m| KNOWN.iter().position(|(k, ..)| *k == m));
        match row {
            Some(i) => {
                let (_, cleanup, serves, keeps) = KNOWN[i];
                Rules {
                    row: ROWS[i],
                    version: version.map(str::to_string),
                    cleanup,
                    serves_joining_machines: serves,
                    keeps_in_use_images: keeps,
                }
            }
            None => Rules {
                row: "unknown",
                version: version.map(str::to_string),
                cleanup: Cleanup::ByLabel,
                serves_joining_machines: true,
                keeps_in_use_images: false,
            },
        }
    }

    /// Whether these are the cautious rules for a release the table does not know.
    pub fn cautious(&self) -> bool {
        self.row == "unknown"
    }

    /// The note that says a decision used the cautious rules, and why.
    pub fn note(&self) -> Option<String> {
        if !self.cautious() {
            return None;
        }
        let what = match &self.version {
            Some(v) => format!("OpenShift {v} is not a release mosc-guard knows (4.19 to 4.23)"),
            None => {
                "the OpenShift release is unknown (no ClusterVersion, and no --openshift-version)"
                    .to_string()
            }
        };
        Some(format!(
            "{what}: deciding with the most cautious rules (every build labelled with a config's \
             name counts as deleted with it; joining machines count)"
        ))
    }
}

impl fmt::Display for Rules {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (&self.version, self.cautious()) {
            (Some(v), false) => write!(f, "{v} (rules of {})", self.row),
            (Some(v), true) => write!(f, "{v} (unknown: cautious rules)"),
            (None, _) => f.write_str("unknown release (cautious rules)"),
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
mod tests {
    use super::*;

    fn row(v: &str) -> Rules {
        Rules::for_version(Some(v))
    }

    #[test]
    fn release_4_19_cleans_up_by_label() {
        let r = row("4.19.14");
        assert_eq!((r.row, r.cleanup), ("4.19", Cleanup::ByLabel));
        assert!(!r.serves_joining_machines && !r.keeps_in_use_images && r.note().is_none());
    }

    #[test]
    fn release_4_20_cleans_up_by_controller_only() {
        let r = row("4.20.8");
        assert_eq!((r.row, r.cleanup), ("4.20", Cleanup::ByController));
        assert!(!r.serves_joining_machines && !r.keeps_in_use_images);
    }

    #[test]
    fn releases_4_21_and_4_22_serve_the_image_to_joining_machines() {
        for v in ["4.21.3", "4.22.0-rc.2"] {
            let r = row(v);
            assert_eq!(r.cleanup, Cleanup::ByController, "{v}");
            assert!(r.serves_joining_machines && !r.keeps_in_use_images, "{v}");
        }
    }

    #[test]
    fn release_4_23_also_keeps_in_use_images() {
        let r = row("4.23.1");
        assert_eq!((r.row, r.cleanup), ("4.23", Cleanup::ByController));
        assert!(r.serves_joining_machines && r.keeps_in_use_images);
    }

    #[test]
    fn unknown_or_newer_releases_get_the_cautious_rules_and_a_note() {
        for v in [
            None,
            Some("4.24.0"),
            Some("5.0.1"),
            Some("4.18.22"),
            Some("latest"),
            Some(""),
        ] {
            let r = Rules::for_version(v);
            assert!(r.cautious(), "{v:?}");
            assert_eq!(r.cleanup, Cleanup::ByLabel, "{v:?}");
            assert!(r.serves_joining_machines && !r.keeps_in_use_images, "{v:?}");
            assert!(
                r.note().is_some_and(|n| n.contains("most cautious")),
                "{v:?}"
            );
        }
        assert_eq!(row("v4.21.3").row, "4.21", "a leading v is read");
    }
}
