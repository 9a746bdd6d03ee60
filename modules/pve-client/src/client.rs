//! The HTTP core: authentication (token, or ticket + CSRF with renewal), encoding, error mapping and
//! retries. Everything else in the crate is built on [`Client::call`].

use std::sync::Mutex;
use std::time::{Duration, Instant};

use proxshift_http::reqwest::blocking::{Client as Http, RequestBuilder, Response};
use proxshift_http::reqwest::Method;
use proxshift_http::{Backoff, ClientOptions, Tls};
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::connection::{Auth, ConnectionOptions};
use crate::error::{from_response, Error};

/// Form or query parameters, in order. Booleans are `1`/`0` (PVE rejects `true`), numbers digits.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Params(pub Vec<(String, String)>);

impl Params {
    pub fn new() -> Self {
        Params::default()
    }
    pub fn set(mut self, key: &str, value: impl ToString) -> Self {
        self.0.push((key.to_string(), value.to_string()));
        self
    }
    pub fn flag(self, key: &str, value: bool) -> Self {
        self.set(key, if value { "1" } else { "0" })
    }
    pub fn opt(self, key: &str, value: Option<impl ToString>) -> Self {
        match value {
            Some(v) => self.set(key, v),
            None => self,
        }
    }
    pub fn push(&mut self, key: &str, value: impl ToString) {
        self.0.push((key.to_string(), value.to_string()));
    }
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
    pub fn get(&self, key: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }
}

/// A ticket session; renewed well before the 2 h lifetime ends.
#[derive(Debug, Clone)]
struct Session {
    ticket: String,
    csrf: String,
    obtained: Instant,
}

/// PVE tickets live 2 h; renewing after 1 h leaves a long run an hour of margin.
const RENEW_AFTER: Duration = Duration::from_secs(60 * 60);

/// A Proxmox VE API client. Cheap to share between threads (`&Client` is `Sync`).
#[derive(Debug)]
pub struct Client {
    http: Http,
    /// What `http` was built with, for the async client of uploads (`upload.rs`).
    http_options: ClientOptions,
    base: String,
    auth: Auth,
    session: Mutex<Option<Session>>,
    renew_after: Duration,
    backoff: Backoff,
    poll_interval: Duration,
}

impl Client {
    /// Build a client and, for password auth, log in (so wrong credentials fail here, clearly).
    pub fn connect(opts: &ConnectionOptions) -> Result<Client, Error> {
        let client = Client::new(opts)?;
        if matches!(client.auth, Auth::Password { .. }) {
            client.login(None)?;
        }
        Ok(client)
    }

    /// Build a client without talking to the server.
    pub fn new(opts: &ConnectionOptions) -> Result<Client, Error> {
        let base = opts.base_url()?;
        let auth = opts.auth()?;
        let http_options = ClientOptions {
            tls: Tls {
                validate_certs: opts.validate_certs,
                ca_path: opts.ca_path.clone(),
                ..Default::default()
            },
            timeout: opts.timeout(),
            ..Default::default()
        };
        let http =
            proxshift_http::client(&http_options).map_err(|e| Error::invalid(e.to_string()))?;
        Ok(Client {
            http,
            http_options,
            base,
            auth,
            session: Mutex::new(None),
            renew_after: RENEW_AFTER,
            backoff: Backoff::default(),
            poll_interval: Duration::from_millis(500),
        })
    }

    /// Retries of transient failures (lock timeouts, 502/503/504, connection failures).
    pub fn with_backoff(mut self, backoff: Backoff) -> Self {
        self.backoff = backoff;
        self
    }

    /// How old a ticket may get before the next call renews it (default 1 h; tests shorten it).
    pub fn with_ticket_renewal_after(mut self, age: Duration) -> Self {
        self.renew_after = age;
        self
    }

    /// How often task and lock waits poll (default 0.5 s).
    pub fn with_poll_interval(mut self, interval: Duration) -> Self {
        self.poll_interval = interval;
        self
    }

    pub fn backoff(&self) -> &Backoff {
        &self.backoff
    }
    pub fn poll_interval(&self) -> Duration {
        self.poll_interval
    }
    pub fn base_url(&self) -> &str {
        &self.base
    }

    /// `GET path?query` → `data`.
    pub fn get(&self, path: &str, query: &Params) -> Result<Value, Error> {
        self.call(Method::GET, path, query, None)
    }

    /// `GET` decoded into `T`.
    pub fn get_as<T: DeserializeOwned>(&self, path: &str, query: &Params) -> Result<T, Error> {
        let v = self.get(path, query)?;
        serde_json::from_value(v)
            .map_err(|e| Error::invalid(format!("unexpected answer from GET {path}: {e}")))
    }

    /// `POST` with a form body → `data` (a UPID string for asynchronous operations).
    pub fn post(&self, path: &str, form: &Params) -> Result<Value, Error> {
        self.call(Method::POST, path, &Params::new(), Some(form))
    }

