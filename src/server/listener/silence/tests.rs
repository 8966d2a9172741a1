use std::time::Duration;

use super::*;
use crate::server::listener::bind;

#[tokio::test]
async fn a_pending_read_marks_the_client_silent_until_its_data_arrives() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = bind(([127, 0, 0, 1], 0).into()).expect("bind");
    let addr = listener.local_addr().expect("addr");
    let mut client = tokio::net::TcpStream::connect(addr).await.expect("connect");
    let (server, _) = listener.accept().await.expect("accept");
    let wait = Arc::new(ClientWait::new(Arc::default()));
    let mut watched = Silence::watch(server, Arc::clone(&wait), Arc::default());
    let reader = tokio::spawn(async move {
        let mut byte = [0u8; 1];
        watched.read_exact(&mut byte).await.map(|_| byte[0])
    });
    for _ in 0..100 {
        if wait.waiting_since().is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert!(
        wait.waiting_since().is_some(),
        "a read waits for the client"
    );
    client.write_all(b"x").await.expect("write");
    let byte = tokio::time::timeout(Duration::from_secs(5), reader)
        .await
        .expect("read")
        .expect("reader")
        .expect("byte");
    assert_eq!(byte, b'x');
    assert_eq!(wait.waiting_since(), None, "the data ended the silence");
}
