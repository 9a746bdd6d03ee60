//! The one HTTP layer shared by ProxShift's API clients (Proxmox, Kubernetes/OpenShift, Vault where it
//! speaks plain HTTP): building a blocking client with the user's TLS choices, retrying transient
//! failures with backoff, and waiting for a condition with a timeout that says what was still pending.
//!
//! Nothing here knows any particular API; the clients decide what is transient and what "ready" means.

mod trust;

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rustls::client::danger::ServerCertVerifier;

pub use reqwest;
use reqwest::blocking::Client;

/// How to trust the server and who we are to it.
#[derive(Debug, Clone, Default)]
pub struct Tls {
    /// `false` accepts any certificate (lab use; the modules warn about it).
    pub validate_certs: bool,
    /// A PEM file with one or more CA certificates to trust in addition to the OS store (which is then
    /// read only for a server these CAs do not vouch for).
    pub ca_path: Option<PathBuf>,
    /// The same, given inline (kubeconfig `certificate-authority-data`).
    pub ca_pem: Option<Vec<u8>>,
    /// Client certificate and key, PEM (kubeconfig `client-certificate(-data)`).
    pub identity_pem: Option<Vec<u8>>,
}

impl Tls {
    pub fn verified() -> Self {
        Tls {
            validate_certs: true,
            ..Default::default()
        }
    }
}

/// Settings for [`client`].
#[derive(Debug, Clone)]
pub struct ClientOptions {
    pub tls: Tls,
    /// Whole-request timeout (connect + send + read).
    pub timeout: Duration,
    pub connect_timeout: Duration,
    pub user_agent: String,
    /// Follow HTTP redirects (OAuth flows need to read the 302 themselves).
    pub follow_redirects: bool,
}

impl Default for ClientOptions {
    fn default() -> Self {
        ClientOptions {
            tls: Tls::verified(),
            timeout: Duration::from_secs(30),
            connect_timeout: Duration::from_secs(10),
            user_agent: concat!("proxshift/", env!("CARGO_PKG_VERSION")).into(),
            follow_redirects: true,
        }
    }
}

pub use trust::TrustError;