    /// A `POST` that must not reach Proxmox twice (a create or clone: the second would fail
    /// "already exists", and a caller taking the next vmid would make a second VM). Retried like
    /// any call, except after a gateway error ([`Error::is_gateway_error`]): the request may have
    /// taken effect behind the proxy, so the caller finds out (does the VM exist?) before
    /// sending it again.
    pub fn post_once(&self, path: &str, form: &Params) -> Result<Value, Error> {
        let retry = |e: &Error| e.is_transient() && !e.is_gateway_error();
        let body = self.call_retrying(Method::POST, path, &Params::new(), Some(form), retry)?;
        Ok(body.get("data").cloned().unwrap_or(Value::Null))
    }

    /// `PUT` with a form body → `data`.
    pub fn put(&self, path: &str, form: &Params) -> Result<Value, Error> {
        self.call(Method::PUT, path, &Params::new(), Some(form))
    }

    /// `DELETE`; its options travel in the query string (a body on DELETE is a 501 on PVE).
    pub fn delete(&self, path: &str, query: &Params) -> Result<Value, Error> {
        self.call(Method::DELETE, path, query, None)
    }

    /// One API call with retries of transient failures and one re-login on 401 with tickets.
    pub fn call(
        &self,
        method: Method,
        path: &str,
        query: &Params,
        form: Option<&Params>,
    ) -> Result<Value, Error> {
        let body = self.call_envelope(method, path, query, form)?;
        Ok(body.get("data").cloned().unwrap_or(Value::Null))
    }

    /// Like [`Client::call`] but returns the whole JSON envelope (`data`, `total`, …).
    pub fn call_envelope(
        &self,
        method: Method,
        path: &str,
        query: &Params,
        form: Option<&Params>,
    ) -> Result<Value, Error> {
        self.call_retrying(method, path, query, form, Error::is_transient)
    }

    /// One call, retried with backoff while `retry` says so, with one re-login on 401.
    fn call_retrying(
        &self,
        method: Method,
        path: &str,
        query: &Params,
        form: Option<&Params>,
        retry: impl Fn(&Error) -> bool,
    ) -> Result<Value, Error> {
        let mut relogged = false;
        loop {
            let r = self
                .backoff
                .retry(|_| self.call_once(&method, path, query, form), &retry);
            match r {
                // A ticket the server no longer accepts (expired, key rotated): log in again, once.
                Err(e)
                    if e.is_unauthorized()
                        && !relogged
                        && matches!(self.auth, Auth::Password { .. })
                        && self.has_session() =>
                {
                    relogged = true;
                    self.clear_session();
                    self.login(None)?;
                }
                other => return other,
            }
        }
    }

    fn has_session(&self) -> bool {
        self.session.lock().map(|s| s.is_some()).unwrap_or(false)
    }

    fn clear_session(&self) {
        if let Ok(mut s) = self.session.lock() {
            *s = None;
        }
    }

    fn call_once(
        &self,
        method: &Method,
        path: &str,
        query: &Params,
        form: Option<&Params>,
    ) -> Result<Value, Error> {
        let url = format!("{}/api2/json{path}", self.base);
        let mut rb = self.http.request(method.clone(), &url);
        if !query.is_empty() {
            rb = rb.query(&query.0);
        }
        if let Some(f) = form {
            rb = rb.form(&f.0);
        }
        rb = self.authorize(rb, method != Method::GET)?;
        let resp = rb.send().map_err(|e| transport_error(method, path, &e))?;
        read_response(method.as_str(), path, resp)
    }

    /// Add credentials; writes with a ticket also need the CSRF header.
    fn authorize(&self, mut rb: RequestBuilder, write: bool) -> Result<RequestBuilder, Error> {
        for (name, value) in self.auth_headers(write)? {
            rb = rb.header(name, value);
        }
        Ok(rb)
    }

    /// The headers that authenticate a request: the token, or the session's ticket (and, for a
    /// write, its CSRF token).
    pub(crate) fn auth_headers(&self, write: bool) -> Result<Vec<(&'static str, String)>, Error> {
        match &self.auth {
            Auth::Token { id, secret } => Ok(vec![(
                "Authorization",
                format!("PVEAPIToken={id}={secret}"),
            )]),
            Auth::Password { .. } => {
                let s = self.session()?;
                let mut h = vec![("Cookie", format!("PVEAuthCookie={}", s.ticket))];
                if write {
                    h.push(("CSRFPreventionToken", s.csrf));
                }
                Ok(h)
            }
        }
    }

    /// The current session, logging in or renewing as needed.
    fn session(&self) -> Result<Session, Error> {
        let current = self.session.lock().ok().and_then(|s| s.clone());
        match current {
            Some(s) if s.obtained.elapsed() < self.renew_after => Ok(s),
            Some(s) => {
                // Renew by presenting the old ticket as the password; fall back to a fresh login.
                self.login(Some(&s.ticket)).or_else(|_| self.login(None))
            }
            None => self.login(None),
        }
    }

