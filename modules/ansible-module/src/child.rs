//! The environment of the child processes a module runs (`openshift-install`, `oc`, `nmstatectl`): built
//! from an allow-list, never inherited. A module's own process holds credentials in its environment
//! (AWX injects `VAULT_TOKEN`, `PROXMOX_TOKEN_SECRET`, `K8S_AUTH_API_KEY`, … for the modules' env
//! fallbacks); none of them reaches a tool, not even an installer extracted from a tag-addressed release
//! image. What a tool needs it gets as a file (a 0600 registry config, a kubeconfig) or a flag.
//!
//! Allowed: where programs and home are, the locale and time zone, the proxy variables (a tool must
//! reach its registry as the module does), the TLS trust variables Go's crypto/x509 reads, the cache the
//! agent installer keeps its base ISO in (`XDG_CACHE_HOME`), the installer's documented
//! `OPENSHIFT_INSTALL_*` overrides, and the test doubles' `PROXSHIFT_TEST_*` controls. A name that
//! looks like a credential is refused even under an allowed prefix.

use std::ffi::{OsStr, OsString};
use std::process::Command;

/// Variables passed on by name.
pub const ALLOWED: &[&str] = &[
    "PATH",
    "HOME",
    "USER",
    "LOGNAME",
    "TMPDIR",
    "TZ",
    "LANG",
    "LANGUAGE",
    "http_proxy",
    "HTTP_PROXY",
    "https_proxy",
    "HTTPS_PROXY",
    "no_proxy",
    "NO_PROXY",
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
    "XDG_CACHE_HOME",
];

/// Variables passed on by prefix (locale categories, the installer's overrides, the test doubles).
pub const ALLOWED_PREFIXES: &[&str] = &["LC_", "OPENSHIFT_INSTALL_", "PROXSHIFT_TEST_"];

/// Parts of a name that mark a credential: refused under a prefix (never in [`ALLOWED`]).
const CREDENTIAL_MARKS: &[&str] = &["SECRET", "TOKEN", "PASSWORD", "PASSWD", "KEY", "AUTH"];

/// Whether a child process may see the variable `name`.
pub fn allowed(name: &str) -> bool {
    if ALLOWED.contains(&name) {
        return true;
    }
    let upper = name.to_ascii_uppercase();
    ALLOWED_PREFIXES.iter().any(|p| name.starts_with(p))
        && !CREDENTIAL_MARKS.iter().any(|m| upper.contains(m))
}

/// The allowed part of an environment (pure: the caller passes the variables).
pub fn allowed_env<I>(vars: I) -> Vec<(OsString, OsString)>
where
    I: IntoIterator<Item = (OsString, OsString)>,
{
    vars.into_iter()
        .filter(|(k, _)| k.to_str().is_some_and(allowed))
        .collect()
}

