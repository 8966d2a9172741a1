//! What ships beside the binary, held to what it promises: the manifests ([`manifests`]), the
//! OLM bundle ([`olm`]), the alerts ([`alerts`]) and dashboard ([`dashboard`]), the kubectl
//! plugin ([`plugin`]), the docs' links ([`doc_links`]), the set-up's programs check
//! ([`fresh_check`]) and tool install ([`install_tool`]), and the tiers' runner ([`runner`]).

mod alerts;
mod dashboard;
mod doc_links;
mod fresh_check;
mod install_tool;
mod manifests;
mod olm;
mod plugin;
mod runner;