    /// `POST /access/ticket`. 401s are never retried: PVE delays each by ~3 s on purpose.
    fn login(&self, renew_with: Option<&str>) -> Result<Session, Error> {
        let Auth::Password { user, password } = &self.auth else {
            return Err(Error::invalid("login needs api_user and api_password"));
        };
        let form = Params::new()
            .set("username", user)
            .set("password", renew_with.unwrap_or(password));
        let path = "/access/ticket";
        let url = format!("{}/api2/json{path}", self.base);
        let send = || {
            self.http
                .post(&url)
                .form(&form.0)
                .send()
                .map_err(|e| transport_error(&Method::POST, path, &e))
                .and_then(|r| read_response("POST", path, r))
        };
        let data = self
            .backoff
            .retry(|_| send(), Error::is_transient)
            .map_err(|e| match e {
                Error::Api(a) if a.status == 401 => Error::invalid(format!(
                    "Proxmox login as '{user}' failed: {} (check api_user and api_password)",
                    a.message
                )),
                other => other,
            })?;
        let data = data.get("data").cloned().unwrap_or(Value::Null);
        if data.get("NeedTFA").is_some() {
            return Err(Error::invalid(format!(
                "user '{user}' has two-factor authentication enabled: use an API token instead"
            )));
        }
        let field = |k: &str| {
            data.get(k)
                .and_then(Value::as_str)
                .map(str::to_string)
                .ok_or_else(|| Error::invalid(format!("Proxmox login answer has no '{k}'")))
        };
        let s = Session {
            ticket: field("ticket")?,
            csrf: field("CSRFPreventionToken")?,
            obtained: Instant::now(),
        };
        if let Ok(mut g) = self.session.lock() {
            *g = Some(s.clone());
        }
        Ok(s)
    }

    /// The ticket of a password session, so a module can mask it (`Module::add_secret`).
    /// Logged in as root@pam with its password: what qemu-server calls root (`$authuser eq
    /// 'root@pam'`). An API token is never root there, not even one of root@pam's.
    pub fn is_root_session(&self) -> bool {
        matches!(&self.auth, Auth::Password { user, .. } if user == "root@pam")
    }

    pub fn session_ticket(&self) -> Option<String> {
        self.session
            .lock()
            .ok()
            .and_then(|s| s.as_ref().map(|s| s.ticket.clone()))
    }

    pub(crate) fn http_options(&self) -> &ClientOptions {
        &self.http_options
    }
}

pub(crate) fn transport_error(
    method: &Method,
    path: &str,
    e: &proxshift_http::reqwest::Error,
) -> Error {
    // A write that timed out after sending may have happened; only connection failures are safe. A
    // refused certificate is a connect error too, but no retry can fix it.
    let certificate = proxshift_http::is_certificate_error(e);
    let transient = !certificate && (e.is_connect() || (*method == Method::GET && e.is_timeout()));
    Error::Transport {
        method: method.to_string(),
        path: path.to_string(),
        detail: proxshift_http::describe(e),
        transient,
        certificate,
    }
}

/// The reason phrase as sent (PVE puts its error text there), else the status's standard one.
pub(crate) fn reason_phrase(
    status: proxshift_http::reqwest::StatusCode,
    extensions: &hyper::http::Extensions,
) -> String {
    extensions
        .get::<hyper::ext::ReasonPhrase>()
        .map(|r| String::from_utf8_lossy(r.as_bytes()).into_owned())
        .unwrap_or_else(|| status.canonical_reason().unwrap_or("").to_string())
}

/// Turn a response into the JSON envelope or an [`Error`], reading PVE's text from the reason phrase.
pub(crate) fn read_response(method: &str, path: &str, resp: Response) -> Result<Value, Error> {
    let status = resp.status();
    let reason = reason_phrase(status, resp.extensions());
    let body = resp.text().map_err(|e| Error::Transport {
        method: method.to_string(),
        path: path.to_string(),
        detail: proxshift_http::describe(&e),
        transient: method == "GET",
        certificate: false,
    })?;
    envelope(method, path, (status.as_u16(), &reason), &body)
}

/// The JSON envelope of an answer, or the [`Error`] its status and PVE's text (`reason`) make.
pub(crate) fn envelope(
    method: &str,
    path: &str,
    (status, reason): (u16, &str),
    body: &str,
) -> Result<Value, Error> {
    if !(200..300).contains(&status) {
        return Err(from_response(method, path, status, reason, body));
    }
    if body.trim().is_empty() {
        return Ok(serde_json::json!({"data": null}));
    }
    serde_json::from_str(body).map_err(|e| {
        Error::invalid(format!(
            "{method} {path}: the answer is not JSON ({e}): {}",
            body.chars().take(200).collect::<String>()
        ))
    })
}
