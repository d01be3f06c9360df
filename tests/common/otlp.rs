//! An OTLP/HTTP receiver for the trace tests (tests/python/otlp_receiver.py, on
//! the OpenTelemetry Python packages of scripts/py-env).

use serde_json::Value;
use std::path::Path;
use std::process::Stdio;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, BufReader};

/// The receiver, running: its port, and the process to stop for its spans.
pub async fn receiver() -> (u16, tokio::process::Child) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut child = tokio::process::Command::new(super::python())
        .arg(root.join("tests/python/otlp_receiver.py"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut first = String::new();
    let out = child.stdout.as_mut().unwrap();
    let mut reader = BufReader::new(out);
    reader.read_line(&mut first).await.unwrap();
    (first.trim().parse().expect("the receiver's port"), child)
}

/// Every span the receiver got, once it is stopped.
pub async fn spans_of(mut child: tokio::process::Child) -> Vec<Value> {
    drop(child.stdin.take());
    let mut out = String::new();
    child
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut out)
        .await
        .unwrap();
    child.wait().await.unwrap();
    out.lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}
