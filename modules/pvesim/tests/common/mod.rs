//! Test helpers: an in-process simulator and a small ureq-based API caller.
#![allow(dead_code)]

use std::time::Duration;

use pvesim::{Config, Options, Seed, SimHandle, Simulator};
use serde_json::Value;

#[allow(unused_imports)]
pub use pvesim::lab::{CI_TOKEN, FULL_TOKEN, ROOT_PASSWORD, ROOT_TOKEN};

pub fn start() -> SimHandle {
    Simulator::start(Config::default()).expect("simulator starts")
}

pub fn start_with(opts: Options) -> SimHandle {
    Simulator::start(Config {
        options: opts,
        ..Config::default()
    })
    .expect("simulator starts")
}

pub fn start_seed(seed: Seed) -> SimHandle {
    Simulator::start(Config::with_seed(seed)).expect("simulator starts")
}

/// The lab seed playing PVE release `version` (e.g. `8.4.1`), as `--pve-version` does.
pub fn start_version(version: &str) -> SimHandle {
    let mut seed = Seed::lab();
    seed.cluster.version = version.into();
    start_seed(seed)
}

/// The raw answer to a hand-written request, to see PVE's reason phrase (HTTP clients hide it).
pub fn raw(sim: &SimHandle, request: &str) -> String {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(sim.addr()).unwrap();
    s.write_all(request.as_bytes()).unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    out
}

/// A PVE 8 and a PVE 9 release, for behaviours that must hold in both modes.
pub const BOTH_VERSIONS: [&str; 2] = ["8.4.1", "9.2.11"];

/// Options with realistic durations, for tests that move time with `advance`.
pub fn realtime() -> Options {
    Options {
        time_scale: 1.0,
        ..Options::default()
    }
}

#[derive(Clone)]
pub enum Auth {
    None,
    Token(String),
    Ticket {
        ticket: String,
        csrf: Option<String>,
    },
}

#[derive(Clone)]
pub struct Api {
    pub base: String,
    pub auth: Auth,
    agent: ureq::Agent,
}

#[derive(Debug)]
pub struct Resp {
    pub status: u16,
    pub body: Value,
}

impl Resp {
    pub fn data(&self) -> &Value {
        &self.body["data"]
    }
    pub fn message(&self) -> &str {
        self.body["message"].as_str().unwrap_or_default()
    }
    pub fn error(&self, field: &str) -> &str {
        self.body["errors"][field].as_str().unwrap_or_default()
    }
    #[track_caller]
    pub fn ok(&self) -> &Value {
        assert_eq!(self.status, 200, "unexpected answer: {:?}", self.body);
        &self.body["data"]
    }
    pub fn upid(&self) -> String {
        self.ok().as_str().expect("UPID string").to_string()
    }
}

pub fn agent() -> ureq::Agent {
    ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(Duration::from_secs(30)))
        .build()
        .into()
}

impl Api {
    pub fn new(sim: &SimHandle, auth: Auth) -> Api {
        Api {
            base: sim.api_url(),
            auth,
            agent: agent(),
        }
    }
    pub fn root(sim: &SimHandle) -> Api {
        Api::new(sim, Auth::Token(ROOT_TOKEN.into()))
    }
    pub fn token(sim: &SimHandle, token: &str) -> Api {
        Api::new(sim, Auth::Token(token.into()))
    }
    /// Logs in with a password; `None` if it fails.
    pub fn login(sim: &SimHandle, user: &str, password: &str) -> Option<Api> {
        let anon = Api::new(sim, Auth::None);
        let r = anon.post(
            "/access/ticket",
            &[("username", user), ("password", password)],
        );
        if r.status != 200 {
            return None;
        }
        let d = r.data();
        Some(Api::new(
            sim,
            Auth::Ticket {
                ticket: d["ticket"].as_str()?.to_string(),
                csrf: Some(d["CSRFPreventionToken"].as_str()?.to_string()),
            },
        ))
    }

    fn decorate<B>(&self, mut rb: ureq::RequestBuilder<B>, write: bool) -> ureq::RequestBuilder<B> {
        match &self.auth {
            Auth::None => {}
            Auth::Token(t) => rb = rb.header("Authorization", format!("PVEAPIToken={t}")),
            Auth::Ticket { ticket, csrf } => {
                rb = rb.header("Cookie", format!("PVEAuthCookie={ticket}"));
                if let (true, Some(c)) = (write, csrf) {
                    rb = rb.header("CSRFPreventionToken", c);
                }
            }
        }
        rb
    }

    fn finish(r: Result<ureq::http::Response<ureq::Body>, ureq::Error>) -> Resp {
        let mut r = r.expect("transport works");
        let status = r.status().as_u16();
        let text = r.body_mut().read_to_string().unwrap_or_default();
        let body = serde_json::from_str(&text).unwrap_or(Value::String(text));
        Resp { status, body }
    }

    pub fn get(&self, path: &str, query: &[(&str, &str)]) -> Resp {
        let mut rb = self.agent.get(format!("{}{path}", self.base));
        for (k, v) in query {
            rb = rb.query(*k, *v);
        }
        Self::finish(self.decorate(rb, false).call())
    }
    pub fn delete(&self, path: &str, query: &[(&str, &str)]) -> Resp {
        let mut rb = self.agent.delete(format!("{}{path}", self.base));
        for (k, v) in query {
            rb = rb.query(*k, *v);
        }
        Self::finish(self.decorate(rb, true).call())
    }
    pub fn post(&self, path: &str, form: &[(&str, &str)]) -> Resp {
        let rb = self.agent.post(format!("{}{path}", self.base));
        Self::finish(self.decorate(rb, true).send_form(form.iter().copied()))
    }
    pub fn put(&self, path: &str, form: &[(&str, &str)]) -> Resp {
        let rb = self.agent.put(format!("{}{path}", self.base));
        Self::finish(self.decorate(rb, true).send_form(form.iter().copied()))
    }
    pub fn post_json(&self, path: &str, body: &Value) -> Resp {
        let rb = self.agent.post(format!("{}{path}", self.base));
        Self::finish(self.decorate(rb, true).send_json(body))
    }

    /// Task status on the node encoded in the UPID.
    pub fn task(&self, upid: &str) -> Value {
        let node = upid.split(':').nth(1).unwrap();
        self.get(&format!("/nodes/{node}/tasks/{}/status", enc(upid)), &[])
            .ok()
            .clone()
    }
    /// Exit status of a finished task (panics if still running).
    #[track_caller]
    pub fn exit(&self, upid: &str) -> String {
        let t = self.task(upid);
        assert_eq!(t["status"], "stopped", "task still running: {t}");
        t["exitstatus"].as_str().unwrap().to_string()
    }
    pub fn task_log(&self, upid: &str) -> Vec<String> {
        let node = upid.split(':').nth(1).unwrap();
        self.get(&format!("/nodes/{node}/tasks/{}/log", enc(upid)), &[])
            .ok()
            .as_array()
            .unwrap()
            .iter()
            .map(|l| l["t"].as_str().unwrap().to_string())
            .collect()
    }
    pub fn config(&self, node: &str, vmid: u32) -> Value {
        self.get(&format!("/nodes/{node}/qemu/{vmid}/config"), &[])
            .ok()
            .clone()
    }
}

pub fn enc(s: &str) -> String {
    percent_encode(s)
}

fn percent_encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}
