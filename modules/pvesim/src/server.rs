//! HTTP(S) front end: transport rules, authentication, validation, dispatch, envelopes.

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Full, LengthLimitError, Limited};
use hyper::body::Incoming;
use hyper::header::{HeaderMap, HeaderValue, CONTENT_LENGTH, CONTENT_TYPE, TRANSFER_ENCODING};
use hyper::{Request, Response, StatusCode};
use serde_json::{json, Map, Value};

use crate::auth::Principal;
use crate::error::{ErrorReply, ReplyResult};
use crate::handlers;
use crate::receive::Upload;
use crate::schema::{self, MethodDef, RouteMatch};
use crate::sim::{RequestRecord, Sim};

pub const API_PREFIX: &str = "/api2/json";
pub const ADMIN_PREFIX: &str = "/_pvesim";
/// pve-http-server's limit for non-upload bodies (and for an upload's form fields).
pub(crate) const MAX_BODY: usize = 512 * 1024;

pub struct Shared {
    pub sim: Mutex<Sim>,
    /// Where uploads are written while they arrive.
    pub spool: crate::spool::Spool,
}

impl Shared {
    pub fn lock(&self) -> MutexGuard<'_, Sim> {
        self.sim.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Everything a handler sees.
pub struct Ctx<'a> {
    pub sim: &'a mut Sim,
    pub who: Principal,
    pub params: BTreeMap<String, Value>,
    pub def: &'static MethodDef,
    pub headers: &'a HeaderMap,
    pub upload: Option<Upload>,
    /// When the request first arrived (for lock-wait timeouts across retries).
    pub arrived: Instant,
}

impl Ctx<'_> {
    pub fn str(&self, k: &str) -> String {
        self.params
            .get(k)
            .map(schema::value_str)
            .unwrap_or_default()
    }
    pub fn opt(&self, k: &str) -> Option<String> {
        self.params.get(k).map(schema::value_str)
    }
    pub fn flag(&self, k: &str) -> bool {
        self.opt(k).map(|v| v == "1").unwrap_or(false)
    }
    pub fn flag_or(&self, k: &str, default: bool) -> bool {
        self.opt(k).map(|v| v == "1").unwrap_or(default)
    }
    pub fn num(&self, k: &str) -> Option<u64> {
        self.opt(k).and_then(|v| v.parse().ok())
    }
    pub fn vmid(&self) -> u32 {
        self.num("vmid").unwrap_or(0) as u32
    }
    pub fn node(&self) -> String {
        self.str("node")
    }
}

/// Handler result: `data` plus optional extra top-level keys (`total`, `changes`).
pub struct Reply {
    pub data: Value,
    pub extra: Map<String, Value>,
}

impl From<Value> for Reply {
    fn from(data: Value) -> Reply {
        Reply {
            data,
            extra: Map::new(),
        }
    }
}

type Resp = Response<Full<Bytes>>;

fn respond(status: u16, reason: Option<&str>, body: Vec<u8>, ctype: &str) -> Resp {
    let mut r = Response::new(Full::new(Bytes::from(body)));
    *r.status_mut() = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    r.headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_str(ctype).unwrap());
    r.headers_mut()
        .insert("server", HeaderValue::from_static("pve-api-daemon/3.0"));
    if let Some(reason) = reason {
        // PVE puts the exception text in the reason phrase (first line only).
        let line: String = reason
            .lines()
            .next()
            .unwrap_or_default()
            .chars()
            .map(|c| {
                if c.is_ascii() && !c.is_ascii_control() {
                    c
                } else {
                    '?'
                }
            })
            .collect();
        if let Ok(rp) = hyper::ext::ReasonPhrase::try_from(line.into_bytes()) {
            r.extensions_mut().insert(rp);
        }
    }
    r
}

pub fn json_response(status: u16, v: &Value) -> Resp {
    respond(
        status,
        None,
        serde_json::to_vec(v).unwrap_or_default(),
        "application/json;charset=UTF-8",
    )
}

/// A method's permission check as the release played has it. The schema is PVE 9's; in PVE 8
/// every guest agent command needs `VM.Monitor` (qemu-server 8 `PVE/API2/Qemu/Agent.pm`,
/// `register_command`: `$perm //= 'VM.Monitor'`; PVE 9's `VM.GuestAgent.*` came with commit
/// b92a40ce "api: agent: use more specific guest agent privileges", see `auth::privileges`).
fn release_check(sim: &Sim, api_path: &str, check: &Value) -> Value {
    let agent = api_path.contains("/agent/") || api_path.ends_with("/agent");
    if agent && sim.version.generation() == crate::sim::Generation::Pve8 {
        return json!(["perm", "/vms/{vmid}", ["VM.Monitor"]]);
    }
    check.clone()
}

