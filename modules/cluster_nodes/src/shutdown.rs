//! Whether a cluster may be shut down for a given number of days: pure, no I/O.
//!
//! OpenShift's "Shutting down the cluster" (openshift/openshift-docs `modules/graceful-shutdown.adoc`):
//! before an extended shutdown, read when the kubelet CA expires — the `auth.openshift.io/certificate-not-after`
//! annotation of the `kube-apiserver-to-kubelet-signer` Secret in `openshift-kube-apiserver-operator` — and
//! restart the cluster on or before that date; after it, the kubelets' certificates can no longer be
//! recovered by approving CSRs. The annotation is written by openshift/library-go's certificate rotation
//! (`pkg/operator/certrotation/annotations.go`, `CertificateNotAfterAnnotation`, the certificate's
//! `NotAfter` as RFC 3339); the kube-apiserver-operator renews the signer at 292 of its 365 days
//! ("Node certificates", OpenShift security documentation).
//!
//! [`judge`] refuses a shutdown of `max_days` that would outlive the signer, and one it cannot judge
//! (no Secret, no annotation, an unreadable date): the caller decides whether an override applies.

use serde_json::{json, Value};

use crate::remediation::parse_time;

pub const SIGNER_NAMESPACE: &str = "openshift-kube-apiserver-operator";
pub const SIGNER_SECRET: &str = "kube-apiserver-to-kubelet-signer";
pub const NOT_AFTER: &str = "auth.openshift.io/certificate-not-after";
const DAY: i64 = 86_400;

/// Why a shutdown of the asked length is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    #[error("the Secret {SIGNER_NAMESPACE}/{SIGNER_SECRET} does not exist: when the kubelet CA expires cannot be told (not an OpenShift cluster?)")]
    NoSecret,
    #[error("the Secret {SIGNER_NAMESPACE}/{SIGNER_SECRET} has no {NOT_AFTER} annotation: when the kubelet CA expires cannot be told")]
    NoAnnotation,
    #[error("the {NOT_AFTER} annotation of {SIGNER_NAMESPACE}/{SIGNER_SECRET} is not a timestamp: {0:?}")]
    BadTime(String),
    #[error("the kubelet CA ({SIGNER_NAMESPACE}/{SIGNER_SECRET}) expires at {not_after}, {} from now, within the {max_days} days the cluster may stay down: restart it before then, or its kubelets' certificates cannot be recovered", days_text(*.seconds_left))]
    Expires {
        not_after: String,
        seconds_left: i64,
        max_days: u64,
    },
}

fn days_text(seconds: i64) -> String {
    if seconds <= 0 {
        return "already past".into();
    }
    let days = seconds / DAY;
    let hours = (seconds % DAY) / 3600;
    format!("{days} days {hours} h")
}

/// The judgement of one look at the signer Secret.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Judged {
    /// The annotation as written, when present.
    pub not_after: Option<String>,
    /// Whole days from `now` to `not_after` (negative once past).
    pub days_left: Option<i64>,
    /// The latest time (Unix seconds) the cluster should be started again: `not_after`.
    pub restart_by: Option<i64>,
    pub refusal: Option<Refusal>,
}

impl Judged {
    pub fn to_json(&self) -> Value {
        json!({
            "kubelet_signer_not_after": self.not_after,
            "days_left": self.days_left,
            "fits": self.refusal.is_none(),
            "refusal": self.refusal.as_ref().map(ToString::to_string),
        })
    }
}

