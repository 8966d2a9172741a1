//! A tiny TCP forwarder on 127.0.0.1 standing in for what routes a Service's traffic: each new
//! connection goes to the current target, which a test can switch (an endpoints update, as
//! kube-proxy applies it), and every forwarded connection can be cut at once (an API server
//! restart or a load balancer failover, as seen by its clients).
//!
//! A connection whose target refuses is closed at once, as a connection to a Service endpoint
//! whose port is closed fails. Established connections keep their target when it is switched,
//! as conntrack keeps them on the old endpoint.
//!
//! What the target sends can also be held back (paused) and let through later, in order: a
//! client whose watch lags behind the server, as a congested network makes it.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::{AbortHandle, JoinHandle};

use crate::Result;

/// A running forwarder; stops (and drops every connection) when dropped.
pub struct Forwarder {
    port: u16,
    target: Arc<Mutex<SocketAddr>>,
    conns: Arc<Mutex<Vec<AbortHandle>>>,
    refused: Arc<Mutex<u64>>,
    paused: watch::Sender<bool>,
    black_hole: Arc<AtomicBool>,
    accept: JoinHandle<()>,
}

impl Forwarder {
    /// A forwarder in front of `cp`'s kube-apiserver (hand its clients
    /// [`Forwarder::https_url`] instead of the server's own URL).
    pub async fn to_apiserver(cp: &crate::controlplane::ControlPlane) -> Result<Self> {
        let addr: SocketAddr = cp
            .server()
            .trim_start_matches("https://")
            .parse()
            .map_err(|e| format!("API server address {}: {e}", cp.server()))?;
        Self::start(addr).await
    }

    /// Listens on a free port of 127.0.0.1 and forwards to `target`.
    pub async fn start(target: SocketAddr) -> Result<Self> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let port = listener.local_addr()?.port();
        let target = Arc::new(Mutex::new(target));
        let conns: Arc<Mutex<Vec<AbortHandle>>> = Arc::default();
        let refused = Arc::new(Mutex::new(0));
        let (paused, _) = watch::channel(false);
        let black_hole = Arc::new(AtomicBool::new(false));
        let accept = {
            let (target, conns, refused, paused, black_hole) = (
                Arc::clone(&target),
                Arc::clone(&conns),
                Arc::clone(&refused),
                paused.clone(),
                Arc::clone(&black_hole),
            );
            tokio::spawn(async move {
                while let Ok((mut client, _)) = listener.accept().await {
                    let to = *target.lock().unwrap_or_else(|p| p.into_inner());
                    let refused = Arc::clone(&refused);
                    let paused = paused.subscribe();
                    let black_hole = Arc::clone(&black_hole);
                    let task = tokio::spawn(async move {
                        if black_hole.load(Ordering::SeqCst) {
                            // Nothing answers: the client waits until its own timeout; the
                            // connection is closed once the black hole is lifted.
                            while black_hole.load(Ordering::SeqCst) {
                                tokio::time::sleep(Duration::from_millis(100)).await;
                            }
                            return;
                        }
                        match TcpStream::connect(to).await {
                            Ok(upstream) => {
                                let (mut from_client, mut to_client) = client.split();
                                let (mut from_target, mut to_target) = upstream.into_split();
                                let up = async {
                                    tokio::io::copy(&mut from_client, &mut to_target).await?;
                                    to_target.shutdown().await
                                };
                                let down = relay(&mut from_target, &mut to_client, paused);
                                let _ = tokio::join!(up, down);
                            }
                            Err(e) => {
                                *refused.lock().unwrap_or_else(|p| p.into_inner()) += 1;
                                tracing::debug!("forwarder: {to} refused a connection: {e}");
                            }
                        }
                    });
                    let mut conns = conns.lock().unwrap_or_else(|p| p.into_inner());
                    conns.retain(|c| !c.is_finished());
                    conns.push(task.abort_handle());
                }
            })
        };
        Ok(Self {
            port,
            target,
            conns,
            refused,
            paused,
            black_hole,
            accept,
        })
    }

    /// Holds back what targets send to clients (on every connection) until [`Self::resume`].
    pub fn pause(&self) {
        self.paused.send_replace(true);
    }

    /// Lets held-back data through, in order.
    pub fn resume(&self) {
        self.paused.send_replace(false);
    }

    /// The port it listens on (127.0.0.1).
    pub fn port(&self) -> u16 {
        self.port
    }

    /// `https://127.0.0.1:PORT` (the TLS is end to end: the forwarder only moves bytes).
    pub fn https_url(&self) -> String {
        format!("https://127.0.0.1:{}", self.port)
    }

    /// Where new connections go.
    pub fn target(&self) -> SocketAddr {
        *self.target.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Sends new connections to `target` from now on.
    pub fn set_target(&self, target: SocketAddr) {
        *self.target.lock().unwrap_or_else(|p| p.into_inner()) = target;
        tracing::info!("forwarder :{} now routes to {target}", self.port);
    }

    /// Closes every forwarded connection now.
    pub fn cut_connections(&self) {
        let conns = std::mem::take(&mut *self.conns.lock().unwrap_or_else(|p| p.into_inner()));
        tracing::info!(
            "forwarder :{}: cutting {} connection(s)",
            self.port,
            conns.len()
        );
        conns.iter().for_each(AbortHandle::abort);
    }

    /// Black-holes the route (`true`): every forwarded connection is cut, and new ones are
    /// accepted but never answered, as when packets to an unreachable API server are dropped;
    /// `false` forwards again.
    pub fn set_black_hole(&self, on: bool) {
        self.black_hole.store(on, Ordering::SeqCst);
        tracing::info!(
            "forwarder :{}: {}",
            self.port,
            if on { "black hole" } else { "forwarding again" }
        );
        if on {
            self.cut_connections();
        }
    }

    /// How many connections the target refused so far.
    pub fn refused(&self) -> u64 {
        *self.refused.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// Copies `from` to `to`, holding each chunk while `paused` says so.
async fn relay(
    from: &mut (impl AsyncReadExt + Unpin),
    to: &mut (impl AsyncWriteExt + Unpin),
    mut paused: watch::Receiver<bool>,
) -> std::io::Result<()> {
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = from.read(&mut buf).await?;
        if n == 0 {
            return to.shutdown().await;
        }
        if paused.wait_for(|p| !*p).await.is_err() {
            return Ok(());
        }
        to.write_all(&buf[..n]).await?;
    }
}

impl Drop for Forwarder {
    fn drop(&mut self) {
        self.accept.abort();
        self.cut_connections();
    }
}
