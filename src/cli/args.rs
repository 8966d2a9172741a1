//! The command line as clap parses it: every subcommand's flags, with their help text. The
//! subcommands' own modules validate and act on them.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand, ValueEnum};

use crate::access::live;
use crate::core::model::MACHINE_OS_BUILDER_USER;
use crate::core::policy::PolicyMode;
use crate::decision::{DeletionMode, Enforcement};

#[derive(Debug, Parser)]
#[command(
    name = "mosc-guard",
    version,
    about = "Keeps Image Mode pools from degrading when a MachineOSConfig or MachineOSBuild is deleted too early"
)]
pub struct Cli {
    /// Log format on stderr: text, or json (one object per line, for log collectors).
    #[arg(long, global = true, value_enum, env = "MOSC_GUARD_LOG_FORMAT", default_value_t = Output::Text)]
    pub log_format: Output,
    #[command(subcommand)]
    pub command: Command,
}

// Parsed once at start-up and matched once: the size of the largest variant does not matter.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the admission webhook (HTTPS: /validate, /mutate, /healthz, /readyz, /metrics).
    Serve(ServeArgs),
    /// Say whether deleting a MachineOSConfig or MachineOSBuild is safe now.
    /// Exit status: 0 safe, 1 would be blocked, 2 error.
    Check(CheckArgs),
    /// Write a throwaway CA and a serving certificate for the webhook's Service (clusters
    /// without service-ca or cert-manager, local runs); print the caBundle.
    /// Exit status: 0 written, 2 error.
    Certs(CertsArgs),
    /// Remove mosc-guard's finalizer from every MachineOSConfig (uninstalling defer mode).
    /// Deletions still deferred are kept unless --force.
    /// Exit status: 0 none left, 1 some kept, 2 error (an object whose finalizer could not be
    /// removed is named with the reason; the others' are still removed).
    #[command(alias = "release-finalizers")]
    RemoveFinalizers(RemoveFinalizersArgs),
    /// Heal nodes the lost-image bug already degraded: plan, for every node stuck on an image
    /// no build carries, the patch that cancels its failed target (or what a person must do
    /// first); with --apply, cancel them one at a time on the live cluster and wait for each.
    /// Exit status: 0 nothing needs a person, 1 some node does, 2 error.
    Recover(RecoverArgs),
    /// Every image nodes, MachineOSConfigs and succeeded builds need, and whether its registry
    /// still serves it, asked where and as a node pulls it (the node's pull secret, CAs, proxy
    /// and mirrors; read-only).
    /// Exit status: 0 every image a node or a MachineOSConfig needs is available, 1 one is
    /// missing or unknown, 2 the input cannot be read.
    Images(ImagesArgs),
    /// List every MachineOSBuild deletable now (no node needs its image, MCO would not reuse
    /// it, beyond the newest --keep, older than --keep-younger-than) or kept and why, and (live)
    /// the images no build names; with --apply, delete the deletable builds one at a time on the
    /// live cluster, each re-read and re-planned first (MCO then deletes their images), and with
    /// --images too the deletable images, one digest at a time.
    /// Exit status: 0 plan made (and carried out), 1 something could not be done, 2 error.
    Prune(PruneArgs),
}

/// Which cluster to talk to.
#[derive(Debug, Args)]
pub struct ClusterArgs {
    /// Kubeconfig file (default: in-cluster config, $KUBECONFIG or ~/.kube/config).
    #[arg(long)]
    pub kubeconfig: Option<PathBuf>,
    /// Kubeconfig context to use.
    #[arg(long)]
    pub context: Option<String>,
}

impl ClusterArgs {
    /// A client for the kubeconfig and context given (or inferred).
    pub(super) async fn client(&self) -> Result<kube::Client, live::LiveError> {
        live::client(self.kubeconfig.as_deref(), self.context.as_deref()).await
    }
}

#[derive(Debug, Args)]
pub struct RemoveFinalizersArgs {
    #[command(flatten)]
    pub cluster: ClusterArgs,
    /// Also let deletions go that nodes still need (the pool may degrade).
    #[arg(long)]
    pub force: bool,
}

