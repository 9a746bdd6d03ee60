//! Where the cluster's address may come from. `api_url` falls back to `K8S_AUTH_HOST`, as
//! kubernetes.core's `host` does, but that variable belongs to whoever set the environment — under
//! AWX the "OpenShift or Kubernetes API Bearer Token" credential of the job, usually the ACM hub.
//! A login that brings its own credentials (a kubeconfig, a token, a user and password given to
//! the task) is a login to another cluster, so the environment's address is never used for it.
//! Pure: the options' provenance in, the decision out.

/// What to do with `api_url`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ApiUrl {
    /// Use `api_url` as it is (given by the task, or absent, or filled together with the rest of
    /// the connection from the same environment).
    AsGiven,
    /// `api_url` came from `K8S_AUTH_HOST` but the task gives its own kubeconfig, which names its
    /// server: drop the environment's address (with a warning).
    DropEnvHost,
    /// `api_url` came from `K8S_AUTH_HOST` but the task gives its own token or user and password:
    /// refuse rather than log in to the environment's cluster. Holds the credential options given.
    Refuse(Vec<&'static str>),
}

/// `from_env`: the options the environment filled; `given`: the credential options that have a
/// value (`kubeconfig`, `api_key`, `username`, `password`), from the task or the environment.
pub fn api_url_source(from_env: &[String], given: &[&'static str]) -> ApiUrl {
    let by_env = |o: &str| from_env.iter().any(|e| e == o);
    if !by_env("api_url") {
        return ApiUrl::AsGiven;
    }
    let by_task: Vec<&'static str> = given.iter().copied().filter(|o| !by_env(o)).collect();
    if by_task.contains(&"kubeconfig") {
        ApiUrl::DropEnvHost
    } else if by_task.is_empty() {
        ApiUrl::AsGiven
    } else {
        ApiUrl::Refuse(by_task)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(names: &[&str]) -> Vec<String> {
        names.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn the_environment_address_only_goes_with_the_environment_credentials() {
        // The task names the cluster: nothing to decide.
        assert_eq!(
            api_url_source(&env(&[]), &["username", "password"]),
            ApiUrl::AsGiven
        );
        // AWX's bearer-token credential alone: host and token from the same place.
        assert_eq!(
            api_url_source(&env(&["api_url", "api_key"]), &["api_key"]),
            ApiUrl::AsGiven
        );
        // A spoke's kubeadmin login under that credential: never the hub's address.
        assert_eq!(
            api_url_source(&env(&["api_url"]), &["username", "password"]),
            ApiUrl::Refuse(vec!["username", "password"])
        );
        assert_eq!(
            api_url_source(&env(&["api_url", "api_key"]), &["api_key", "username"]),
            ApiUrl::Refuse(vec!["username"])
        );
        // The spoke's kubeconfig names its own server.
        assert_eq!(
            api_url_source(&env(&["api_url", "api_key"]), &["kubeconfig", "api_key"]),
            ApiUrl::DropEnvHost
        );
    }
}
