//! `prune`'s words: the plan as text for a person (every build, deletable or kept with every
//! reason), and durations as people write them.

use std::fmt::Write as _;
use std::time::Duration;

use k8s_openapi::jiff::SignedDuration;

use crate::core::image::abbreviate;

use super::images::{self, ImagePlan};
use super::{Plan, Planned, State};

/// The plan as text: the builds, then the images no build names.
pub fn text(plan: &Plan, image_plan: &ImagePlan) -> String {
    let total = plan.builds.len();
    let deletable = plan.deletable().count();
    let mut out = String::new();
    if total == 0 {
        out.push_str("No MachineOSBuild: nothing to prune.\n");
    } else {
        let _ = writeln!(
            out,
            "{deletable} of {total} MachineOSBuild{} can be deleted (--keep {}, \
             --keep-younger-than {}).",
            if total == 1 { "" } else { "s" },
            plan.options.keep,
            duration(plan.options.keep_younger_than)
        );
    }
    for build in plan.deletable() {
        let _ = writeln!(out, "\nDELETABLE {}", heading(build));
        let _ = writeln!(out, "  {}", deletes(build));
    }
    for build in plan.kept() {
        let _ = writeln!(out, "\nKEPT {}", heading(build));
        for why in &build.why {
            let _ = writeln!(out, "  - {}", why.text);
        }
    }
    out.push('\n');
    out.push_str(&images::text(image_plan));
    out.push('\n');
    if let Some(note) = plan.rules.note() {
        let _ = writeln!(out, "warning: {note}");
    }
    out.push_str(&plan.rules.decided_by());
    out.push('\n');
    out
}

/// `worker-abc (MachineOSConfig worker, Succeeded, 3d old)`.
fn heading(build: &Planned) -> String {
    let config = build.config.as_deref().map_or_else(
        || "no MachineOSConfig".to_string(),
        |c| format!("MachineOSConfig {c}"),
    );
    let old = build
        .age
        .map_or_else(|| "age unknown".to_string(), |a| format!("{} old", age(a)));
    format!("{} ({config}, {}, {old})", build.name, state(build.state))
}

fn state(state: State) -> &'static str {
    match state {
        State::Succeeded => "Succeeded",
        State::Failed => "Failed",
        State::Interrupted => "Interrupted",
        State::Building => "building",
    }
}

/// What deleting a deletable build does to the registry.
pub fn deletes(build: &Planned) -> String {
    if build.deletes.is_empty() {
        return "deleting it removes no image from the registry (it pushed none)".to_string();
    }
    let images: Vec<String> = build.deletes.iter().map(|i| abbreviate(i)).collect();
    format!(
        "deleting it makes MCO delete {} from the registry (by its tag {})",
        images.join(", "),
        build.tag.as_deref().unwrap_or("?")
    )
}

/// An age (a negative one as 0s), as [`duration`] writes it.
pub(super) fn age(age: SignedDuration) -> String {
    duration(Duration::from_secs(
        u64::try_from(age.as_secs()).unwrap_or_default(),
    ))
}

/// A duration as `--keep-younger-than` takes it: `60m`, `90s`, `2h30m`, `3d4h`.
pub fn duration(d: Duration) -> String {
    let mut s = d.as_secs();
    if s == 0 {
        return "0s".to_string();
    }
    let mut out = String::new();
    for (unit, size) in [("d", 86_400), ("h", 3_600), ("m", 60), ("s", 1)] {
        if s >= size {
            let _ = write!(out, "{}{unit}", s / size);
            s %= size;
            // Days and hours are enough for an age.
            if unit == "d" {
                if s >= 3_600 {
                    let _ = write!(out, "{}h", s / 3_600);
                }
                break;
            }
        }
    }
    out
}