/// A dump to read instead of a live cluster.
#[derive(Debug, Args)]
pub struct DumpArgs {
    /// Read objects from YAML/JSON files below DIR (a must-gather, `oc get -o yaml`
    /// output) instead of a live cluster.
    #[arg(long, value_name = "DIR", conflicts_with_all = ["kubeconfig", "context"])]
    pub from_dir: Option<PathBuf>,
    /// With --from-dir: decide on what could be read even when a file that holds what the
    /// command reads (Nodes, pools, MachineOSConfigs, MachineOSBuilds; for recover also
    /// MachineConfigs) could not be read whole (or the dump has nodes but no pools), listing
    /// what could not. Without it such a dump is an error (exit 2).
    #[arg(long, requires = "from_dir")]
    pub allow_incomplete: bool,
}

/// Where the cluster's objects come from.
#[derive(Debug, Args)]
pub struct SourceArgs {
    #[command(flatten)]
    pub cluster: ClusterArgs,
    #[command(flatten)]
    pub dump: DumpArgs,
    // Help from `openshift_version_help`: it names the releases the table knows.
    #[arg(long, value_name = "VERSION", env = "MOSC_GUARD_OPENSHIFT_VERSION", help = openshift_version_help())]
    pub openshift_version: Option<String>,
    /// in-flight: block while a node has not reached an image of the object;
    /// in-use: also while a node runs one (a settled pool then needs the override).
    #[arg(long, value_enum, default_value_t = Policy::InFlight)]
    pub policy: Policy,
}

