//! "Make it so" for one object: create it when missing, update it in place when it lacks part of
//! the desired state, leave it alone otherwise — never delete and recreate. The decision is pure
//! ([`plan`]); [`Client::ensure`] carries it out (or only reports it in check mode).

use serde_json::Value;

use crate::client::{Client, PatchType};
use crate::error::KubeError;
use crate::objects::{contains, mask_secret, merge_patch, name_of, project, Resource};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    Created,
    Updated,
    Unchanged,
}

impl Action {
    pub fn as_str(self) -> &'static str {
        match self {
            Action::Created => "created",
            Action::Updated => "updated",
            Action::Unchanged => "unchanged",
        }
    }
    pub fn changed(self) -> bool {
        self != Action::Unchanged
    }
}

/// How an update is sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    /// JSON merge patch of the desired fragment (maps such as labels merge, nothing is removed).
    Merge,
    /// Server-side apply; `force` takes fields over from other managers.
    Apply { force: bool },
}

/// The outcome for one object; `before`/`after` cover only the fields the desired state names, with
/// Secret data masked, ready for a diff.
#[derive(Debug, Clone)]
pub struct Ensured {
    pub action: Action,
    pub description: String,
    pub before: Value,
    pub after: Value,
    /// The object as the server returned it (the current one when unchanged; `None` in check mode
    /// for a creation).
    pub object: Option<Value>,
}

/// Decide what to do and what the diff looks like.
pub fn plan(current: Option<&Value>, desired: &Value) -> (Action, Value, Value) {
    match current {
        None => (Action::Created, Value::Null, mask_secret(desired)),
        Some(cur) => {
            let before = project(cur, desired);
            if contains(cur, desired) {
                (
                    Action::Unchanged,
                    mask_secret(&before),
                    mask_secret(&before),
                )
            } else {
                let mut after = before.clone();
                merge_patch(&mut after, desired);
                (Action::Updated, mask_secret(&before), mask_secret(&after))
            }
        }
    }
}

impl Client {
    /// Ensure `desired` (which names its own `metadata.name`/`namespace`) exists as described.
    pub fn ensure(
        &self,
        r: &Resource,
        desired: &Value,
        method: Method,
        check_mode: bool,
    ) -> Result<Ensured, KubeError> {
        let (name, ns) = name_of(desired);
        let name = name.ok_or_else(|| KubeError::Unnamed {
            kind: r.kind.clone(),
        })?;
        let ns = if r.namespaced {
            ns.or_else(|| Some("default".into()))
        } else {
            None
        };
        let ns = ns.as_deref();
        let description = r.describe(ns, &name);
        let current = self
            .get(r, ns, &name)
            .map_err(|e| e.context(&description))?;
        let (action, before, after) = plan(current.as_ref(), desired);
        let object = if check_mode || action == Action::Unchanged {
            current
        } else {
            Some(
                match (action, method) {
                    (_, Method::Apply { force }) => self.apply(r, ns, &name, desired, force, false),
                    (Action::Created, Method::Merge) => self.create(r, ns, desired),
                    _ => self.patch(r, ns, &name, desired, PatchType::Merge),
                }
                .map_err(|e| e.context(&description))?,
            )
        };
        Ok(Ensured {
            action,
            description,
            before,
            after,
            object,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn plans() {
        let desired = json!({"metadata": {"name": "a", "labels": {"x": "1"}}, "spec": {"hubAcceptsClient": true}});
        let (a, before, after) = plan(None, &desired);
        assert_eq!(a, Action::Created);
        assert!(before.is_null());
        assert_eq!(after, desired);

        let cur = json!({"metadata": {"name": "a", "uid": "u", "labels": {"x": "1", "y": "2"}}, "spec": {"hubAcceptsClient": true, "leaseDurationSeconds": 60}});
        assert_eq!(plan(Some(&cur), &desired).0, Action::Unchanged);

        let desired2 = json!({"metadata": {"name": "a", "labels": {"x": "3"}}});
        let (a, before, after) = plan(Some(&cur), &desired2);
        assert_eq!(a, Action::Updated);
        // Only the fields we manage appear in the diff.
        assert_eq!(
            before,
            json!({"metadata": {"name": "a", "labels": {"x": "1"}}})
        );
        assert_eq!(
            after,
            json!({"metadata": {"name": "a", "labels": {"x": "3"}}})
        );
    }

    #[test]
    fn secret_diffs_are_masked() {
        let cur = json!({"kind": "Secret", "metadata": {"name": "s"}, "data": {"token": "b2xk"}});
        let desired =
            json!({"kind": "Secret", "metadata": {"name": "s"}, "data": {"token": "bmV3"}});
        let (a, before, after) = plan(Some(&cur), &desired);
        assert_eq!(a, Action::Updated);
        assert_eq!(before["data"]["token"], json!("<hidden>"));
        assert_eq!(after["data"]["token"], json!("<hidden>"));
    }
}
