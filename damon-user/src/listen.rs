//! Where `serve` listens (used by the CLI to parse `--listen`, and by `serve` to bind): `--listen` as written (`127.0.0.1:9464`, `localhost:9464`,
//! `[::1]:9464`, `:9464`), resolved and bound with errors that say what to do.
use std::{
    fmt,
    io::ErrorKind,
    net::{SocketAddr, TcpListener, ToSocketAddrs as _},
    str::FromStr,
};

use anyhow::{Context as _, anyhow};

/// The port the docs, the example scrape config and the default use.
pub const DEFAULT_PORT: u16 = 9464;
/// `--listen`'s default: loopback only, so nothing is exposed unless asked for.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:9464";

/// A `--listen` value: a host (name or address; `None` for `:PORT`, every IPv4 interface as
/// Prometheus exporters read it) and a port.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listen {
    pub host: Option<String>,
    pub port: u16,
}

impl FromStr for Listen {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let (host, port) = s.rsplit_once(':').ok_or_else(|| {
            format!("`{s}` has no port: write HOST:PORT, e.g. 127.0.0.1:9464, or :9464 for every interface")
        })?;
        let port: u16 = port.parse().map_err(|_| {
            format!(
                "`{port}` is not a port (0-65535) in `{s}`: write HOST:PORT, e.g. 127.0.0.1:9464"
            )
        })?;
        let host = match host {
            "" => None,
            h if h.starts_with('[') => {
                let inner = h
                    .strip_prefix('[')
                    .and_then(|h| h.strip_suffix(']'))
                    .filter(|h| h.parse::<std::net::Ipv6Addr>().is_ok())
                    .ok_or_else(|| format!("`{h}` is not a bracketed IPv6 address, e.g. [::1]"))?;
                Some(inner.to_owned())
            }
            h if h.contains(':') => {
                return Err(format!(
                    "`{s}`: an IPv6 address needs brackets, e.g. [::1]:{port}"
                ));
            }
            h => Some(h.to_owned()),
        };
        Ok(Listen { host, port })
    }
}

impl fmt::Display for Listen {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.host {
            None => write!(f, ":{}", self.port),
            Some(h) if h.contains(':') => write!(f, "[{h}]:{}", self.port),
            Some(h) => write!(f, "{h}:{}", self.port),
        }
    }
}

impl Listen {
    /// The addresses to try, in the resolver's order (`localhost` may give 127.0.0.1 and ::1).
    pub fn resolve(&self) -> anyhow::Result<Vec<SocketAddr>> {
        let Some(host) = &self.host else {
            return Ok(vec![SocketAddr::from(([0, 0, 0, 0], self.port))]);
        };
        let addrs: Vec<SocketAddr> = (host.as_str(), self.port)
            .to_socket_addrs()
            .with_context(|| {
                format!(
                    "cannot resolve `{host}` (--listen {self}): give an address such as 127.0.0.1"
                )
            })?
            .collect();
        if addrs.is_empty() {
            anyhow::bail!("`{host}` resolves to no address (--listen {self})");
        }
        Ok(addrs)
    }

    /// Binds the first resolved address; the next one only when this machine lacks it (a
    /// `localhost` with ::1 but no IPv6). The error names the address and the remedy.
    pub fn bind(&self) -> anyhow::Result<TcpListener> {
        let mut last = None;
        for addr in self.resolve()? {
            match TcpListener::bind(addr) {
                Ok(l) => return Ok(l),
                Err(e) if e.kind() == ErrorKind::AddrNotAvailable => last = Some((addr, e)),
                Err(e) => {
                    last = Some((addr, e));
                    break;
                }
            }
        }
        let (addr, e) = last.expect("resolve gives at least one address");
        let other = Listen {
            host: self.host.clone(),
            port: self.port.checked_add(1).unwrap_or(DEFAULT_PORT),
        };
        Err(match e.kind() {
            ErrorKind::AddrInUse => anyhow!(
                "{addr} is already in use (another serve or exporter?): choose another port, \
                 e.g. --listen {other}"
            ),
            ErrorKind::PermissionDenied => anyhow!(
                "not allowed to listen on {addr}: ports below 1024 need root or \
                 CAP_NET_BIND_SERVICE; choose another port, e.g. --listen {other}"
            ),
            ErrorKind::AddrNotAvailable => anyhow!(
                "{addr} is not an address of this machine: listen on one of its own \
                 addresses, 127.0.0.1 (this machine only) or :{} (every interface)",
                self.port
            ),
            _ => anyhow!(e).context(format!("listening on {addr}")),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> Result<Listen, String> {
        s.parse()
    }

    #[test]
    fn forms_of_listen() {
        assert_eq!(p(DEFAULT_LISTEN), Ok(at(Some("127.0.0.1"), DEFAULT_PORT)));
        assert_eq!(p(":9464"), Ok(at(None, 9464)));
        assert_eq!(p("localhost:9464"), Ok(at(Some("localhost"), 9464)));
        assert_eq!(p("[::1]:80"), Ok(at(Some("::1"), 80)));
        assert_eq!(
            p("[::]:9464").map(|l| l.to_string()),
            Ok("[::]:9464".into())
        );
        assert_eq!(p(":9464").map(|l| l.to_string()), Ok(":9464".into()));
        for (bad, says) in [
            ("9464", "no port"),
            ("127.0.0.1", "no port"),
            ("127.0.0.1:99999", "not a port"),
            ("host:", "not a port"),
            ("::1:9464", "needs brackets"),
            ("[nope]:9464", "bracketed IPv6"),
        ] {
            let e = p(bad).expect_err(bad);
            assert!(e.contains(says), "{bad}: {e}");
        }
    }

    /// `serve` with no `--listen` listens on loopback port 9464.
    #[test]
    fn listen_has_a_loopback_default() {
        use clap::Parser as _;
        let cli = crate::cli::Cli::try_parse_from(["damon-trace", "serve"]).expect("parses");
        let crate::cli::Command::Serve(args) = cli.command else {
            panic!("not serve")
        };
        assert_eq!(args.listen, at(Some("127.0.0.1"), 9464));
        assert!(args.listen.resolve().unwrap()[0].ip().is_loopback());
    }

    fn at(host: Option<&str>, port: u16) -> Listen {
        Listen {
            host: host.map(Into::into),
            port,
        }
    }

    #[test]
    fn resolves_names_and_the_empty_host() {
        let any = p(":9464").unwrap().resolve().unwrap();
        assert_eq!(any, [SocketAddr::from(([0, 0, 0, 0], 9464))]);
        let local = p("localhost:9464").unwrap().resolve().unwrap();
        assert!(
            local
                .iter()
                .all(|a| a.ip().is_loopback() && a.port() == 9464),
            "{local:?}"
        );
        let e = p("no-such-host.invalid:9464")
            .unwrap()
            .resolve()
            .unwrap_err();
        assert!(
            format!("{e:#}").contains("cannot resolve `no-such-host.invalid`"),
            "{e:#}"
        );
    }

    #[test]
    fn a_taken_port_is_named_with_another_to_try() {
        let taken = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = taken.local_addr().unwrap().port();
        let e = p(&format!("localhost:{port}")).unwrap().bind().unwrap_err();
        let e = format!("{e:#}");
        assert!(e.contains(&format!(":{port} is already in use")), "{e}");
        assert!(
            e.contains(&format!("--listen localhost:{}", port + 1)),
            "{e}"
        );
        let free = p("127.0.0.1:0").unwrap().bind().unwrap();
        assert!(free.local_addr().unwrap().ip().is_loopback());
    }
}
