//! The simulator's own control API under `/_pvesim` (a prefix Proxmox does not use).
//!
//! | Method | Path | Body / query | Effect |
//! |---|---|---|---|
//! | GET | `/_pvesim/health` | | `{"ok":true}` |
//! | GET | `/_pvesim/requests` | `?since=SEQ` | recorded requests (secrets redacted) |
//! | DELETE | `/_pvesim/requests` | | clear the request log |
//! | GET | `/_pvesim/state` | | current state in seed format |
//! | GET | `/_pvesim/tasks` | | every task's status |
//! | GET/POST/DELETE | `/_pvesim/faults` | a `Fault` or a list | list / inject / clear armed faults |
//! | GET/PUT | `/_pvesim/options` | partial `Options` JSON | read / change behaviour switches |
//! | POST | `/_pvesim/clock/advance` | `{"seconds": N}` | move simulated time forward |

use bytes::Bytes;
use http_body_util::Full;
use hyper::Response;
use serde_json::{json, Value};

use crate::faults::Fault;
use crate::server::{json_response, Shared};
use crate::sim::Options;

fn bad(msg: impl std::fmt::Display) -> Response<Full<Bytes>> {
    json_response(400, &json!({"error": msg.to_string()}))
}

/// A bad admin request body; the text is the `error` of the 400 answer.
#[derive(Debug, thiserror::Error)]
pub enum AdminError {
    #[error("invalid JSON: {0}")]
    Json(#[source] serde_json::Error),
    #[error("invalid fault: {0}")]
    Fault(#[source] serde_json::Error),
    #[error("options must be a JSON object")]
    NotObject,
    #[error("{0}")]
    Current(#[source] serde_json::Error),
    #[error("invalid options: {0}")]
    Options(#[source] serde_json::Error),
}

pub fn parse_faults(body: &[u8]) -> Result<Vec<Fault>, AdminError> {
    let v: Value = serde_json::from_slice(body).map_err(AdminError::Json)?;
    let list = match v {
        Value::Array(a) => a,
        other => vec![other],
    };
    list.into_iter()
        .map(|f| serde_json::from_value(f).map_err(AdminError::Fault))
        .collect()
}

/// Merges a partial options object over the current options.
pub fn merge_options(cur: &Options, patch: &[u8]) -> Result<Options, AdminError> {
    let patch: Value = serde_json::from_slice(patch).map_err(AdminError::Json)?;
    let mut base = serde_json::to_value(cur).map_err(AdminError::Current)?;
    let Value::Object(p) = patch else {
        return Err(AdminError::NotObject);
    };
    for (k, v) in p {
        base[k] = v;
    }
    serde_json::from_value(base).map_err(AdminError::Options)
}

pub fn handle(
    shared: &Shared,
    method: &str,
    path: &str,
    query: &str,
    body: &[u8],
) -> Response<Full<Bytes>> {
    let mut sim = shared.lock();
    sim.tick();
    match (method, path) {
        ("GET", "/health") => json_response(200, &json!({"ok": true})),
        ("GET", "/requests") => {
            let since: u64 = form_urlencoded::parse(query.as_bytes())
                .find(|(k, _)| k == "since")
                .and_then(|(_, v)| v.parse().ok())
                .unwrap_or(0);
            let list: Vec<_> = sim.requests.iter().filter(|r| r.seq > since).collect();
            json_response(200, &json!(list))
        }
        ("DELETE", "/requests") => {
            sim.requests.clear();
            json_response(200, &json!({"ok": true}))
        }
        ("GET", "/state") => json_response(200, &json!(sim.dump())),
        ("GET", "/tasks") => {
            let list: Vec<Value> = sim.tasks.iter().map(|t| t.status_json()).collect();
            json_response(200, &json!(list))
        }
        ("GET", "/faults") => json_response(200, &json!(sim.faults.armed)),
        ("DELETE", "/faults") => {
            sim.faults.armed.clear();
            json_response(200, &json!({"ok": true}))
        }
        ("POST", "/faults") => match parse_faults(body) {
            Ok(list) => {
                for f in list {
                    if let Err(e) = sim.apply_fault(f) {
                        return bad(e);
                    }
                }
                json_response(200, &json!({"ok": true}))
            }
            Err(e) => bad(e),
        },
        ("GET", "/options") => json_response(200, &json!(sim.opts)),
        ("PUT", "/options") => match merge_options(&sim.opts, body) {
            Ok(o) => {
                sim.opts = o;
                json_response(200, &json!(sim.opts))
            }
            Err(e) => bad(e),
        },
        ("POST", "/clock/advance") => {
            let secs = serde_json::from_slice::<Value>(body)
                .ok()
                .and_then(|v| v.get("seconds").and_then(Value::as_f64));
            match secs {
                Some(s) if s >= 0.0 => {
                    sim.advance(std::time::Duration::from_secs_f64(s));
                    json_response(200, &json!({"ok": true}))
                }
                _ => bad("body must be {\"seconds\": <non-negative number>}"),
            }
        }
        _ => json_response(
            404,
            &json!({"error": format!("no admin route {method} /_pvesim{path}")}),
        ),
    }
}
