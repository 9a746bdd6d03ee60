//! The pull secret, the SSH key and the trust bundle (and the FIPS note that goes with the key).

use crate::formats::{check_pem_bundle, check_pull_secret, check_ssh_key, normalize_pem_bundle};

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
        // Checked as rendered: trailing white space and blank lines are normalised away first.
        if let Err(e) = check_pem_bundle(&normalize_pem_bundle(b)) {
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

#[cfg(test)]
mod tests {
    use serde_json::json;

    use crate::formats::tests::TEST_CERT;
    use crate::formats::tests::TEST_SSH_KEY;
    use crate::plan::fixtures::*;

    #[test]
    fn rule_pull_secret() {
        fails(
            with(compact(), "pull_secret", json!("not json")),
            "pull_secret",
            "pull-secret-format",
        );
        fails(
            with(compact(), "pull_secret", json!({"auths": {}})),
            "pull_secret",
            "pull-secret-format",
        );
        fails(
            with(compact(), "pull_secret", json!({"registry": {}})),
            "pull_secret",
            "pull-secret-format",
        );
        // A dict is accepted and serialised (type json).
        ok_plan(&with(
            compact(),
            "pull_secret",
            json!({"auths": {"quay.io": {"auth": "eDp5"}}}),
        ));
    }

    #[test]
    fn rule_ssh_key() {
        fails(
            with(compact(), "ssh_key", json!("ssh-rsa AAAA")),
            "ssh_key",
            "ssh-key-format",
        );
        fails(
            with(
                with(compact(), "ssh_key", json!(TEST_SSH_KEY)),
                "fips",
                json!(true),
            ),
            "ssh_key",
            "ssh-key-format",
        );
    }

    #[test]
    fn rule_trust_bundle() {
        fails(
            with(
                compact(),
                "additional_trust_bundle",
                json!("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"),
            ),
            "additional_trust_bundle",
            "trust-bundle-pem",
        );
        ok_plan(&with(
            compact(),
            "additional_trust_bundle",
            json!(TEST_CERT),
        ));
        // validate.CABundle: "invalid block" for text after the last certificate.
        fails(
            with(
                compact(),
                "additional_trust_bundle",
                json!(format!("{TEST_CERT}# the lab CA\n")),
            ),
            "additional_trust_bundle",
            "trust-bundle-pem",
        );
    }

    /// A PEM file read with a trailing blank line (or white space) is rendered without it: the
    /// installer's validate.CABundle would refuse it, and the render never adds a newline.
    #[test]
    fn trust_bundle_is_rendered_normalised() {
        let given = format!("{}\n\n  \n", TEST_CERT.trim_end());
        let plan = ok_plan(&with(compact(), "additional_trust_bundle", json!(given)));
        let rendered = plan.additional_trust_bundle.as_deref().unwrap();
        assert_eq!(rendered, format!("{}\n", TEST_CERT.trim_end()));
        crate::formats::check_pem_bundle(rendered).unwrap();
        // The install-config holds exactly that text: a literal block that adds no newline.
        let (ic, _) = crate::render::render(&plan, None).unwrap();
        let doc: serde_yaml_ng::Value = serde_yaml_ng::from_str(&ic).unwrap();
        assert_eq!(doc["additionalTrustBundle"].as_str(), Some(rendered));
    }
}
