//! How the control plane's servers are started (and started again, for chaos tests): etcd,
//! kube-apiserver with client-certificate auth, RBAC and service-account tokens, and
//! kube-controller-manager running only its garbage collector (or, for a real node, the
//! controllers of [`super::workloads`]).

use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use crate::Result;
use crate::net::free_port;
use crate::pki::Pki;
use crate::probe;
use crate::process::ChildProcess;

/// How to start one server again exactly as before (same flags, ports, files, log).
pub(super) struct Respawn {
    name: &'static str,
    program: PathBuf,
    args: Vec<OsString>,
    log: PathBuf,
}

impl Respawn {
    pub(super) fn spawn(&self) -> Result<ChildProcess> {
        let mut cmd = Command::new(&self.program);
        cmd.args(&self.args);
        ChildProcess::spawn(self.name, cmd, &self.log)
    }
}

/// etcd on free client and peer ports: how to start it, and its client URL.
pub(super) fn etcd_spec(bin: &Path, dir: &Path, extra: &[&str]) -> Result<(Respawn, String)> {
    let client_url = format!("http://127.0.0.1:{}", free_port()?);
    let peer_url = format!("http://127.0.0.1:{}", free_port()?);
    let mut args: Vec<OsString> = vec![
        "--name=e2e".into(),
        format!("--data-dir={}", dir.join("etcd").display()).into(),
        format!("--listen-client-urls={client_url}").into(),
        format!("--advertise-client-urls={client_url}").into(),
        format!("--listen-peer-urls={peer_url}").into(),
        format!("--initial-advertise-peer-urls={peer_url}").into(),
        format!("--initial-cluster=e2e={peer_url}").into(),
        "--unsafe-no-fsync".into(),
        // A single member elects itself after one election timeout: 100 ms instead of 1 s
        // (it has no peer to lose the election to, so a short timeout costs nothing). The
        // heartbeat is the longest etcd allows with it (a fifth): each tick costs CPU.
        "--heartbeat-interval=20".into(),
        "--election-timeout=100".into(),
        "--log-level=warn".into(),
    ];
    args.extend(extra.iter().map(OsString::from));
    let spec = Respawn {
        name: "etcd",
        program: bin.to_owned(),
        args,
        log: dir.join("etcd.log"),
    };
    Ok((spec, client_url))
}

/// Waits until etcd reports itself healthy.
pub(super) async fn wait_etcd_ready(etcd: &mut ChildProcess, etcd_url: &str) -> Result<()> {
    let http = crate::tls::http_client()?;
    etcd.wait_ready(
        "GET /health",
        Duration::from_secs(30),
        Duration::from_millis(50),
        || {
            let (http, url) = (http.clone(), format!("{etcd_url}/health"));
            async move {
                let body = http.get(url).send().await?.text().await?;
                if body.contains("\"health\":\"true\"") {
                    Ok(())
                } else {
                    Err(format!("etcd /health: {body}").into())
                }
            }
        },
    )
    .await
}

/// Waits until kube-apiserver's `/readyz` answers 200.
pub(super) async fn wait_apiserver_ready(
    apiserver: &mut ChildProcess,
    https: &reqwest::Client,
    server: &str,
    timeout: Duration,
) -> Result<()> {
    apiserver
        .wait_ready("GET /readyz", timeout, Duration::from_millis(100), || {
            let (https, url) = (https.clone(), format!("{server}/readyz"));
            async move { probe::ready(&https, &url).await }
        })
        .await
}

/// kube-apiserver on `port` with client-certificate auth and RBAC: how to start it (its
/// serving certificate and service-account keys are written now, once). With `node_ip` it
/// serves a real node ([`super::workloads::apiserver_args`]), else 127.0.0.1 alone.
pub(super) fn apiserver_spec(
    bin: &Path,
    dir: &Path,
    pki: &Pki,
    port: u16,
    etcd_url: &str,
    admission_config: Option<&Path>,
    node_ip: Option<std::net::Ipv4Addr>,
) -> Result<Respawn> {
    let serving = pki.server_cert(
        "kube-apiserver",
        &[
            "127.0.0.1",
            "localhost",
            "10.0.0.1",
            "kubernetes",
            "kubernetes.default",
            "kubernetes.default.svc",
        ],
    )?;
    // Service-account token signing key pair.
    let sa_key = rcgen::KeyPair::generate()?;
    let sa_private = dir.join("sa.key");
    let sa_public = dir.join("sa.pub");
    std::fs::write(&sa_private, sa_key.serialize_pem())?;
    std::fs::write(&sa_public, sa_key.public_key_pem())?;
    let cert_dir = dir.join("apiserver-certs");
    std::fs::create_dir_all(&cert_dir)?;

    let mut cmd = Command::new(bin);
    cmd.arg(format!("--etcd-servers={etcd_url}"))
        .arg(format!("--secure-port={port}"))
        .arg(format!("--cert-dir={}", cert_dir.display()))
        .arg(format!("--tls-cert-file={}", serving.cert.display()))
        .arg(format!("--tls-private-key-file={}", serving.key.display()))
        .arg(format!("--client-ca-file={}", pki.ca_path().display()))
        .arg(format!(
            "--service-account-key-file={}",
            sa_public.display()
        ))
        .arg(format!(
            "--service-account-signing-key-file={}",
            sa_private.display()
        ))
        .arg("--service-account-issuer=https://kubernetes.default.svc.cluster.local")
        .arg(format!("--service-cluster-ip-range={SERVICE_CIDR}"))
        .arg("--allow-privileged=true")
        .arg("--v=1");
    match node_ip {
        Some(ip) => {
            let admin = pki.client_cert("kube-apiserver-kubelet-client", &["system:masters"])?;
            cmd.args(super::workloads::apiserver_args(ip, &admin));
        }
        None => {
            cmd.arg("--bind-address=127.0.0.1")
                .arg("--advertise-address=127.0.0.1")
                .arg("--authorization-mode=RBAC")
                // No pod runs, so no pod needs a token volume (the controller-manager runs only
                // the GC).
                .arg("--disable-admission-plugins=ServiceAccount")
                // The API server's own Endpoints reconciler rejects a loopback advertise address.
                .arg("--endpoint-reconciler-type=none");
        }
    }
    if let Some(config) = admission_config {
        cmd.arg(format!(
            "--admission-control-config-file={}",
            config.display()
        ));
    }
    Ok(Respawn {
        name: "kube-apiserver",
        program: bin.to_owned(),
        args: cmd.get_args().map(OsStr::to_owned).collect(),
        log: dir.join("kube-apiserver.log"),
    })
}