/// What a reverse proxy answers for a failed upstream: its own reason phrase and an HTML page
/// (nginx's form), no PVE JSON envelope.
fn proxy_page(status: u16) -> Resp {
    let reason = StatusCode::from_u16(status)
        .ok()
        .and_then(|s| s.canonical_reason())
        .unwrap_or("Bad Gateway");
    let body = format!(
        "<html>\r\n<head><title>{status} {reason}</title></head>\r\n<body>\r\n<center><h1>{status} {reason}</h1></center>\r\n<hr><center>nginx</center>\r\n</body>\r\n</html>\r\n"
    );
    let mut r = respond(status, None, body.into_bytes(), "text/html");
    r.headers_mut()
        .insert("server", HeaderValue::from_static("nginx"));
    r
}

fn error_response(e: &ErrorReply, with_message: bool) -> Resp {
    let mut body = json!({ "data": null });
    if with_message {
        let mut m = e.message.clone();
        if !m.ends_with('\n') {
            m.push('\n');
        }
        body["message"] = json!(m);
    }
    if let Some(errs) = &e.errors {
        body["errors"] = json!(errs);
    }
    respond(
        e.status,
        Some(&e.message),
        serde_json::to_vec(&body).unwrap_or_default(),
        "application/json;charset=UTF-8",
    )
}

fn parse_form(text: &str, into: &mut BTreeMap<String, Value>) {
    for (k, v) in form_urlencoded::parse(text.as_bytes()) {
        into.insert(k.into_owned(), Value::String(v.into_owned()));
    }
}

fn header<'a>(h: &'a HeaderMap, name: &str) -> Option<&'a str> {
    h.get(name).and_then(|v| v.to_str().ok())
}

/// Credentials from a request: the cookie wins over a token, like pve-http-server.
enum Creds {
    None,
    Ticket(String),
    Token(String),
}

fn credentials(h: &HeaderMap) -> Creds {
    let cookie_ticket = h.get_all("cookie").iter().find_map(|v| {
        v.to_str().ok()?.split(';').find_map(|c| {
            let (k, v) = c.trim().split_once('=')?;
            (k == "PVEAuthCookie").then(|| {
                percent_encoding::percent_decode_str(v)
                    .decode_utf8_lossy()
                    .to_string()
            })
        })
    });
    if let Some(t) = cookie_ticket {
        return Creds::Ticket(t);
    }
    if let Some(auth) = header(h, "authorization") {
        if let Some(t) = auth.trim().strip_prefix("PVEAuthCookie=") {
            return Creds::Ticket(t.to_string());
        }
        if let Some(pos) = auth.find("PVEAPIToken") {
            let rest = &auth[pos + "PVEAPIToken".len()..];
            let rest = rest.strip_prefix(['=', ' ']).unwrap_or(rest);
            let value = rest.split(';').next().unwrap_or_default();
            return Creds::Token(value.to_string());
        }
    }
    Creds::None
}

