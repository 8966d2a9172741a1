//! Which repositories prune lists, and with which push secret: every repository a
//! MachineOSConfig pushes to (`spec.renderedImagePushSpec`) or a MachineOSBuild tagged
//! (`spec.renderedImagePushSpec`, `<repo>:<its name>`: a config whose push spec changed since
//! still has builds, and images, in the old repository).
//!
//! The secret is the one MCO itself deletes with: the push secret named on a build
//! (`rendered-image-push-secret`: every release deletes a build's image with it, 4.19 through
//! skopeo, 4.20 on through containers/image), the newest build's of that repository; where no
//! build names one, the push secret of a MachineOSConfig pushing there (what MCO names on the
//! builds it makes). Secrets are named, never read, here.

use std::collections::BTreeMap;

use crate::core::image::{RepoKey, repo_of};
use crate::core::registry::listing::PushRepository;
use crate::core::snapshot::Snapshot;

/// The repositories of the snapshot's MachineOSConfigs and MachineOSBuilds, by name.
pub fn push_repositories(snapshot: &Snapshot) -> Vec<PushRepository> {
    let mut by_repo: BTreeMap<RepoKey, PushRepository> = BTreeMap::new();
    // Per repository: (no creation time, creation time, name, secret) of each build naming one.
    type Named = (bool, Option<k8s_openapi::jiff::Timestamp>, String, String);
    let mut build_secrets: BTreeMap<RepoKey, Vec<Named>> = BTreeMap::new();
    let mut configs: Vec<_> = snapshot.machine_os_configs.iter().collect();
    configs.sort_by(|a, b| a.name().cmp(b.name()));
    for config in configs {
        let Some(key) = config.push_spec().and_then(repo_of) else {
            continue;
        };
        let source = entry(&mut by_repo, key);
        source.configs.push(config.name().to_string());
        if source.secret.is_none() {
            source.secret = config.push_secret().map(str::to_string);
        }
    }
    for build in &snapshot.machine_os_builds {
        let Some(key) = build.push_spec().and_then(repo_of) else {
            continue;
        };
        entry(&mut by_repo, key.clone());
        if let Some(secret) = build.push_secret() {
            let created = build.metadata.creation_timestamp.as_ref().map(|t| t.0);
            build_secrets.entry(key).or_default().push((
                created.is_none(),
                created,
                build.name().to_string(),
                secret.to_string(),
            ));
        }
    }
    for (key, secrets) in build_secrets {
        // The newest: no creation time counts as newest (it cannot be aged), then the latest.
        let newest = secrets
            .into_iter()
            .max_by(|a, b| (a.0, a.1, &b.2).cmp(&(b.0, b.1, &a.2)));
        if let (Some(source), Some((.., secret))) = (by_repo.get_mut(&key), newest) {
            source.secret = Some(secret);
        }
    }
    by_repo.into_values().collect()
}

fn entry(by_repo: &mut BTreeMap<RepoKey, PushRepository>, key: RepoKey) -> &mut PushRepository {
    by_repo
        .entry(key.clone())
        .or_insert_with(|| PushRepository {
            repository: key.to_string(),
            host: key.registry.clone(),
            path: key.repository.clone(),
            configs: Vec::new(),
            secret: None,
        })
}