#[derive(Debug, Args)]
pub struct ServeArgs {
    #[command(flatten)]
    pub source: SourceArgs,
    /// Address to listen on.
    #[arg(long, default_value = "0.0.0.0:8443")]
    pub listen: SocketAddr,
    /// PEM certificate chain, re-read when it changes.
    #[arg(long, value_name = "FILE")]
    pub tls_cert_file: PathBuf,
    /// PEM private key, re-read when it changes.
    #[arg(long, value_name = "FILE")]
    pub tls_key_file: PathBuf,
    /// PEM CA certificate(s): on --listen, require a client certificate this CA signed (the
    /// API server's, given by its --admission-control-config-file); a caller without one fails
    /// the TLS handshake. Needs --metrics-listen, since kubelet's probes and Prometheus cannot
    /// present one.
    #[arg(long, value_name = "FILE", requires = "metrics_listen")]
    pub client_ca_file: Option<PathBuf>,
    /// Also serve /healthz, /readyz and /metrics (HTTPS, same certificate, no client
    /// certificate) on this address, so probes and monitoring need not reach the webhook port.
    #[arg(long, value_name = "ADDR")]
    pub metrics_listen: Option<SocketAddr>,
    /// Seconds between checks of the certificate files.
    #[arg(long, default_value_t = 10, value_name = "SECONDS")]
    pub tls_reload_interval: u64,
    /// Deadline for one request, in seconds; keep it below the webhook's timeoutSeconds.
    #[arg(long, default_value_t = 8, value_name = "SECONDS")]
    pub request_timeout: u64,
    /// Deadline for the fresh read that confirms an allow, in seconds.
    #[arg(long, default_value_t = 5, value_name = "SECONDS")]
    pub confirm_timeout: u64,
    /// Seconds the server keeps accepting connections after SIGTERM, with /readyz answering
    /// 503, so the endpoint is removed from the Service before the listener closes (keep the
    /// pod's terminationGracePeriodSeconds above this plus --shutdown-grace).
    #[arg(long, default_value_t = 10, value_name = "SECONDS")]
    pub shutdown_delay: u64,
    /// Seconds in-flight requests get to finish once the server stopped accepting.
    #[arg(long, default_value_t = 20, value_name = "SECONDS")]
    pub shutdown_grace: u64,
    /// Seconds a cache's watch may fail continuously before /readyz answers 503 naming it
    /// (it recovers on its own when the watch does).
    #[arg(long, default_value_t = 30, value_name = "SECONDS")]
    pub stale_after: u64,
    /// Milliseconds a confirming read waits for the node cache to catch up with the API
    /// server before it also lists every node (the first to finish answers; see
    /// docs/design.md). 0 lists at once, as a small cluster may prefer.
    #[arg(long, default_value_t = 100, value_name = "MILLISECONDS")]
    pub fence_wait_ms: u64,
    /// Milliseconds a confirming read waits, after the request that starts it arrived, so
    /// that allows arriving together share it (see docs/design.md). 0 starts it at once.
    #[arg(long, default_value_t = 2, value_name = "MILLISECONDS")]
    pub confirm_batch_window_ms: u64,
    /// deny: refuse a MachineOSConfig deletion while nodes need its images;
    /// defer: accept it and hold the object with a finalizer until the rollout settles
    /// (needs the mutating webhook, policy in-flight and a live cluster).
    #[arg(long, value_enum, default_value_t = DeletionMode::Deny)]
    pub deletion_mode: DeletionMode,
    /// deny: refusals are enforced; warn: a deletion that would be refused is admitted with the
    /// refusal as warnings, counted as `would-deny` and recorded as a DeletionWouldBeBlocked
    /// Event (try the guard before enforcing it; deny mode only).
    #[arg(long, value_enum, default_value_t = Enforcement::Deny)]
    pub enforcement: Enforcement,
    /// A user whose requests are the machine-config-operator's own (repeat for more; default its
    /// machine-os-builder's service account). They are admitted whatever the verdict: MCO
    /// deletes a build only after its image is gone or when it never had one, so a refusal
    /// protects nothing and stops MCO's build pipeline. One the guard would have refused is
    /// counted as `mco-would-deny` and recorded as a DeletionByMCOAdmitted Event.
    /// `--mco-user=` exempts nobody.
    #[arg(long = "mco-user", value_name = "USERNAME", env = "MOSC_GUARD_MCO_USER", default_values_t = [MACHINE_OS_BUILDER_USER.to_string()])]
    pub mco_users: Vec<String>,
    /// Defer mode: add no finalizers (draining before an uninstall); deferred deletions
    /// still complete.
    #[arg(long)]
    pub no_new_finalizers: bool,
    /// Namespace of the leader-election Lease (both modes: its holder runs the finalizer
    /// controller).
    #[arg(long, env = "POD_NAMESPACE", default_value = "mosc-guard")]
    pub lease_namespace: String,
    /// Name of the leader-election Lease.
    #[arg(long, default_value = "mosc-guard")]
    pub lease_name: String,
    /// This replica's identity in the Lease and in Events (default: $POD_NAME, else the
    /// host name and process id).
    #[arg(long, env = "POD_NAME")]
    pub identity: Option<String>,
    /// Seconds between asks of each image nodes need from its registry, as a node pulls it
    /// (a node's new target is asked within seconds; an answer other than available is asked
    /// again sooner), and between counts of the images `prune` would delete (listed with the
    /// nodes' pull secret). 0 turns the registry audit off. Live clusters only.
    #[arg(long, default_value_t = 300, value_name = "SECONDS",
          value_parser = clap::value_parser!(u64).range(0..=MAX_DURATION.as_secs()))]
    pub registry_check_interval: u64,
}

#[derive(Debug, Args)]
pub struct CheckArgs {
    /// machineosconfig/NAME (or mosc/NAME, or NAME) or machineosbuild/NAME (or mosb/NAME).
    #[arg(required_unless_present = "all", conflicts_with = "all")]
    pub target: Option<String>,
    /// The verdict for every MachineOSConfig (a table, or a JSON array of reports): what is
    /// unsafe to delete right now. Exit status 1 when any would be refused.
    #[arg(long)]
    pub all: bool,
    /// With --all: every MachineOSBuild too.
    #[arg(long, requires = "all")]
    pub builds: bool,
    #[command(flatten)]
    pub source: SourceArgs,
    /// Output format.
    #[arg(long, short = 'o', value_enum, default_value_t = Output::Text)]
    pub output: Output,
    /// Do not ask the registry whether the images the deletion would remove are still served
    /// (live only; a dump is never asked). The answer never changes the exit status.
    #[arg(long)]
    pub no_registry: bool,
}