/// Judge a shutdown of `max_days` days starting `now` (Unix seconds) against the signer Secret
/// (`None`: it does not exist). The cluster must be back before the CA expires: a shutdown that ends
/// exactly at `not_after` is refused too.
pub fn judge(secret: Option<&Value>, now: i64, max_days: u64) -> Judged {
    let refused = |r: Refusal, not_after: Option<String>| Judged {
        not_after,
        days_left: None,
        restart_by: None,
        refusal: Some(r),
    };
    let Some(secret) = secret else {
        return refused(Refusal::NoSecret, None);
    };
    let Some(text) = secret
        .pointer("/metadata/annotations")
        .and_then(|a| a.get(NOT_AFTER))
        .and_then(Value::as_str)
    else {
        return refused(Refusal::NoAnnotation, None);
    };
    let Ok(at) = parse_time(text.trim()) else {
        return refused(Refusal::BadTime(text.to_string()), Some(text.to_string()));
    };
    let seconds_left = at - now;
    let wanted = i64::try_from(max_days)
        .unwrap_or(i64::MAX / DAY)
        .saturating_mul(DAY);
    Judged {
        not_after: Some(text.to_string()),
        days_left: Some(seconds_left.div_euclid(DAY)),
        restart_by: Some(at),
        refusal: (seconds_left <= wanted).then(|| Refusal::Expires {
            not_after: text.to_string(),
            seconds_left,
            max_days,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: i64 = 1_800_000_000; // 2027-01-15T08:00:00Z

    fn secret(not_after: &str) -> Value {
        json!({"metadata": {"name": SIGNER_SECRET, "namespace": SIGNER_NAMESPACE,
            "annotations": {NOT_AFTER: not_after, "auth.openshift.io/certificate-issuer": "kube-apiserver-to-kubelet-signer"}}})
    }

    #[test]
    fn a_shutdown_ending_before_the_ca_expires_fits() {
        // 2027-03-01: 44 days and 16 h after NOW.
        let j = judge(Some(&secret("2027-03-01T00:00:00Z")), NOW, 30);
        assert_eq!(j.refusal, None);
        assert_eq!(j.days_left, Some(44));
        assert_eq!(j.not_after.as_deref(), Some("2027-03-01T00:00:00Z"));
        assert_eq!(j.to_json()["fits"], json!(true));
    }

    #[test]
    fn a_shutdown_outliving_the_ca_is_refused_naming_the_date() {
        let j = judge(Some(&secret("2027-03-01T00:00:00Z")), NOW, 45);
        let r = j.refusal.clone().expect("refused");
        assert!(matches!(r, Refusal::Expires { max_days: 45, .. }), "{r:?}");
        let text = r.to_string();
        assert!(
            text.contains("2027-03-01T00:00:00Z") && text.contains("44 days 16 h"),
            "{text}"
        );
        assert_eq!(j.to_json()["fits"], json!(false));
        // Exactly at the expiry is too late as well: the restart must come before it.
        let exact = NOW + 44 * DAY;
        let at = super::super::remediation::parse_time("2027-02-28T08:00:00Z").unwrap();
        assert_eq!(at, exact);
        assert!(judge(Some(&secret("2027-02-28T08:00:00Z")), NOW, 44)
            .refusal
            .is_some());
        assert!(judge(Some(&secret("2027-02-28T08:00:01Z")), NOW, 44)
            .refusal
            .is_none());
    }

    #[test]
    fn an_expired_ca_is_refused_even_for_no_days() {
        let j = judge(Some(&secret("2027-01-01T00:00:00Z")), NOW, 0);
        assert!(j.refusal.unwrap().to_string().contains("already past"));
        assert!(j.days_left.unwrap() < 0);
    }

    #[test]
    fn what_cannot_be_judged_is_refused() {
        assert_eq!(judge(None, NOW, 1).refusal, Some(Refusal::NoSecret));
        let bare = json!({"metadata": {"name": SIGNER_SECRET}});
        assert_eq!(
            judge(Some(&bare), NOW, 1).refusal,
            Some(Refusal::NoAnnotation)
        );
        let bad = judge(Some(&secret("next year")), NOW, 1);
        assert_eq!(bad.refusal, Some(Refusal::BadTime("next year".into())));
        assert_eq!(bad.not_after.as_deref(), Some("next year"));
    }
}
