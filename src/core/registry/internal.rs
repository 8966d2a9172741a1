//! Which registry hosts are OpenShift's internal registry, as MCO tells them apart before it
//! deletes an image (`isOpenShiftRegistry`, `pkg/controller/build/reconciler.go`): the host of
//! each Service in `openshift-image-registry` (`<name>.openshift-image-registry.svc[:port]`)
//! and each Route's host there. There MCO deletes the ImageStreamTag through the API instead of
//! the registry's manifest, so prune must not delete through the registry either.
//!
//! Two forms of host count too, whatever the lists said: `*.openshift-image-registry.svc[.cluster.local][:port]`
//! (a Service's), and a host whose first DNS label ends with `-openshift-image-registry` (a
//! Route's host as the router generates it, `<route>-<namespace>.<apps domain>`: the registry
//! operator's `default-route-openshift-image-registry.apps...`, which MCO also puts in the
//! nodes' pull secret). The lists can fail or be forbidden, and `serve` has no right to them;
//! a wrong "internal" only costs a delete prune leaves to the admin.

/// The namespace of OpenShift's internal registry.
pub const NAMESPACE: &str = "openshift-image-registry";

/// Whether `host` (`host[:port]`, as an image names it) is the internal registry, given the
/// hosts its Services and Routes name (`known`).
pub fn is_internal(host: &str, known: &[String]) -> bool {
    let host = host.trim().to_ascii_lowercase();
    if known.iter().any(|k| k.trim().eq_ignore_ascii_case(&host)) {
        return true;
    }
    let bare = match host.rsplit_once(':') {
        Some((name, port)) if port.chars().all(|c| c.is_ascii_digit()) => name,
        _ => host.as_str(),
    };
    let service = [".svc", ".svc.cluster.local"]
        .iter()
        .any(|suffix| bare.ends_with(&format!(".{NAMESPACE}{suffix}")));
    let generated_route = bare
        .split_once('.')
        .is_some_and(|(first, _)| first.ends_with(&format!("-{NAMESPACE}")));
    service || generated_route
}

/// Whether a repository's host is OpenShift's internal registry, as far as prune can tell.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Internal {
    /// Its Services and Routes (or the host's form) say it is.
    Yes,
    /// The lists were read, and neither they nor the host's form say it is.
    No,
    /// The host's form does not say, and the lists could not be read (why): it may be the
    /// internal registry on a Route with a host of its own.
    Unknown(String),
}

impl Internal {
    /// What the lists (`known`, or why they could not be read) and the host's form say of
    /// `host`.
    pub fn of(host: &str, known: Result<&[String], &str>) -> Internal {
        match known {
            Ok(known) if is_internal(host, known) => Internal::Yes,
            Ok(_) => Internal::No,
            Err(_) if is_internal(host, &[]) => Internal::Yes,
            Err(why) => Internal::Unknown(why.to_string()),
        }
    }
}

/// The host of each Service (`<name>.<namespace>.svc:<first port>`) as MCO writes it.
pub fn service_host(name: &str, first_port: Option<i32>) -> String {
    let port = first_port.map_or(String::new(), |port| format!(":{port}"));
    format!("{name}.{NAMESPACE}.svc{port}")
}

#[cfg(test)]
mod tests;