#[derive(Debug, Args)]
pub struct CertsArgs {
    /// Name of the Service the webhook configuration calls.
    #[arg(long, default_value = "mosc-guard")]
    pub service: String,
    /// Namespace of that Service.
    #[arg(long, default_value = "mosc-guard")]
    pub namespace: String,
    /// Directory to write ca.crt, tls.crt and tls.key into (created if missing).
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,
    /// Also valid for this IP address (repeatable), e.g. 127.0.0.1 for a local run.
    #[arg(long = "ip", value_name = "ADDRESS")]
    pub ips: Vec<String>,
    /// Validity of both certificates, in days.
    #[arg(long, default_value_t = 365)]
    pub days: u32,
    /// Replace ca.crt, tls.crt and tls.key if they exist.
    #[arg(long)]
    pub force: bool,
}

#[derive(Debug, Args)]
pub struct ImagesArgs {
    #[command(flatten)]
    pub cluster: ClusterArgs,
    #[command(flatten)]
    pub dump: DumpArgs,
    /// With --from-dir: the credentials nodes pull with, as a containers/docker auth file
    /// (`{"auths": {...}}`, e.g. the global pull secret's `.dockerconfigjson`); a dump holds no
    /// secrets. Live, the ControllerConfig's internalRegistryPullSecret is used, as on nodes.
    #[arg(long, value_name = "FILE", requires = "from_dir")]
    pub authfile: Option<std::path::PathBuf>,
    /// Output format.
    #[arg(long, short = 'o', value_enum, default_value_t = Output::Text)]
    pub output: Output,
    /// Seconds one image may take (every place it is pulled from); past it, unknown.
    #[arg(long, default_value_t = 60, value_name = "SECONDS")]
    pub image_timeout: u64,
}

#[derive(Debug, Args)]
pub struct RecoverArgs {
    /// Only the nodes of this pool (default: every pool).
    pub pool: Option<String>,
    #[command(flatten)]
    pub cluster: ClusterArgs,
    // A plan only: --apply needs the live cluster.
    #[command(flatten)]
    pub dump: DumpArgs,
    /// With --from-dir: the credentials nodes pull with (as for `images`), so that the registry
    /// is asked whether each stuck node's image is gone; without it a plan from a dump does not
    /// ask, and says the loss was not verified.
    #[arg(long, value_name = "FILE", requires = "from_dir")]
    pub authfile: Option<std::path::PathBuf>,
    /// Also cancel the target of a node whose registry could not tell whether its image is gone
    /// (unknown: refused credentials, unreachable, no ControllerConfig): you have verified the
    /// loss yourself. An image the registry still serves is never cancelled.
    #[arg(long)]
    pub image_loss_verified: bool,
    /// Output format (progress lines of --apply go to stderr).
    #[arg(long, short = 'o', value_enum, default_value_t = Output::Text)]
    pub output: Output,
    /// Cancel each recoverable node's failed target on the live cluster (not with --from-dir):
    /// one node at a time, each re-read and re-planned right before its conditional patch,
    /// then waited for until its daemon reports Done without a reboot. Without it nothing is
    /// written.
    #[arg(long)]
    pub apply: bool,
    /// With --apply: then also wait for each pool a node was recovered in to finish
    /// (Updated=True, or its MachineOSConfig's rollout resumed once you unpause it).
    #[arg(long, requires = "apply")]
    pub wait: bool,
    /// With --apply: how long to wait for one node (and with --wait for one pool) before
    /// stopping and reporting, never escalating (e.g. 20m, 90s, 1h30m).
    #[arg(long, value_name = "DURATION", default_value = "20m", value_parser = parse_duration)]
    pub timeout: Duration,
}

/// The longest `--timeout`: a week. Longer is a typo, and a deadline past what the clock can
/// add would end the run in a panic after a node was patched.
const MAX_DURATION: Duration = Duration::from_secs(7 * 24 * 3600);