/// Why a client could not be built; each names the setting at fault.
#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    #[error("cannot use CA file {}: {source}", path.display())]
    CaFile {
        path: PathBuf,
        #[source]
        source: TrustError,
    },
    #[error("the CA certificate data is not valid PEM: {0}")]
    CaPem(#[source] TrustError),
    #[error("the client certificate or key is not valid PEM: {0}")]
    Identity(#[source] TrustError),
    #[error("the client certificate or key is not valid PEM: {0}")]
    IdentityRejected(#[source] rustls::Error),
    #[error("cannot set up the HTTP client: {0}")]
    Tls(#[source] rustls::Error),
    /// reqwest's own text hides the reason, so the message carries the whole chain.
    #[error("cannot set up the HTTP client: {}", describe(.0))]
    Client(#[source] reqwest::Error),
}

/// The same settings on reqwest's blocking and async builders (two types with the same methods).
macro_rules! build_with {
    ($builder:expr, $opts:expr) => {{
        let opts: &ClientOptions = $opts;
        let mut b = $builder
            .timeout(opts.timeout)
            .connect_timeout(opts.connect_timeout)
            .user_agent(opts.user_agent.clone())
            .use_preconfigured_tls(tls_config(&opts.tls)?);
        if !opts.follow_redirects {
            b = b.redirect(reqwest::redirect::Policy::none());
        }
        b.build().map_err(BuildError::Client)
    }};
}

/// A blocking client honouring `validate_certs`, extra CAs and an optional client identity.
pub fn client(opts: &ClientOptions) -> Result<Client, BuildError> {
    build_with!(Client::builder(), opts)
}

/// An async client with exactly [`client`]'s settings, for the one kind of request the blocking
/// client is slow at: a large streamed body. Its body pump hands the runtime 8 KiB at a time
/// (reqwest `blocking::body::send_future`), which caps an upload far below the link; an async body
/// sends the frames it is given. Drive it on a runtime of the caller's (`tokio` `rt`).
pub fn async_client(opts: &ClientOptions) -> Result<reqwest::Client, BuildError> {
    build_with!(reqwest::Client::builder(), opts)
}

/// rustls settings for [`Tls`]: named CAs first, the OS store on demand (see [`trust`]).
fn tls_config(tls: &Tls) -> Result<rustls::ClientConfig, BuildError> {
    let provider = trust::provider();
    let mut named = Vec::new();
    if let Some(path) = &tls.ca_path {
        let ca_file = |source| BuildError::CaFile {
            path: path.clone(),
            source,
        };
        let pem = std::fs::read(path).map_err(|e| ca_file(TrustError::File(e)))?;
        named.extend(trust::parse_pem_certs(&pem).map_err(ca_file)?);
    }
    if let Some(pem) = &tls.ca_pem {
        named.extend(trust::parse_pem_certs(pem).map_err(BuildError::CaPem)?);
    }
    let verifier: Arc<dyn ServerCertVerifier> = if tls.validate_certs {
        Arc::new(
            trust::ServerTrust::new(named, trust::load_platform_roots, provider.clone())
                .map_err(BuildError::CaPem)?,
        )
    } else {
        Arc::new(trust::ServerTrust::accept_any(provider.clone()))
    };
    let builder = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(BuildError::Tls)?
        .dangerous()
        .with_custom_certificate_verifier(verifier);
    let mut config = match &tls.identity_pem {
        Some(pem) => {
            let (certs, key) = trust::parse_identity(pem).map_err(BuildError::Identity)?;
            builder
                .with_client_auth_cert(certs, key)
                .map_err(BuildError::IdentityRejected)?
        }
        None => builder.with_no_client_auth(),
    };
    // The clients speak HTTP/1.1 only; say so, as reqwest does for its own TLS setup.
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(config)
}

/// An error with its whole cause chain on one line. reqwest's own text ("error sending request") hides
/// the reason a user can act on ("invalid peer certificate: UnknownIssuer", "Connection refused").
pub fn describe(e: &(dyn std::error::Error + 'static)) -> String {
    let mut out = e.to_string();
    let mut src = e.source();
    while let Some(s) = src {
        let text = s.to_string();
        if !out.contains(&text) {
            out.push_str(": ");
            out.push_str(&text);
        }
        src = s.source();
    }
    out
}

/// HTTP statuses worth retrying whatever the API: the server said "not now".
pub fn is_transient_status(status: u16) -> bool {
    matches!(status, 408 | 425 | 429 | 502 | 503 | 504)
}

/// A transport failure worth retrying: the request may never have reached the server. A certificate
/// the client rejects is a connect error too, but retrying cannot fix it, so it fails at once.
pub fn is_transient_transport(e: &reqwest::Error) -> bool {
    (e.is_connect() || e.is_timeout()) && !is_certificate_error(e)
}

/// The TLS handshake failed over the server's certificate (unknown issuer, wrong name, expired, none sent).
pub fn is_certificate_error(e: &(dyn std::error::Error + 'static)) -> bool {
    matches!(
        tls_cause(e),
        Some(rustls::Error::InvalidCertificate(_) | rustls::Error::NoCertificatesPresented)
    )
}

/// The rustls error behind a failed request, found by type along the cause chain. The TLS stream hands it
/// up wrapped in `io::Error`s (two, through hyper), whose `source()` skips the wrapped value, so the walk
/// goes into an `io::Error`'s inner error rather than to its source.
pub fn tls_cause<'a>(e: &'a (dyn std::error::Error + 'static)) -> Option<&'a rustls::Error> {
    let mut next = Some(e);
    while let Some(err) = next {
        if let Some(t) = err.downcast_ref::<rustls::Error>() {
            return Some(t);
        }
        next = match err
            .downcast_ref::<std::io::Error>()
            .and_then(std::io::Error::get_ref)
        {
            Some(inner) => Some(inner as &(dyn std::error::Error + 'static)),
            None => err.source(),
        };
    }
    None
}

/// Exponential backoff: `attempts` tries in all, sleeping `initial`, `initial*factor`, … capped at `max`.
#[derive(Debug, Clone)]
pub struct Backoff {
    pub attempts: u32,
    pub initial: Duration,
    pub max: Duration,
    pub factor: u32,
}

impl Default for Backoff {
    fn default() -> Self {
        Backoff {
            attempts: 4,
            initial: Duration::from_millis(500),
            max: Duration::from_secs(8),
            factor: 2,
        }
    }
}

impl Backoff {
    /// No retries at all (one attempt).
    pub fn none() -> Self {
        Backoff {
            attempts: 1,
            ..Default::default()
        }
    }

    /// The pause before try number `attempt` (1-based; the first try has none).
    pub fn delay(&self, attempt: u32) -> Duration {
        if attempt <= 1 {
            return Duration::ZERO;
        }
        let mult = self.factor.saturating_pow(attempt - 2);
        self.initial.saturating_mul(mult).min(self.max)
    }

    /// Run `op` until it succeeds, fails with an error `retryable` rejects, or the tries run out.
    /// `op` gets the 1-based attempt number.
    pub fn retry<T, E>(
        &self,
        mut op: impl FnMut(u32) -> Result<T, E>,
        retryable: impl Fn(&E) -> bool,
    ) -> Result<T, E> {
        let attempts = self.attempts.max(1);
        let mut attempt = 1;
        loop {
            match op(attempt) {
                Ok(v) => return Ok(v),
                Err(e) if attempt < attempts && retryable(&e) => {
                    attempt += 1;
                    std::thread::sleep(self.delay(attempt));
                }
                Err(e) => return Err(e),
            }
        }
    }
}

/// One look at a condition: done with a value, or still pending with a description of what is missing.
#[derive(Debug)]
pub enum Poll<T> {
    Ready(T),
    Pending(String),
}

/// Why [`wait_for`] stopped without the condition.
#[derive(Debug)]
pub enum WaitError<E> {
    /// Time ran out; `pending` is the last description of what was missing.
    Timeout { waited: Duration, pending: String },
    /// The probe itself failed in a way that waiting will not fix.
    Failed(E),
    /// The stop file of [`wait_for_or_stop`] appeared: `reason` is what it says.
    Stopped { waited: Duration, reason: String },
}

impl<E: fmt::Display> fmt::Display for WaitError<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WaitError::Timeout { waited, pending } => {
                write!(
                    f,
                    "timed out after {}s; still waiting for: {pending}",
                    waited.as_secs()
                )
            }
            WaitError::Failed(e) => write!(f, "{e}"),
            WaitError::Stopped { waited, reason } => {
                write!(f, "stopped after {}s: {reason}", waited.as_secs())
            }
        }
    }
}

impl<E: fmt::Debug + fmt::Display> std::error::Error for WaitError<E> {}

/// What the stop file says, once it exists (its text, or a note when it is empty or unreadable).
fn stop_reason(file: &Path) -> Option<String> {
    if !file.exists() {
        return None;
    }
    let text = std::fs::read_to_string(file).unwrap_or_default();
    let text = text.trim();
    Some(if text.is_empty() {
        format!("{} appeared", file.display())
    } else {
        text.to_string()
    })
}

/// Poll `probe` every `interval` until it is ready or `timeout` has passed. The probe runs at least
/// once, and once more right at the deadline, so a zero timeout still gives a real answer.
pub fn wait_for<T, E>(
    timeout: Duration,
    interval: Duration,
    probe: impl FnMut() -> Result<Poll<T>, E>,
) -> Result<T, WaitError<E>> {
    wait_for_or_stop(None, timeout, interval, probe)
}

/// [`wait_for`] that also ends, [`WaitError::Stopped`], once the file `stop` exists (checked after
/// each pending probe: a ready answer wins).
pub fn wait_for_or_stop<T, E>(
    stop: Option<&Path>,
    timeout: Duration,
    interval: Duration,
    mut probe: impl FnMut() -> Result<Poll<T>, E>,
) -> Result<T, WaitError<E>> {
    let start = Instant::now();
    loop {
        let pending = match probe().map_err(WaitError::Failed)? {
            Poll::Ready(v) => return Ok(v),
            Poll::Pending(what) => what,
        };
        let elapsed = start.elapsed();
        if let Some(reason) = stop.and_then(stop_reason) {
            return Err(WaitError::Stopped {
                waited: elapsed,
                reason: format!("{reason} (still waiting for: {pending})"),
            });
        }
        if elapsed >= timeout {
            return Err(WaitError::Timeout {
                waited: elapsed,
                pending,
            });
        }
        std::thread::sleep(interval.min(timeout - elapsed));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;

    #[test]
    fn a_stop_file_ends_a_pending_wait_and_says_why() {
        let dir = std::env::temp_dir().join(format!("proxshift-stop-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("lost");
        let polls = Cell::new(0);
        let r: Result<(), WaitError<()>> = wait_for_or_stop(
            Some(&file),
            Duration::from_secs(30),
            Duration::from_millis(1),
            || {
                polls.set(polls.get() + 1);
                if polls.get() == 3 {
                    std::fs::write(&file, "lease lost to run B\n").unwrap();
                }
                Ok(Poll::Pending("the upgrade".to_string()))
            },
        );
        match r {
            Err(WaitError::Stopped { reason, .. }) => {
                assert_eq!(
                    reason,
                    "lease lost to run B (still waiting for: the upgrade)"
                )
            }
            other => panic!("not stopped: {other:?}"),
        }
        assert_eq!(polls.get(), 3);
        // A ready probe wins over the stop file; without a stop file nothing stops.
        let ok: Result<u8, WaitError<()>> =
            wait_for_or_stop(Some(&file), Duration::ZERO, Duration::ZERO, || {
                Ok(Poll::Ready(7))
            });
        assert_eq!(ok.unwrap(), 7);
        std::fs::remove_dir_all(&dir).unwrap();
        let none: Result<(), WaitError<()>> = wait_for_or_stop(
            None,
            Duration::from_millis(5),
            Duration::from_millis(1),
            || Ok(Poll::Pending("x".to_string())),
        );
        assert!(matches!(none, Err(WaitError::Timeout { .. })));
    }

    #[test]
    fn backoff_delays_grow_and_cap() {
        let b = Backoff {
            attempts: 6,
            initial: Duration::from_millis(100),
            max: Duration::from_millis(350),
            factor: 2,
        };
        let d: Vec<u128> = (1..=5).map(|a| b.delay(a).as_millis()).collect();
        assert_eq!(d, vec![0, 100, 200, 350, 350]);
    }

    #[test]
    fn retry_stops_on_success_and_on_permanent_errors() {
        let b = Backoff {
            attempts: 5,
            initial: Duration::from_millis(1),
            max: Duration::from_millis(1),
            factor: 1,
        };
        let calls = Cell::new(0);
        let r: Result<u32, &str> = b.retry(
            |n| {
                calls.set(calls.get() + 1);
                if n < 3 {
                    Err("busy")
                } else {
                    Ok(n)
                }
            },
            |e| *e == "busy",
        );
        assert_eq!(r, Ok(3));
        assert_eq!(calls.get(), 3);

        calls.set(0);
        let r: Result<(), &str> = b.retry(
            |_| {
                calls.set(calls.get() + 1);
                Err("denied")
            },
            |e| *e == "busy",
        );
        assert_eq!(r, Err("denied"));
        assert_eq!(calls.get(), 1);

        calls.set(0);
        let r: Result<(), &str> = b.retry(
            |_| {
                calls.set(calls.get() + 1);
                Err("busy")
            },
            |_| true,
        );
        assert_eq!(r, Err("busy"));
        assert_eq!(calls.get(), 5);
    }

    #[test]
    fn wait_reports_what_is_pending() {
        let n = Cell::new(0);
        let r: Result<u32, WaitError<String>> =
            wait_for(Duration::from_secs(5), Duration::from_millis(1), || {
                n.set(n.get() + 1);
                Ok(if n.get() >= 3 {
                    Poll::Ready(n.get())
                } else {
                    Poll::Pending("vm 101".into())
                })
            });
        assert_eq!(r.unwrap(), 3);

        let r: Result<(), WaitError<String>> =
            wait_for(Duration::from_millis(20), Duration::from_millis(5), || {
                Ok(Poll::Pending("node-2 NotReady".into()))
            });
        let msg = r.unwrap_err().to_string();
        assert!(msg.contains("still waiting for: node-2 NotReady"), "{msg}");

        let r: Result<(), WaitError<String>> =
            wait_for(Duration::from_secs(5), Duration::from_millis(1), || {
                Err("403".into())
            });
        assert!(matches!(r, Err(WaitError::Failed(e)) if e == "403"));
    }

    #[test]
    fn zero_timeout_still_probes_once() {
        let r: Result<u8, WaitError<()>> = wait_for(Duration::ZERO, Duration::from_secs(1), || {
            Ok(Poll::Ready(1))
        });
        assert_eq!(r.unwrap(), 1);
    }

    #[test]
    fn missing_ca_file_names_the_path() {
        let opts = ClientOptions {
            tls: Tls {
                validate_certs: true,
                ca_path: Some("/nonexistent/ca.pem".into()),
                ..Default::default()
            },
            ..Default::default()
        };
        let e = client(&opts).unwrap_err().to_string();
        assert!(e.contains("/nonexistent/ca.pem"), "{e}");
    }

    #[test]
    fn garbage_ca_is_refused() {
        let opts = ClientOptions {
            tls: Tls {
                validate_certs: true,
                ca_pem: Some(b"not a pem".to_vec()),
                ..Default::default()
            },
            ..Default::default()
        };
        assert!(client(&opts).is_err());
    }

    #[test]
    fn a_certificate_error_is_found_by_type_inside_nested_io_errors() {
        let refused = rustls::Error::InvalidCertificate(rustls::CertificateError::UnknownIssuer);
        let inner = std::io::Error::new(std::io::ErrorKind::InvalidData, refused);
        let outer = std::io::Error::other(inner);
        assert!(is_certificate_error(&outer));
        let other = std::io::Error::other(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            rustls::Error::DecryptError,
        ));
        assert!(!is_certificate_error(&other));
        // Text alone is not a certificate error.
        assert!(!is_certificate_error(&std::io::Error::other(
            "invalid peer certificate: UnknownIssuer"
        )));
    }

    #[test]
    fn connection_refused_is_transient_and_described() {
        let c = client(&ClientOptions::default()).unwrap();
        // Port 9 on loopback: nothing listens there in the test environment.
        let e = c.get("http://127.0.0.1:9/").send().unwrap_err();
        assert!(is_transient_transport(&e));
        let text = describe(&e);
        assert!(text.to_lowercase().contains("refused"), "{text}");
    }
}
