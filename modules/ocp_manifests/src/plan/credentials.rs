//! The pull secret, the SSH key and the trust bundle (and the FIPS note that goes with the key).

use crate::formats::{check_pem_bundle, check_pull_secret, check_ssh_key};

use super::context::{Ctx, Findings, Staged};

/// The pull secret's `auth` values, which must be masked like the secret itself.
pub(super) fn check(cx: &Ctx) -> Staged<Vec<String>> {
    let mut f = Findings::default();
    let o = cx.o;
    let mut secrets = Vec::new();
    match check_pull_secret(&o.pull_secret) {
        Ok(s) => secrets.extend(s),
        Err(e) => f.err(
            "pull_secret",
            "pull-secret-format",
            format!("the pull secret {e}"),
        ),
    }
    if o.fips {
        f.warn("fips: openshift-install must run on a host in FIPS mode (or with OPENSHIFT_INSTALL_SKIP_HOSTCRYPT_VALIDATION set)");
    }
    if o.ssh_key.is_none() {
        f.warn("no ssh_key: you will not be able to log in to the nodes to debug the install");
    }
    if let Some(k) = &o.ssh_key {
        if let Err(e) = check_ssh_key(k, o.fips) {
            f.err(
                "ssh_key",
                "ssh-key-format",
                format!("the SSH public key {e}"),
            );
        }
    }
    if let Some(b) = &o.additional_trust_bundle {
        if let Err(e) = check_pem_bundle(b) {
            f.err(
                "additional_trust_bundle",
                "trust-bundle-pem",
                format!("the trust bundle {e}"),
            );
        }
    } else if o.additional_trust_bundle_policy.is_some() {
        f.warn("additional_trust_bundle_policy is ignored without additional_trust_bundle");
    }
    f.with(secrets)
}