/// Entry point for every connection's requests.
pub async fn handle(shared: Arc<Shared>, req: Request<Incoming>) -> Result<Resp, Infallible> {
    let (parts, body) = req.into_parts();
    let method = parts.method.as_str().to_string();
    let path = parts.uri.path().to_string();
    let query = parts.uri.query().unwrap_or_default().to_string();

    let has_body = header(&parts.headers, CONTENT_LENGTH.as_str())
        .map(|l| l.trim() != "0")
        .unwrap_or(false)
        || parts.headers.contains_key(TRANSFER_ENCODING);
    let ctype = header(&parts.headers, CONTENT_TYPE.as_str())
        .unwrap_or_default()
        .to_string();
    let is_multipart = ctype.starts_with("multipart/form-data");
    let mut received = None;
    let bytes = if is_multipart
        && matches!(method.as_str(), "POST" | "PUT")
        && path.starts_with(API_PREFIX)
    {
        // An upload goes to a spool file while it arrives, never whole into memory.
        match crate::receive::receive(body, &ctype, &shared.spool).await {
            Ok(r) => received = Some(r),
            Err(e) => return Ok(error_response(&e, shared.lock().opts.error_message)),
        }
        Bytes::new()
    } else if path.starts_with(ADMIN_PREFIX) {
        match body.collect().await {
            Ok(b) => b.to_bytes(),
            Err(_) => return Ok(json_response(400, &json!({"data": null}))),
        }
    } else {
        match Limited::new(body, MAX_BODY).collect().await {
            Ok(b) => b.to_bytes(),
            Err(e) if e.downcast_ref::<LengthLimitError>().is_some() => {
                let e = ErrorReply::new(413, "request entity too large");
                return Ok(error_response(&e, shared.lock().opts.error_message));
            }
            Err(_) => return Ok(json_response(400, &json!({"data": null}))),
        }
    };

    if let Some(rest) = path.strip_prefix(ADMIN_PREFIX) {
        return Ok(crate::admin::handle(&shared, &method, rest, &query, &bytes));
    }

    let with_message = shared.lock().error_message_in_body();
    let Some(api_path) = path.strip_prefix(API_PREFIX) else {
        return Ok(error_response(
            &ErrorReply::not_implemented("no such uri"),
            with_message,
        ));
    };
    let api_path = if api_path.is_empty() { "/" } else { api_path }.to_string();
    if !matches!(method.as_str(), "GET" | "POST" | "PUT" | "DELETE") {
        let e = ErrorReply::not_implemented(format!("method '{method}' not available"));
        return Ok(error_response(&e, with_message));
    }
    if (method == "GET" || method == "DELETE") && has_body {
        let e = ErrorReply::not_implemented(format!("Unexpected content for method '{method}'"));
        record(&shared, &method, &api_path, BTreeMap::new(), None, 501);
        return Ok(error_response(&e, with_message));
    }

    // Parameters: body, then query merged over it.
    let mut params = BTreeMap::new();
    let mut upload = None;
    if method == "POST" || method == "PUT" {
        if ctype.starts_with("application/json") {
            match serde_json::from_slice::<Value>(&bytes) {
                Ok(Value::Object(m)) => params.extend(m),
                Ok(Value::Null) => {}
                _ => {
                    let e = ErrorReply::new(400, "JSON decoding error - body is not a JSON object");
                    return Ok(error_response(&e, with_message));
                }
            }
        } else if let Some(r) = received {
            params.extend(r.fields);
            upload = r.upload;
        } else {
            parse_form(&String::from_utf8_lossy(&bytes), &mut params);
        }
    }
    parse_form(&query, &mut params);

    let arrived = Instant::now();
    let mut lock_waits = 0;
    loop {
        let attempt = Attempt {
            method: &method,
            api_path: &api_path,
            headers: &parts.headers,
            arrived,
            lock_waits,
        };
        let outcome = process(&shared, &attempt, params.clone(), upload.clone());
        match outcome {
            Outcome::Retry(wait) => {
                lock_waits += 1;
                tokio::time::sleep(wait).await
            }
            Outcome::Done { resp, delay } => {
                if !delay.is_zero() {
                    tokio::time::sleep(delay).await;
                }
                return Ok(resp);
            }
        }
    }
}

enum Outcome {
    Retry(Duration),
    Done { resp: Resp, delay: Duration },
}

fn record(
    shared: &Shared,
    method: &str,
    path: &str,
    params: BTreeMap<String, Value>,
    user: Option<String>,
    status: u16,
) {
    let params = params
        .iter()
        .map(|(k, v)| (k.clone(), schema::value_str(v)))
        .collect();
    shared.lock().record(RequestRecord {
        seq: 0,
        method: method.to_string(),
        path: path.to_string(),
        params,
        user,
        status,
        delay_ms: 0,
        lock_waits: 0,
    });
}

/// What stays the same across a request's attempts.
struct Attempt<'a> {
    method: &'a str,
    api_path: &'a str,
    headers: &'a HeaderMap,
    /// When the request first arrived (for lock-wait timeouts across retries).
    arrived: Instant,
    /// Earlier attempts that waited for a config file lock.
    lock_waits: u32,
}