/// The Services' ClusterIP range (the `kubernetes` Service is its first address, 10.0.0.1).
pub(super) const SERVICE_CIDR: &str = "10.0.0.0/24";

/// kube-controller-manager's log lines when its garbage collector's first wait (30 s) for its
/// resource monitors ends: all synced, or not (it then goes on with some resources unwatched; a
/// loaded machine sees it, and a fresh process syncs them).
const GC_SYNCED: &str = "Garbage collector: all resource monitors have synced";
const GC_NOT_SYNCED: &str = "Garbage collector: not all resource monitors could be synced";

/// Starts kube-controller-manager with only the garbage collector (and `extra` flags: more
/// controllers for a real node, [`super::workloads::controller_manager_args`]), as the admin, on
/// a free loopback port, and waits until its resource monitors have synced (before that, owner
/// references and `foregroundDeletion` would go unnoticed for a moment): a process whose
/// monitors did not sync in time is started afresh, at most three times in all.
pub(super) async fn start_controller_manager(
    bin: &Path,
    dir: &Path,
    kubeconfig: &Path,
    extra: &[OsString],
) -> Result<ChildProcess> {
    let cert_dir = dir.join("controller-manager-certs");
    std::fs::create_dir_all(&cert_dir)?;
    let mut attempt = 0;
    loop {
        attempt += 1;
        let mut cmd = Command::new(bin);
        cmd.arg(format!("--kubeconfig={}", kubeconfig.display()))
            .arg("--controllers=garbagecollector")
            .args(extra)
            .arg("--leader-elect=false")
            .arg("--bind-address=127.0.0.1")
            .arg(format!("--secure-port={}", free_port()?))
            .arg(format!("--cert-dir={}", cert_dir.display()))
            .arg("--use-service-account-credentials=false")
            .arg("--v=2");
        let log = dir.join(format!("kube-controller-manager-{attempt}.log"));
        let mut process = ChildProcess::spawn("kube-controller-manager", cmd, &log)?;
        let seen = process
            .wait_log_line("garbage collector synced", &[GC_SYNCED, GC_NOT_SYNCED])
            .await?;
        if seen == GC_SYNCED {
            return Ok(process);
        }
        let why = format!(
            "its garbage collector went on with unsynced resource monitors; last lines of {}:\n{}",
            log.display(),
            process.log_tail(20)
        );
        if attempt == 3 {
            return Err(format!("kube-controller-manager, three times: {why}").into());
        }
        tracing::warn!(
            "kube-controller-manager (attempt {attempt} of 3): {why}; starting it again"
        );
        process.kill();
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    /// A stand-in controller-manager whose garbage collector gives up `give_ups` times, then
    /// syncs (each start counted in `dir/starts`).
    fn fake(dir: &Path, give_ups: u32) -> Result<PathBuf> {
        let bin = dir.join("fake-kcm");
        let script = format!(
            "#!/bin/sh\nn=$(($(cat {dir}/starts 2>/dev/null || echo 0) + 1)); echo $n > {dir}/starts\n\
             if [ $n -le {give_ups} ]; then echo '{GC_NOT_SYNCED}, proceeding anyways'; \
             else echo '{GC_SYNCED}'; fi\nexec sleep 30\n",
            dir = dir.display()
        );
        std::fs::write(&bin, script)?;
        std::fs::set_permissions(&bin, std::fs::Permissions::from_mode(0o755))?;
        Ok(bin)
    }

    fn starts(dir: &Path) -> String {
        std::fs::read_to_string(dir.join("starts")).unwrap_or_default()
    }

    #[tokio::test]
    async fn a_garbage_collector_that_gave_up_is_started_afresh_at_most_three_times() -> Result<()>
    {
        let dir = tempfile::tempdir()?;
        let bin = fake(dir.path(), 2)?;
        let kcm = start_controller_manager(&bin, dir.path(), &dir.path().join("kc"), &[]).await?;
        assert_eq!(starts(dir.path()).trim(), "3", "synced at the third start");
        assert!(kcm.log_path().ends_with("kube-controller-manager-3.log"));

        let dir = tempfile::tempdir()?;
        let bin = fake(dir.path(), 3)?;
        let err = start_controller_manager(&bin, dir.path(), &dir.path().join("kc"), &[])
            .await
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert_eq!(starts(dir.path()).trim(), "3", "no fourth start");
        assert!(
            err.contains("three times") && err.contains(GC_NOT_SYNCED),
            "{err}"
        );
        Ok(())
    }
}
