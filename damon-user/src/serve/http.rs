//! Just enough HTTP/1.1 to be scraped: one request per connection, GET or HEAD, answered and
//! closed. A crate (hyper, axum) would bring a server stack for one route; this is ~100
//! lines the tests read in full.
use std::time::Duration;

use tokio::{
    io::{AsyncReadExt as _, AsyncWriteExt as _},
    net::TcpStream,
};

/// Longest request head accepted (scrapers send a few hundred bytes).
const MAX_HEAD: usize = 8 * 1024;
/// A client that sends nothing for this long is dropped, so idle sockets cannot pile up.
const READ_TIMEOUT: Duration = Duration::from_secs(5);
pub const OPENMETRICS_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

fn response(status: &str, content_type: &str, body: &str, head_only: bool, extra: &str) -> Vec<u8> {
    let mut out = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\n\
         Connection: close\r\n{extra}\r\n",
        body.len()
    )
    .into_bytes();
    if !head_only {
        out.extend_from_slice(body.as_bytes());
    }
    out
}

/// The whole response to a request head (bytes up to and including the blank line).
/// `metrics` renders the exposition only when it is asked for.
pub fn respond(head: &[u8], metrics: impl FnOnce() -> String) -> Vec<u8> {
    let text = String::from_utf8_lossy(head);
    let mut parts = text.lines().next().unwrap_or("").split_whitespace();
    let (Some(method), Some(target), Some(version)) = (parts.next(), parts.next(), parts.next())
    else {
        return response("400 Bad Request", "text/plain", "bad request\n", false, "");
    };
    if !version.starts_with("HTTP/1.") {
        return response(
            "400 Bad Request",
            "text/plain",
            "HTTP/1.x only\n",
            false,
            "",
        );
    }
    let head_only = method == "HEAD";
    if method != "GET" && !head_only {
        return response(
            "405 Method Not Allowed",
            "text/plain",
            "GET or HEAD\n",
            false,
            "Allow: GET, HEAD\r\n",
        );
    }
    // Scrapers may add a query string (`?name[]=…`); the exposition is always complete.
    match target.split('?').next().unwrap_or("") {
        "/metrics" => response("200 OK", OPENMETRICS_TYPE, &metrics(), head_only, ""),
        "/" => response(
            "200 OK",
            "text/plain; charset=utf-8",
            "damon-trace: OpenMetrics at /metrics\n",
            head_only,
            "",
        ),
        _ => response(
            "404 Not Found",
            "text/plain",
            "not found; try /metrics\n",
            head_only,
            "",
        ),
    }
}

/// Reads one request head, answers it and closes the connection.
pub async fn serve_connection(
    mut stream: TcpStream,
    metrics: impl FnOnce() -> String,
) -> std::io::Result<()> {
    let mut head = Vec::with_capacity(1024);
    let mut buf = [0u8; 1024];
    let complete = tokio::time::timeout(READ_TIMEOUT, async {
        loop {
            let n = stream.read(&mut buf).await?;
            if n == 0 {
                return Ok::<bool, std::io::Error>(false);
            }
            head.extend_from_slice(&buf[..n]);
            if head.windows(4).any(|w| w == b"\r\n\r\n") {
                return Ok(true);
            }
            if head.len() > MAX_HEAD {
                return Ok(false);
            }
        }
    })
    .await;
    let reply = match complete {
        Ok(Ok(true)) => respond(&head, metrics),
        Ok(Ok(false)) if head.len() > MAX_HEAD => response(
            "431 Request Header Fields Too Large",
            "text/plain",
            "request head too large\n",
            false,
            "",
        ),
        // Closed early or too slow: nobody to answer.
        Ok(Ok(false)) | Err(_) => return Ok(()),
        Ok(Err(e)) => return Err(e),
    };
    stream.write_all(&reply).await?;
    stream.shutdown().await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(b: Vec<u8>) -> String {
        String::from_utf8(b).expect("utf-8")
    }

    #[test]
    fn routes_and_methods() {
        let ok = text(respond(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n", || {
            "m 1\n# EOF\n".into()
        }));
        assert!(ok.starts_with("HTTP/1.1 200 OK\r\n"), "{ok}");
        assert!(ok.contains(OPENMETRICS_TYPE) && ok.contains("Content-Length: 10\r\n"));
        assert!(ok.ends_with("\r\n\r\nm 1\n# EOF\n"), "{ok}");
        let q = text(respond(b"GET /metrics?x=1 HTTP/1.0\r\n\r\n", || "b".into()));
        assert!(q.starts_with("HTTP/1.1 200 OK") && q.ends_with("\r\n\r\nb"));
        let head = text(respond(b"HEAD /metrics HTTP/1.1\r\n\r\n", || "body".into()));
        assert!(head.contains("Content-Length: 4\r\n") && head.ends_with("\r\n\r\n"));
        let missing = text(respond(b"GET /nope HTTP/1.1\r\n\r\n", || unreachable!()));
        assert!(missing.starts_with("HTTP/1.1 404"));
        let post = text(respond(
            b"POST /metrics HTTP/1.1\r\n\r\n",
            || unreachable!(),
        ));
        assert!(post.starts_with("HTTP/1.1 405") && post.contains("Allow: GET, HEAD"));
        for bad in [&b"\r\n\r\n"[..], b"GET\r\n\r\n", b"GET / SPDY/3\r\n\r\n"] {
            assert!(text(respond(bad, || unreachable!())).starts_with("HTTP/1.1 400"));
        }
    }
}