/// One attempt at a request under the state lock.
fn process(
    shared: &Shared,
    attempt: &Attempt,
    mut params: BTreeMap<String, Value>,
    upload: Option<Upload>,
) -> Outcome {
    let (method, api_path) = (attempt.method, attempt.api_path);
    let mut sim = shared.lock();
    sim.tick();
    let with_message = sim.error_message_in_body();
    let mut delay = Duration::from_millis(sim.faults.take_latency(api_path));
    let mut user = None;

    let gateway = sim.faults.take_proxy_error(method, api_path, false);
    let result = match gateway {
        // The proxy answers itself: PVE never sees the request.
        Some(_) => Ok(Reply::from(Value::Null)),
        None => run(&mut sim, attempt, &mut params, upload, &mut user),
    };
    sim.tick();

    if let Err(e) = &result {
        if let Some(until) = e.busy_until {
            let wait = until.saturating_duration_since(sim.now());
            return Outcome::Retry(wait.max(Duration::from_millis(1)));
        }
    }
    // PVE's answer (whatever it was) is lost between PVE and the proxy.
    let gateway = gateway.or_else(|| sim.faults.take_proxy_error(method, api_path, true));
    let status = match (&result, gateway) {
        (_, Some(g)) => g,
        (Ok(_), None) => 200,
        (Err(e), None) => e.status,
    };
    if status == 401 {
        delay += Duration::from_millis(sim.opts.auth_failure_delay_ms);
    }
    let params_for_log = params
        .iter()
        .map(|(k, v)| (k.clone(), schema::value_str(v)))
        .collect();
    sim.record(RequestRecord {
        seq: 0,
        method: method.to_string(),
        path: api_path.to_string(),
        params: params_for_log,
        user,
        status,
        delay_ms: delay.as_millis() as u64,
        lock_waits: attempt.lock_waits,
    });
    let resp = match result {
        _ if gateway.is_some() => proxy_page(status),
        Ok(reply) => {
            let mut body = Map::new();
            body.insert("data".into(), reply.data);
            body.extend(reply.extra);
            json_response(200, &Value::Object(body))
        }
        Err(e) => error_response(&e, with_message),
    };
    Outcome::Done { resp, delay }
}

/// Routes, authenticates, validates and dispatches one attempt.
fn run(
    sim: &mut Sim,
    attempt: &Attempt,
    params: &mut BTreeMap<String, Value>,
    upload: Option<Upload>,
    user: &mut Option<String>,
) -> ReplyResult<Reply> {
    let (method, api_path, headers, arrived) = (
        attempt.method,
        attempt.api_path,
        attempt.headers,
        attempt.arrived,
    );
    if let Some((status, msg)) = sim.faults.take_http_error(method, api_path) {
        return Err(ErrorReply::new(status, msg));
    }
    let (def, vars) = match schema::schema().find(method, api_path) {
        RouteMatch::Found(d, v) if handlers::rules_route_exists(sim.version, &d.path) => (d, v),
        RouteMatch::Found(..) => {
            return Err(ErrorReply::not_implemented(format!(
                "Method '{method} {api_path}' not implemented"
            )))
        }
        RouteMatch::NoMethod | RouteMatch::NoPath => {
            return Err(ErrorReply::not_implemented(format!(
                "Method '{method} {api_path}' not implemented"
            )))
        }
    };
    for (k, v) in vars {
        match params.get(&k) {
            Some(existing) if schema::value_str(existing) != v => {
                return Err(ErrorReply::param(
                    &k,
                    "duplicate parameter (already defined in URI) with conflicting values!",
                ))
            }
            _ => {
                params.insert(k, Value::String(v));
            }
        }
    }
    let world = def.permissions.get("user").and_then(Value::as_str) == Some("world");
    let who = authenticate(sim, def, headers, method, world)?;
    if !who.userid.is_empty() {
        *user = Some(who.auth_id());
    }
    if who.tokenid.is_some() && !def.allowtoken {
        return Err(ErrorReply::perm(format!(
            "URI '{api_path}' not available with API token, need proper ticket."
        )));
    }
    if let Err(errors) = schema::validate(def, params, sim.version) {
        return Err(ErrorReply::params(errors));
    }
    if def.proxyto_node {
        let node = params
            .get("node")
            .map(schema::value_str)
            .unwrap_or_default();
        match sim.nodes.get(&node) {
            None => {
                return Err(ErrorReply::die(format!(
                    "hostname lookup '{node}' failed - failed to get address info for: {node}: Name or service not known"
                )))
            }
            Some(n) if !n.online => {
                return Err(ErrorReply::new(
                    595,
                    "Errors during connection establishment, proxy handshake: No route to host",
                ))
            }
            _ => {}
        }
    }
    if method != "GET" && !world {
        sim.require_quorum()?;
    }
    if let Some(check) = def.permissions.get("check") {
        let flat: BTreeMap<String, String> = params
            .iter()
            .map(|(k, v)| (k.clone(), schema::value_str(v)))
            .collect();
        let check = release_check(sim, api_path, check);
        sim.access.eval_check(&who, &check, &flat)?;
    }
    let mut ctx = new_ctx(
        sim,
        def,
        params.clone(),
        headers,
        upload.clone(),
        arrived,
        who,
    );
    let reply = handlers::dispatch(&mut ctx);
    if method == "GET" && def.path == "/nodes/{node}/qemu/{vmid}/config" && reply.is_ok() {
        edit_after_read(sim, params);
    }
    reply
}

