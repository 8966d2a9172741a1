//! An HTTP `CONNECT` proxy on 127.0.0.1, as a cluster proxy tunnels HTTPS: it opens each tunnel
//! to the address its table names for the requested `host:port` (so a test can use a name that
//! only the proxy can reach, as behind a real proxy) and counts the tunnels. Stops on Drop.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

use crate::Result;

/// A running proxy.
pub struct ConnectProxy {
    addr: String,
    tunnels: Arc<AtomicUsize>,
    task: JoinHandle<()>,
}

impl Drop for ConnectProxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl ConnectProxy {
    /// Tunnels `CONNECT name` to `routes[name]` (`host:port` each); refuses any other name.
    pub async fn start(routes: BTreeMap<String, String>) -> Result<Self> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?.to_string();
        let tunnels = Arc::new(AtomicUsize::new(0));
        let routes = Arc::new(routes);
        let counted = Arc::clone(&tunnels);
        let task = tokio::spawn(async move {
            loop {
                let Ok((client, _)) = listener.accept().await else {
                    continue;
                };
                let (routes, counted) = (Arc::clone(&routes), Arc::clone(&counted));
                tokio::spawn(async move {
                    let _ = tunnel(client, &routes, &counted).await;
                });
            }
        });
        Ok(ConnectProxy {
            addr,
            tunnels,
            task,
        })
    }

    /// `http://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Tunnels opened so far.
    pub fn tunnels(&self) -> usize {
        self.tunnels.load(Ordering::Relaxed)
    }
}

async fn tunnel(
    mut client: TcpStream,
    routes: &BTreeMap<String, String>,
    counted: &AtomicUsize,
) -> std::io::Result<()> {
    // The request head: at most 8 KiB, up to the blank line.
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") && head.len() < 8192 {
        if client.read(&mut byte).await? == 0 {
            return Ok(());
        }
        head.push(byte[0]);
    }
    let head = String::from_utf8_lossy(&head);
    let target = head
        .lines()
        .next()
        .and_then(|l| l.strip_prefix("CONNECT "))
        .and_then(|l| l.split_whitespace().next())
        .and_then(|name| routes.get(name));
    let Some(target) = target else {
        client
            .write_all(b"HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\n\r\n")
            .await?;
        return Ok(());
    };
    let mut upstream = TcpStream::connect(target).await?;
    counted.fetch_add(1, Ordering::Relaxed);
    client
        .write_all(b"HTTP/1.1 200 Connection established\r\n\r\n")
        .await?;
    tokio::io::copy_bidirectional(&mut client, &mut upstream).await?;
    Ok(())
}
