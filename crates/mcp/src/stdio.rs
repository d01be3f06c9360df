//! The stdio transport with the same framing checks as HTTP.
//!
//! rmcp reads newline-delimited JSON from stdin and drops a line it cannot parse
//! without a word, so a client that sent a malformed message waited for an answer
//! that never came. Here each line is checked first ([`super::jsonrpc`]): a line
//! that is not a JSON-RPC message gets the JSON-RPC error on stdout at once (a
//! notification, which gets no answer by the protocol, is only logged), and only
//! good lines reach rmcp (a `tools/call` that asked for a task marked for the
//! handler: [`super::tasks::mark`]). rmcp's output and these errors share one
//! writer, so lines never interleave. A line is at most [`MAX_BODY`] bytes, like an
//! HTTP body.

use super::http::MAX_BODY;
use super::jsonrpc::{self, INVALID_REQUEST};
use rmcp::ServiceExt;
use rmcp::service::{RoleServer, RunningService, ServerInitializeError};
use serde_json::json;
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::mpsc;

/// Serves `handler` over this process's stdin and stdout.
pub async fn serve<S: rmcp::ServerHandler>(
    handler: S,
) -> Result<RunningService<RoleServer, S>, ServerInitializeError> {
    let (stdin, stdout) = rmcp::transport::stdio_pipes();
    serve_on(handler, stdin, stdout).await
}

/// Serves `handler` over any reader and writer (stdio, or a pipe in a test).
pub async fn serve_on<S, R, W>(
    handler: S,
    input: R,
    output: W,
) -> Result<RunningService<RoleServer, S>, ServerInitializeError>
where
    S: rmcp::ServerHandler,
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    // Lines for the real output, from rmcp and from the checks, in order.
    let (out_tx, out_rx) = mpsc::channel::<Vec<u8>>(64);
    let (to_rmcp, rmcp_in) = tokio::io::duplex(64 * 1024);
    let (rmcp_out, from_rmcp) = tokio::io::duplex(64 * 1024);
    tokio::spawn(write_lines(out_rx, output));
    tokio::spawn(relay_output(from_rmcp, out_tx.clone()));
    tokio::spawn(check_input(input, to_rmcp, out_tx));
    handler.serve((rmcp_in, rmcp_out)).await
}

/// Writes each line to the real output.
async fn write_lines<W: AsyncWrite + Unpin>(mut rx: mpsc::Receiver<Vec<u8>>, mut out: W) {
    while let Some(mut line) = rx.recv().await {
        line.push(b'\n');
        if out.write_all(&line).await.is_err() || out.flush().await.is_err() {
            return;
        }
    }
}

/// Passes rmcp's output on, line by line.
async fn relay_output<R: AsyncRead + Unpin>(from: R, tx: mpsc::Sender<Vec<u8>>) {
    let mut lines = BufReader::new(from);
    let mut buf = Vec::new();
    loop {
        buf.clear();
        match lines.read_until(b'\n', &mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(_) => {
                while buf.last().is_some_and(|b| *b == b'\n' || *b == b'\r') {
                    buf.pop();
                }
                if tx.send(buf.clone()).await.is_err() {
                    return;
                }
            }
        }
    }
}

/// Reads the client's lines, answers the bad ones, passes the good ones to rmcp.
/// When the client closes its end, rmcp's input closes too (and the session ends).
async fn check_input<R, W>(input: R, mut to_rmcp: W, out: mpsc::Sender<Vec<u8>>)
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let mut reader = BufReader::new(input);
    loop {
        let line = match read_line(&mut reader).await {
            Line::End => break,
            Line::TooLong => {
                let e = json!({"jsonrpc": "2.0", "id": null, "error": {
                    "code": INVALID_REQUEST,
                    "message": format!("the message is longer than {MAX_BODY} bytes; store large content \
                                        with resource_create in pieces, or put it in a document"),
                }});
                if out.send(e.to_string().into_bytes()).await.is_err() {
                    break;
                }
                continue;
            }
            Line::Text(l) => l,
        };
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        match jsonrpc::check_bytes(&line) {
            Ok(mut message) => {
                let mut l = if super::tasks::mark(&mut message) {
                    serde_json::to_vec(&message).unwrap_or(line)
                } else {
                    line
                };
                l.push(b'\n');
                if to_rmcp.write_all(&l).await.is_err() {
                    break;
                }
            }
            Err(r) if r.notification => {
                tracing::warn!("stdio: dropped a malformed notification: {}", r.message);
            }
            Err(r) => {
                if out
                    .send(r.to_json().to_string().into_bytes())
                    .await
                    .is_err()
                {
                    break;
                }
            }
        }
    }
    let _ = to_rmcp.shutdown().await;
}

pub enum Line {
    Text(Vec<u8>),
    TooLong,
    End,
}

/// One line without its newline, at most `MAX_BODY` bytes (a longer one is read
/// to its end and dropped, so the next line starts clean).
pub async fn read_line<R: AsyncRead + Unpin>(r: &mut BufReader<R>) -> Line {
    let mut line = Vec::new();
    let mut too_long = false;
    loop {
        let chunk = match r.fill_buf().await {
            Ok([]) | Err(_) => {
                return if line.is_empty() && !too_long {
                    Line::End
                } else if too_long {
                    Line::TooLong
                } else {
                    Line::Text(line)
                };
            }
            Ok(c) => c,
        };
        let (take, done) = match chunk.iter().position(|b| *b == b'\n') {
            Some(i) => (i + 1, true),
            None => (chunk.len(), false),
        };
        if !too_long {
            let body = &chunk[..if done { take - 1 } else { take }];
            if line.len() + body.len() > MAX_BODY {
                too_long = true;
                line = Vec::new();
            } else {
                line.extend_from_slice(body);
            }
        }
        r.consume(take);
        if done {
            if too_long {
                return Line::TooLong;
            }
            if line.last() == Some(&b'\r') {
                line.pop();
            }
            return Line::Text(line);
        }
    }
}
