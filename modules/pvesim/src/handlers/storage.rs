//! `/nodes/{node}/storage*`: listing, content and ISO upload.

use serde_json::{json, Value};
use sha2::Digest;

use crate::error::{ApiError, ApiResult};
use crate::server::Ctx;
use crate::sim::Spawn;
use crate::tasks::{base_duration, Action};
use crate::vmconfig::storage_formats;

pub fn list(ctx: &mut Ctx) -> ApiResult<Value> {
    let node = ctx.node();
    let content = ctx.opt("content");
    let only = ctx.opt("storage");
    let enabled = ctx.flag("enabled");
    let with_formats = ctx.flag("format");
    let sim = &*ctx.sim;
    let n = sim
        .nodes
        .get(&node)
        .ok_or_else(|| ApiError::die(format!("no such node '{node}'")))?;
    let mut out = Vec::new();
    for sid in &n.storages {
        let Some(st) = sim.storage(&node, sid) else {
            continue;
        };
        let path = format!("/storage/{sid}");
        if !sim.access.has(&ctx.who, &path, "Datastore.Audit")
            && !sim.access.has(&ctx.who, &path, "Datastore.AllocateSpace")
        {
            continue;
        }
        if only.as_deref().map(|o| o != sid).unwrap_or(false) || (enabled && !st.enabled) {
            continue;
        }
        if let Some(c) = &content {
            if !c.split(',').all(|c| st.content.contains(c)) {
                continue;
            }
        }
        let used = st.used();
        let mut o = json!({
            "storage": sid, "type": st.kind,
            "content": st.content.iter().cloned().collect::<Vec<_>>().join(","),
            "enabled": if st.enabled { 1 } else { 0 }, "active": if st.enabled { 1 } else { 0 },
            "shared": if st.shared { 1 } else { 0 },
            "total": st.total, "used": used, "avail": st.avail(),
            "used_fraction": if st.total > 0 { used as f64 / st.total as f64 } else { 0.0 },
        });
        if with_formats {
            let (def, sup) = storage_formats(&st.kind);
            o["formats"] = json!({"default": def, "supported": sup});
        }
        out.push(o);
    }
    Ok(Value::Array(out))
}

pub fn content(ctx: &mut Ctx) -> ApiResult<Value> {
    let node = ctx.node();
    let sid = ctx.str("storage");
    let content = ctx.opt("content");
    let vmid = ctx.num("vmid").map(|v| v as u32);
    let st = ctx
        .sim
        .storage(&node, &sid)
        .ok_or_else(|| ApiError::die(format!("storage '{sid}' does not exist")))?;
    if !st.enabled {
        return Err(ApiError::die(format!("storage '{sid}' is disabled")));
    }
    let list = st
        .volumes
        .values()
        .filter(|v| content.as_deref().map(|c| c == v.content).unwrap_or(true))
        .filter(|v| vmid.map(|id| v.vmid == Some(id)).unwrap_or(true))
        .map(|v| {
            let mut o = json!({"volid": format!("{sid}:{}", v.name), "format": v.format, "size": v.size,
                "ctime": v.ctime, "content": v.content});
            if let Some(id) = v.vmid {
                o["vmid"] = json!(id);
                o["used"] = json!(v.size);
            }
            if let Some(p) = &v.parent {
                o["parent"] = json!(p);
            }
            o
        })
        .collect();
    Ok(Value::Array(list))
}

pub fn upload(ctx: &mut Ctx) -> ApiResult<Value> {
    let node = ctx.node();
    let sid = ctx.str("storage");
    let content = ctx.str("content");
    if ctx.params.contains_key("tmpfilename") {
        return Err(ApiError::param("tmpfilename", "not allowed"));
    }
    let Some(file) = ctx.upload.clone() else {
        return Err(ApiError::param(
            "filename",
            "property is missing and it is not optional",
        ));
    };
    let st = ctx
        .sim
        .storage(&node, &sid)
        .ok_or_else(|| ApiError::die(format!("storage '{sid}' does not exist")))?;
    if !matches!(content.as_str(), "iso" | "vztmpl" | "import") {
        return Err(ApiError::param(
            "content",
            format!("upload content type '{content}' not allowed"),
        ));
    }
    if !st.is_file_based() {
        return Err(ApiError::die(format!(
            "can't upload to storage type '{}', not a file based storage!",
            st.kind
        )));
    }
    if !st.content.contains(&content) {
        return Err(ApiError::die(format!(
            "storage '{sid}' does not support '{content}' content"
        )));
    }
    let fname = file
        .filename
        .rsplit('/')
        .next()
        .unwrap_or_default()
        .to_string();
    let ext_ok = match content.as_str() {
        "iso" => fname.ends_with(".iso") || fname.ends_with(".img"),
        "vztmpl" => {
            fname.ends_with(".tar.gz") || fname.ends_with(".tar.xz") || fname.ends_with(".tar.zst")
        }
        _ => {
            fname.ends_with(".ova")
                || fname.ends_with(".qcow2")
                || fname.ends_with(".raw")
                || fname.ends_with(".vmdk")
                || fname.ends_with(".img")
        }
    };
    if !ext_ok {
        return Err(ApiError::param("filename", "wrong file extension"));
    }
    let checksum_error = match (ctx.opt("checksum"), ctx.opt("checksum-algorithm")) {
        (Some(want), Some(alg)) => {
            let got = match alg.as_str() {
                "sha1" => hex(&sha1::Sha1::digest(&file.data)),
                "sha224" => hex(&sha2::Sha224::digest(&file.data)),
                "sha256" => hex(&sha2::Sha256::digest(&file.data)),
                "sha384" => hex(&sha2::Sha384::digest(&file.data)),
                "sha512" => hex(&sha2::Sha512::digest(&file.data)),
                // md5 is not computed by the simulator: accept it as given.
                _ => want.to_lowercase(),
            };
            (got != want.to_lowercase())
                .then(|| format!("checksum mismatch: got '{got}' != expect '{want}'"))
        }
        (Some(_), None) => {
            return Err(ApiError::param(
                "checksum-algorithm",
                "parameter is required with 'checksum'",
            ))
        }
        _ => None,
    };
    let name = format!("{content}/{fname}");
    let size = file.data.len() as u64;
    let who = ctx.who.clone();
    // Larger files take longer (≈100 MiB/s before scaling).
    let secs = base_duration("imgcopy") + size as f64 / (100.0 * 1048576.0);
    let upid = ctx.sim.spawn(
        &who,
        Spawn {
            node: node.to_string(),
            kind: "imgcopy".to_string(),
            id: "".to_string(),
            action: Action::Upload {
                node: node.clone(),
                storage: sid,
                name,
                size,
                content,
                checksum_error,
            },
            base_secs: secs,
            flock: None,
        },
    );
    Ok(json!(upid))
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}