/// A duration as people write it (`20m`, `90s`, `1h30m`, or ISO 8601's `PT20M`), at most
/// [`MAX_DURATION`].
fn parse_duration(text: &str) -> Result<Duration, String> {
    let parsed: k8s_openapi::jiff::SignedDuration = text
        .trim()
        .parse()
        .map_err(|e| format!("not a duration (write e.g. 20m, 90s or 1h30m): {e}"))?;
    let duration =
        Duration::try_from(parsed).map_err(|_| "a duration cannot be negative".to_string())?;
    if duration > MAX_DURATION {
        return Err(format!("{text} is longer than a week: at most 168h"));
    }
    Ok(duration)
}

#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum Output {
    Text,
    Json,
}

/// `--policy`: how strictly "a node still needs the image" is read.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, ValueEnum)]
pub enum Policy {
    /// Block while a node's desired image is one of the images and not yet reached.
    #[default]
    InFlight,
    /// Also block while a node runs one of the images (a settled pool then can never leave
    /// image mode without the override).
    InUse,
}

impl From<Policy> for PolicyMode {
    fn from(p: Policy) -> Self {
        match p {
            Policy::InFlight => PolicyMode::InFlight,
            Policy::InUse => PolicyMode::InUse,
        }
    }
}

/// `--openshift-version`'s help, naming the releases the table knows (`core::release`).
fn openshift_version_help() -> String {
    format!(
        "Decide with this OpenShift release's rules ({}) instead of what the cluster's (or the \
         dump's) ClusterVersion says, an upgrade in flight included. An unknown release gets the \
         most cautious rules, as does a cluster without a ClusterVersion.",
        crate::core::release::known_range()
    )
}

#[derive(Debug, Args)]
pub struct PruneArgs {
    #[command(flatten)]
    pub cluster: ClusterArgs,
    // A plan only: --apply needs the live cluster.
    #[command(flatten)]
    pub dump: DumpArgs,
    // Help from `openshift_version_help`: it names the releases the table knows.
    #[arg(long, value_name = "VERSION", env = "MOSC_GUARD_OPENSHIFT_VERSION", help = openshift_version_help())]
    pub openshift_version: Option<String>,
    /// Keep the newest N succeeded MachineOSBuilds of each MachineOSConfig whatever else holds.
    #[arg(long, value_name = "N", default_value_t = 3)]
    pub keep: usize,
    /// Keep every MachineOSBuild younger than this (e.g. 60m, 12h, 7d; 0s keeps none for its
    /// age).
    #[arg(long, value_name = "DURATION", default_value = "60m", value_parser = parse_age)]
    pub keep_younger_than: Duration,
    /// Output format (progress lines of --apply go to stderr).
    #[arg(long, short = 'o', value_enum, default_value_t = Output::Text)]
    pub output: Output,
    /// Delete the deletable MachineOSBuilds on the live cluster (not with --from-dir): one at a
    /// time, each re-read and re-planned right before a delete conditional on its uid and
    /// resourceVersion, then waited for until it is gone. Without it nothing is written.
    #[arg(long)]
    pub apply: bool,
    /// With --apply: also delete the deletable images no MachineOSBuild names, one digest at a
    /// time (each re-listed and re-planned right before its delete, with the push secret MCO
    /// uses). Without --apply: the plan fails (exit 1) when a repository could not be listed.
    #[arg(long)]
    pub images: bool,
    /// With --apply: how long to wait for one deleted build to be gone before stopping and
    /// reporting (e.g. 5m, 90s).
    #[arg(long, value_name = "DURATION", default_value = "5m", requires = "apply", value_parser = parse_duration)]
    pub timeout: Duration,
}

/// An age as people write it (`60m`, `12h`, `7d`, ISO 8601's `PT1H`), however long.
fn parse_age(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    // jiff's friendly format has no `d` for a span of fixed length: a day here is 24 hours.
    let parsed: k8s_openapi::jiff::SignedDuration = match text.strip_suffix('d') {
        Some(days) => days
            .parse::<i64>()
            .ok()
            .and_then(|d| d.checked_mul(24))
            .and_then(k8s_openapi::jiff::SignedDuration::try_from_hours)
            .ok_or_else(|| format!("not a number of days: {text}"))?,
        None => text
            .parse()
            .map_err(|e| format!("not a duration (write e.g. 60m, 12h or 7d): {e}"))?,
    };
    Duration::try_from(parsed).map_err(|_| "a duration cannot be negative".to_string())
}
