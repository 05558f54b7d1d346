//! Just enough HTTP/1.1 to be scraped: one request per connection, GET or HEAD, answered and
//! closed. A crate (hyper, axum) would bring a server stack for one route; this is ~100
//! lines the tests read in full.
use std::time::Duration;

use tokio::{
    io::{AsyncReadExt as _, AsyncWriteExt as _},
    net::TcpStream,
};

use crate::export::openmetrics::Exposition;

/// Longest request head accepted (scrapers send a few hundred bytes).
const MAX_HEAD: usize = 8 * 1024;
/// A client that sends nothing for this long is dropped, so idle sockets cannot pile up.
const READ_TIMEOUT: Duration = Duration::from_secs(5);
/// The exposition an `Accept` header asks for: OpenMetrics when it accepts
/// `application/openmetrics-text` with q > 0 and with no lower q than it gives the text format
/// (`text/plain`, `text/*`, `*/*`); otherwise (no header, `*/*`, a q of 0) the 0.0.4 text
/// format, which every Prometheus reads. Prometheus 2.x sends
/// `application/openmetrics-text;version=1.0.0,…,text/plain;version=0.0.4;q=0.5,*/*;q=0.1`.
pub fn negotiate(accept: Option<&str>) -> Exposition {
    let (mut openmetrics, mut text) = (0.0f32, 0.0f32);
    for range in accept.unwrap_or("").split(',') {
        let mut parts = range.split(';').map(str::trim);
        let media = parts.next().unwrap_or("").to_ascii_lowercase();
        // A q that does not parse counts as 0: the range is then ignored, not preferred.
        let q = parts
            .filter_map(|p| p.split_once('='))
            .find(|(k, _)| k.trim().eq_ignore_ascii_case("q"))
            .map_or(1.0, |(_, v)| v.trim().parse::<f32>().unwrap_or(0.0));
        match media.as_str() {
            "application/openmetrics-text" => openmetrics = openmetrics.max(q),
            "text/plain" | "text/*" | "*/*" => text = text.max(q),
            _ => {}
        }
    }
    if openmetrics > 0.0 && openmetrics >= text {
        Exposition::OpenMetrics
    } else {
        Exposition::PrometheusText004
    }
}

/// The value of header `name` (case-insensitive) in a request head.
fn header<'a>(head: &'a str, name: &str) -> Option<&'a str> {
    head.lines().skip(1).find_map(|l| {
        let (k, v) = l.split_once(':')?;
        k.trim().eq_ignore_ascii_case(name).then(|| v.trim())
    })
}

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
/// `metrics` renders the exposition the Accept header asks for, only when /metrics is asked for.
pub fn respond(head: &[u8], metrics: impl FnOnce(Exposition) -> String) -> Vec<u8> {
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
        "/metrics" => {
            let e = negotiate(header(&text, "accept"));
            response("200 OK", e.content_type(), &metrics(e), head_only, "")
        }
        "/" => response(
            "200 OK",
            "text/plain; charset=utf-8",
            "damon-trace: metrics at /metrics\n",
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
    metrics: impl FnOnce(Exposition) -> String,
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

    const OPENMETRICS_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";
    const TEXT_004_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

    fn text(b: Vec<u8>) -> String {
        String::from_utf8(b).expect("utf-8")
    }

    #[test]
    fn routes_and_methods() {
        let ok = text(respond(
            b"GET /metrics HTTP/1.1\r\nHost: x\r\nACCEPT: application/openmetrics-text\r\n\r\n",
            |e| {
                assert_eq!(e, Exposition::OpenMetrics);
                "m 1\n# EOF\n".into()
            },
        ));
        assert!(ok.starts_with("HTTP/1.1 200 OK\r\n"), "{ok}");
        assert!(ok.contains(OPENMETRICS_TYPE) && ok.contains("Content-Length: 10\r\n"));
        assert!(ok.ends_with("\r\n\r\nm 1\n# EOF\n"), "{ok}");
        let q = text(respond(b"GET /metrics?x=1 HTTP/1.0\r\n\r\n", |_| {
            "b".into()
        }));
        assert!(q.starts_with("HTTP/1.1 200 OK") && q.ends_with("\r\n\r\nb"));
        assert!(
            q.contains(&format!("Content-Type: {TEXT_004_TYPE}\r\n")),
            "{q}"
        );
        let head = text(respond(b"HEAD /metrics HTTP/1.1\r\n\r\n", |_| {
            "body".into()
        }));
        assert!(head.contains("Content-Length: 4\r\n") && head.ends_with("\r\n\r\n"));
        let missing = text(respond(b"GET /nope HTTP/1.1\r\n\r\n", |_| unreachable!()));
        assert!(missing.starts_with("HTTP/1.1 404"));
        let post = text(respond(
            b"POST /metrics HTTP/1.1\r\n\r\n",
            |_| unreachable!(),
        ));
        assert!(post.starts_with("HTTP/1.1 405") && post.contains("Allow: GET, HEAD"));
        for bad in [&b"\r\n\r\n"[..], b"GET\r\n\r\n", b"GET / SPDY/3\r\n\r\n"] {
            assert!(text(respond(bad, |_| unreachable!())).starts_with("HTTP/1.1 400"));
        }
    }

    /// What Prometheus 2.x sends (scrape_protocols' default), its 3.x and a few others.
    #[test]
    fn accept_picks_the_exposition_by_q() {
        use Exposition::{OpenMetrics as Om, PrometheusText004 as Text};
        let prometheus_2 = "application/openmetrics-text;version=1.0.0,\
            application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,\
            */*;q=0.1";
        let prometheus_3 = "application/openmetrics-text;version=1.0.0;escaping=allow-utf-8;\
            q=0.5,application/openmetrics-text;version=0.0.1;q=0.4,text/plain;version=1.0.0;\
            escaping=allow-utf-8;q=0.3,text/plain;version=0.0.4;q=0.2,*/*;q=0.1";
        for (accept, want) in [
            (Some(prometheus_2), Om),
            (Some(prometheus_3), Om),
            (None, Text),
            (Some(""), Text),
            (Some("*/*"), Text),
            (Some("text/plain;version=0.0.4"), Text),
            (Some("Application/OpenMetrics-Text"), Om),
            (Some("application/openmetrics-text; q=0"), Text),
            (
                Some("application/openmetrics-text;q=0.4, text/plain;q=0.9"),
                Text,
            ),
            (
                Some("text/plain;q=0.5, application/openmetrics-text;q=0.5"),
                Om,
            ),
            (Some("application/openmetrics-text;q=junk"), Text),
        ] {
            assert_eq!(negotiate(accept), want, "{accept:?}");
        }
        let asked = |accept: &str| {
            let head = format!("GET /metrics HTTP/1.1\r\naccept:{accept}\r\n\r\n");
            text(respond(head.as_bytes(), |e| format!("{e:?}")))
        };
        let om = asked(prometheus_2);
        assert!(
            om.contains(&format!("Content-Type: {OPENMETRICS_TYPE}\r\n")),
            "{om}"
        );
        assert!(om.ends_with("\r\n\r\nOpenMetrics"), "{om}");
        let plain = asked("text/plain");
        assert!(
            plain.contains(&format!("Content-Type: {TEXT_004_TYPE}\r\n")),
            "{plain}"
        );
        assert!(plain.ends_with("\r\n\r\nPrometheusText004"), "{plain}");
    }
}