/// An armed `EditAfterRead` fault: another writer changes the config just read.
fn edit_after_read(sim: &mut Sim, params: &BTreeMap<String, Value>) {
    let Some(vmid) = params
        .get("vmid")
        .and_then(|v| schema::value_str(v).parse::<u32>().ok())
    else {
        return;
    };
    if let Some((key, value)) = sim.faults.take_edit_after_read(vmid) {
        if let Some(vm) = sim.vms.get_mut(&vmid) {
            vm.conf.insert(key, value);
        }
    }
}

/// Who sent the request: a ticket (cookie or header, CSRF-checked for writes) or a token;
/// anonymous on the world-open `/access/ticket`.
fn authenticate(
    sim: &Sim,
    def: &MethodDef,
    headers: &HeaderMap,
    method: &str,
    world: bool,
) -> ReplyResult<Principal> {
    let now = sim.unix_now();
    let anonymous = Principal {
        userid: String::new(),
        tokenid: None,
        via_ticket: false,
    };
    match credentials(headers) {
        // `/access/ticket` is open to the world; a stale cookie must not block a login.
        _ if world => Ok(anonymous),
        Creds::None => Err(ErrorReply::new(401, "No ticket")),
        Creds::Ticket(t) => {
            let Some((userid, ttime)) = sim.access.verify_ticket(&t, now) else {
                return Err(ErrorReply::new(401, "authentication failure"));
            };
            // Uploads skip CSRF (they check Datastore.AllocateTemplate instead).
            let is_upload = def.path.ends_with("/upload");
            if method != "GET" && !is_upload {
                let csrf = header(headers, "csrfpreventiontoken");
                if !sim.access.check_csrf(&userid, ttime, csrf) {
                    return Err(ErrorReply::new(
                        401,
                        "Permission denied - invalid csrf token",
                    ));
                }
            }
            Ok(Principal {
                userid,
                tokenid: None,
                via_ticket: true,
            })
        }
        Creds::Token(v) => match sim.access.verify_token(&v, now) {
            Some(p) => Ok(p),
            None => Err(ErrorReply::new(401, "Authentication failed!")),
        },
    }
}

fn new_ctx<'a>(
    sim: &'a mut Sim,
    def: &'static MethodDef,
    params: BTreeMap<String, Value>,
    headers: &'a HeaderMap,
    upload: Option<Upload>,
    arrived: Instant,
    who: Principal,
) -> Ctx<'a> {
    Ctx {
        sim,
        who,
        params,
        def,
        headers,
        upload,
        arrived,
    }
}

#[cfg(test)]
mod tests {
    use super::{credentials, error_response, Creds, ErrorReply, HeaderMap, HeaderValue};

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.append(*k, HeaderValue::from_str(v).unwrap());
        }
        h
    }

    #[test]
    fn cookie_wins_over_token() {
        let h = headers(&[
            ("authorization", "PVEAPIToken=root@pam!t=secret"),
            ("cookie", "other=1; PVEAuthCookie=PVE%3Aroot%40pam%3A1::sig"),
        ]);
        assert!(matches!(credentials(&h), Creds::Ticket(t) if t == "PVE:root@pam:1::sig"));
    }

    #[test]
    fn token_and_ticket_in_authorization_header() {
        let h = headers(&[("authorization", "PVEAPIToken=root@pam!t=a=b")]);
        assert!(matches!(credentials(&h), Creds::Token(t) if t == "root@pam!t=a=b"));
        let h = headers(&[("authorization", "PVEAPIToken root@pam!t=s")]);
        assert!(matches!(credentials(&h), Creds::Token(t) if t == "root@pam!t=s"));
        let h = headers(&[("authorization", "PVEAuthCookie=PVE:u@pve:1::x")]);
        assert!(matches!(credentials(&h), Creds::Ticket(t) if t == "PVE:u@pve:1::x"));
        assert!(matches!(credentials(&HeaderMap::new()), Creds::None));
    }

    #[test]
    fn reason_phrase_is_first_line_ascii() {
        let e = ErrorReply::die("first line\nsecond line");
        let r = error_response(&e, true);
        let rp = r.extensions().get::<hyper::ext::ReasonPhrase>().unwrap();
        assert_eq!(rp.as_bytes(), b"first line");
    }
}