/// A `Command` for `program` whose environment is the allowed part of this process's.
pub fn command(program: impl AsRef<OsStr>) -> Command {
    let mut cmd = Command::new(program);
    cmd.env_clear().envs(allowed_env(std::env::vars_os()));
    cmd
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pairs(names: &[&str]) -> Vec<(OsString, OsString)> {
        names
            .iter()
            .map(|n| (OsString::from(n), OsString::from("v")))
            .collect()
    }

    #[test]
    fn only_the_allow_list_passes() {
        let kept = [
            "PATH",
            "HOME",
            "LC_ALL",
            "https_proxy",
            "NO_PROXY",
            "OPENSHIFT_INSTALL_RELEASE_IMAGE_OVERRIDE",
            "PROXSHIFT_TEST_CLUSTER_ID",
        ];
        let refused = [
            "VAULT_TOKEN",
            "VAULT_ADDR",
            "PROXMOX_TOKEN_SECRET",
            "K8S_AUTH_API_KEY",
            "AWS_SECRET_ACCESS_KEY",
            "KUBECONFIG",
            "OPENSHIFT_INSTALL_PULL_SECRET",
            "PROXSHIFT_TEST_VAULT_TOKEN",
            "LD_PRELOAD",
        ];
        let names: Vec<String> = allowed_env(pairs(&[kept.as_slice(), &refused].concat()))
            .into_iter()
            .map(|(k, _)| k.into_string().unwrap())
            .collect();
        assert_eq!(names, kept);
    }

    /// The installer's async launch (role install_wait) and the commands the playbooks run themselves
    /// (`proxshift_child_script`: the preflight's resolver, `oc adm node-image`) cannot call this crate:
    /// their shell script applies the same allow-list. Each is run over the same names and must keep
    /// exactly the ones this list keeps.
    #[test]
    fn the_playbooks_scripts_keep_what_this_list_keeps() {
        let repo = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");
        for (file, key, exec) in [
            (
                "ansible_collections/proxshift/openshift/roles/install_wait/vars/main.yml",
                "install_wait_child_script: |",
                "exec \"$@\" >/dev/null 2>&1",
            ),
            (
                "playbooks/vars/connections.yml",
                "proxshift_child_script: |",
                "exec \"$@\"",
            ),
        ] {
            script_keeps_what_this_list_keeps(&format!("{repo}/{file}"), key, exec);
        }
    }

    fn script_keeps_what_this_list_keeps(vars: &str, key: &str, exec: &str) {
        let text = std::fs::read_to_string(vars).unwrap();
        let script: String = text
            .lines()
            .skip_while(|l| !l.starts_with(key))
            .skip(1)
            .take_while(|l| l.starts_with("  ") || l.is_empty())
            .map(|l| format!("{}\n", l.strip_prefix("  ").unwrap_or(l)))
            .collect();
        // Run the list, not the command: the script's last line runs "$@".
        assert!(script.ends_with(&format!("{exec}\n")), "{vars}: {script}");
        let script = script.replace(exec, "env");
        let names = [
            ALLOWED,
            &[
                "LC_ALL",
                "LC_CTYPE",
                "OPENSHIFT_INSTALL_RELEASE_IMAGE_OVERRIDE",
                "PROXSHIFT_TEST_CLUSTER_ID",
            ],
            &[
                "VAULT_TOKEN",
                "VAULT_ADDR",
                "PROXMOX_TOKEN_SECRET",
                "K8S_AUTH_API_KEY",
                "KUBECONFIG",
                // What AWX injects and a deny-list let through (#43).
                "ANSIBLE_HASHI_VAULT_SECRET_ID",
                "ANSIBLE_HASHI_VAULT_ROLE_ID",
                "AWS_SECRET_ACCESS_KEY",
                "AWS_ACCESS_KEY_ID",
            ],
            &[
                "OPENSHIFT_INSTALL_PULL_SECRET",
                "OPENSHIFT_INSTALL_AUTH_X",
                "PROXSHIFT_TEST_VAULT_TOKEN",
            ],
            &[
                "PROXSHIFT_TEST_PASSWD",
                "LC_KEY",
                "LD_LIBRARY_PATH",
                "SHELL",
                "PWD_X",
                "ssl_cert_file",
            ],
        ]
        .concat();
        let out = Command::new("/bin/sh")
            .arg("-c")
            .arg(&script)
            .env_clear()
            .envs(names.iter().map(|n| (n, "v")))
            .env(
                "PATH",
                std::env::var_os("PATH").unwrap_or_else(|| "/usr/bin:/bin".into()),
            )
            .output()
            .unwrap();
        let mut kept: Vec<String> = String::from_utf8(out.stdout)
            .unwrap()
            .lines()
            .filter_map(|l| l.split_once('=').map(|(k, _)| k.to_string()))
            .filter(|k| names.contains(&k.as_str()))
            .collect();
        kept.sort();
        let mut want: Vec<String> = names
            .iter()
            .filter(|n| allowed(n))
            .map(|n| n.to_string())
            .collect();
        want.sort();
        want.dedup();
        assert_eq!(kept, want, "{}", String::from_utf8_lossy(&out.stderr));
    }

    /// A real child: the parent holds Vault and Proxmox credentials, the child sees neither, and
    /// still finds its programs and home.
    #[test]
    fn a_child_never_sees_the_parents_credentials() {
        std::env::set_var("VAULT_TOKEN", "hvs.child-canary-1");
        std::env::set_var("PROXMOX_TOKEN_SECRET", "pve-child-canary-2");
        let out = command("/bin/sh")
            .args([
                "-c",
                "echo \"${VAULT_TOKEN-unset} ${PROXMOX_TOKEN_SECRET-unset}\"; env",
            ])
            .output()
            .unwrap();
        std::env::remove_var("VAULT_TOKEN");
        std::env::remove_var("PROXMOX_TOKEN_SECRET");
        let text = String::from_utf8(out.stdout).unwrap();
        assert!(text.starts_with("unset unset\n"), "{text}");
        assert!(!text.contains("child-canary"), "{text}");
        if std::env::var_os("PATH").is_some() {
            assert!(text.lines().any(|l| l.starts_with("PATH=")), "{text}");
        }
    }
}
