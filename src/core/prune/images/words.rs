//! The images part of `prune`'s text: each repository, then its tags no build names,
//! deletable or kept with every reason.

use crate::core::registry::internal::Internal;
use std::fmt::Write as _;

use crate::core::image::abbreviate;

use super::{ImagePlan, PlannedTag, RepositoryPlan};

pub fn text(plan: &ImagePlan) -> String {
    if let Some(why) = &plan.skipped {
        return format!("Images no MachineOSBuild names were not listed: {why}.\n");
    }
    if plan.repositories.is_empty() {
        return "No MachineOSConfig or MachineOSBuild names a repository: no images to list.\n"
            .to_string();
    }
    let mut out = String::new();
    let deletable = plan.tags.iter().filter(|t| t.deletable()).count();
    let (tags, repositories) = (plan.tags.len(), plan.repositories.len());
    let _ = writeln!(
        out,
        "Images no MachineOSBuild names: {deletable} of {tags} tag{} can be deleted (with --apply \
         --images), in {repositories} repositor{}.",
        if tags == 1 { "" } else { "s" },
        if repositories == 1 { "y" } else { "ies" },
    );
    for repository in &plan.repositories {
        let _ = writeln!(out, "\nREPOSITORY {}", heading(repository));
        let tags = plan
            .tags
            .iter()
            .filter(|t| t.repository == repository.source.repository);
        for tag in tags.clone().filter(|t| t.deletable()) {
            let _ = writeln!(out, "  DELETABLE {}", tag_line(tag));
        }
        for tag in tags.filter(|t| !t.deletable()) {
            let _ = writeln!(out, "  KEPT {}", tag_line(tag));
            for why in &tag.why {
                let _ = writeln!(out, "    - {}", why.text);
            }
        }
    }
    out
}

/// `host/path (MachineOSConfig worker; push secret push-secret): 7 tags, 4 of them builds'`.
fn heading(r: &RepositoryPlan) -> String {
    let configs = match r.source.configs.as_slice() {
        [] => "no MachineOSConfig pushes there now".to_string(),
        [one] => format!("MachineOSConfig {one}"),
        many => format!("MachineOSConfigs {}", many.join(", ")),
    };
    let secret = r.source.secret.as_deref().map_or_else(
        || "no push secret named".to_string(),
        |s| format!("push secret {s}"),
    );
    let internal = match r.internal {
        Internal::Yes => "; OpenShift's internal registry",
        Internal::Unknown(_) => {
            "; maybe OpenShift's internal registry (its hosts could not be read)"
        }
        Internal::No => "",
    };
    let what = match &r.not_listed {
        Some(why) => format!("not listed: {why}"),
        None => format!(
            "{} tag{}, {} of them MachineOSBuilds' (their tag or their image: prune them as builds)",
            r.tags,
            if r.tags == 1 { "" } else { "s" },
            r.build_tags
        ),
    };
    format!(
        "{} ({configs}; {secret}{internal}): {what}",
        r.source.repository
    )
}

/// `:stray (.../os-image@sha256:0123456789ab...)`.
fn tag_line(t: &PlannedTag) -> String {
    match t.image() {
        Some(image) => format!(":{} ({})", t.tag, abbreviate(&image)),
        None => format!(":{}", t.tag),
    }
}
