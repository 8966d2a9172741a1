//! `--keep N`: the newest N succeeded builds of each MachineOSConfig are kept, like the image
//! pruner's tag revisions, so a rollback a few changes back still finds its build and image. A
//! config's builds are those its `machine-os-config` label (else spec) names, as `oc get mosb -l`
//! lists them, an earlier same-name config's included. Newest by `creationTimestamp` (none counts
//! as newest); builds created in the same second as the Nth are kept with it; builds kept for
//! other reasons still take their place among the N.

use std::collections::BTreeMap;

use super::{Keep, Planned, State};
use crate::core::prune::Options;

pub(super) fn add(builds: &mut [Planned], options: &Options) {
    let mut by_config: BTreeMap<Option<String>, Vec<usize>> = BTreeMap::new();
    for (i, b) in builds.iter().enumerate() {
        if b.state == State::Succeeded {
            by_config.entry(b.config.clone()).or_default().push(i);
        }
    }
    for (config, mut members) in by_config {
        // Newest first: no timestamp first, then the latest; ties by name (for the text only).
        members.sort_by(|&a, &b| {
            let (a, b) = (&builds[a], &builds[b]);
            (b.age_order(), &a.name).cmp(&(a.age_order(), &b.name))
        });
        let of = match &config {
            Some(c) => format!("MachineOSConfig {c}"),
            None => "no MachineOSConfig".to_string(),
        };
        if options.keep == 0 {
            continue;
        }
        // The Nth newest's creation (`None` inside: it has none); builds created in the same
        // second are as new as it, and kept too. Fewer builds than N: all kept.
        let boundary = members.get(options.keep - 1).map(|&i| builds[i].created);
        let total = members.len();
        for (rank, &i) in members.iter().enumerate() {
            let newest = boundary.is_none_or(|b| rank < options.keep || builds[i].created >= b);
            if !newest {
                break;
            }
            builds[i].keep(
                Keep::Newest,
                format!(
                    "it is the {} of the {total} succeeded builds of {of} (--keep {})",
                    newest_rank(rank + 1),
                    options.keep
                ),
            );
        }
    }
}

/// "newest", "2nd newest", ...
fn newest_rank(rank: usize) -> String {
    let suffix = match (rank % 10, rank % 100) {
        (_, 11..=13) => "th",
        (1, _) => "st",
        (2, _) => "nd",
        (3, _) => "rd",
        _ => "th",
    };
    match rank {
        1 => "newest".to_string(),
        n => format!("{n}{suffix} newest"),
    }
}
