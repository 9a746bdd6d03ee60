use super::*;

fn node(name: &str, role: &str, ready: &str) -> Value {
    json!({"metadata": {"name": name, "labels": {format!("node-role.kubernetes.io/{role}"): ""}},
           "status": {"conditions": [{"type": "Ready", "status": ready}]}})
}

#[test]
fn names_and_prefixes_are_checked() {
    for ok in ["etcd-20261207-101500", "pre-upgrade-4.19.8", "a"] {
        check_name(ok).unwrap();
    }
    for bad in ["", "-x", "a/b", "a..b", "über", &"x".repeat(64)] {
        assert_eq!(
            check_name(bad),
            Err(PlanError::Name(bad.to_string())),
            "{bad}"
        );
    }
    assert_eq!(
        check_prefix("/proxshift/etcd/lab/").unwrap(),
        "proxshift/etcd/lab"
    );
    for bad in ["", "/", "a//b", "a/../b", "./a"] {
        assert!(check_prefix(bad).is_err(), "{bad}");
    }
    assert_eq!(
        object_key("p/lab", "n1", Role::Snapshot),
        "p/lab/n1/snapshot.db"
    );
    assert_eq!(
        object_key("p/lab", "n1", Role::StaticResources),
        "p/lab/n1/static_kuberesources.tar.gz"
    );
}

#[test]
fn the_first_ready_control_plane_node_takes_the_backup() {
    let nodes = vec![
        node("w-0", "worker", "True"),
        node("m-1", "master", "True"),
        node("m-0", "master", "False"),
        node("m-2", "control-plane", "True"),
    ];
    assert_eq!(pick_node(&nodes, None).unwrap(), "m-1");
    assert_eq!(pick_node(&nodes, Some("m-2")).unwrap(), "m-2");
    let why = |n| pick_node(&nodes, Some(n)).unwrap_err().to_string();
    assert_eq!(why("m-0"), "node m-0: not Ready");
    assert!(
        why("w-0").contains("not a control-plane node"),
        "{}",
        why("w-0")
    );
    assert_eq!(why("gone"), "node gone: no such Node");
    let down = vec![
        node("m-0", "master", "False"),
        node("m-1", "master", "Unknown"),
    ];
    assert_eq!(
        pick_node(&down, None),
        Err(PlanError::NoReadyNode("m-0, m-1".into()))
    );
    assert_eq!(
        pick_node(&[node("w", "worker", "True")], None),
        Err(PlanError::NoControlPlane)
    );
}

#[test]
fn the_image_is_the_etcd_containers_own() {
    let pod = json!({"spec": {"containers": [{"name": "etcdctl", "image": "a"}, {"name": "etcd", "image": "quay.io/x@sha256:1"}]}});
    assert_eq!(etcd_image(&pod).as_deref(), Some("quay.io/x@sha256:1"));
    assert_eq!(etcd_image(&json!({"spec": {"containers": []}})), None);
}

fn plan() -> PodPlan<'static> {
    PodPlan {
        name: "etcd-1",
        namespace: "openshift-etcd",
        node: "m-1",
        image: "img",
        backup_dir: "/var/lib/proxshift/etcd-backup/",
        keep_on_node: false,
        deadline_secs: 900,
    }
}

#[test]
fn the_pod_is_a_node_debug_pod_and_the_urls_stay_in_the_secret() {
    let p = pod(&plan(), "proxshift-etcd-backup-abc");
    assert_eq!(p["spec"]["nodeName"], "m-1");
    assert_eq!(p["spec"]["hostPID"], true);
    assert_eq!(p["spec"]["restartPolicy"], "Never");
    assert_eq!(p["spec"]["activeDeadlineSeconds"], 900);
    assert_eq!(p["spec"]["volumes"][0]["hostPath"]["path"], "/");
    let c = &p["spec"]["containers"][0];
    assert_eq!(c["securityContext"]["privileged"], true);
    assert_eq!(c["volumeMounts"][0]["mountPath"], "/host");
    assert_eq!(
        c["envFrom"][0]["secretRef"]["name"],
        "proxshift-etcd-backup-abc"
    );
    assert_eq!(
        c["env"][0]["value"],
        "/var/lib/proxshift/etcd-backup/etcd-1"
    );
    assert_eq!(c["command"][4], NODE_SCRIPT);
    assert!(c["command"][2]
        .as_str()
        .unwrap()
        .contains("chroot /host /bin/bash -c \"$1\""));
    assert_eq!(p["metadata"]["labels"][BACKUP_LABEL], "etcd-1");
    assert!(!p.to_string().contains("X-Amz"));
    let s = url_secret(
        &plan(),
        &[(Role::Snapshot, "https://s/x?X-Amz-Signature=1".into())],
    );
    assert_eq!(
        s["stringData"]["SNAPSHOT_URL"],
        "https://s/x?X-Amz-Signature=1"
    );
    assert_eq!(s["metadata"]["labels"][MANAGED_BY.0], "proxshift");
}

#[test]
fn the_node_script_runs_the_documented_backup_and_uploads_both_files() {
    assert!(NODE_SCRIPT.contains("cluster-backup.sh \"$dir\""));
    assert!(NODE_SCRIPT.contains("--upload-file \"$f\" \"$url\""));
    for role in Role::ALL {
        assert!(NODE_SCRIPT.contains(role.as_str()) && NODE_SCRIPT.contains(role.url_env()));
    }
}

#[test]
fn the_pods_outcome_is_read_from_its_phase_and_termination_message() {
    let ended = |phase: &str, term: Value| json!({"status": {"phase": phase, "containerStatuses": [{"name": "backup", "state": {"terminated": term}}]}});
    assert_eq!(
        pod_state(&json!({})),
        PodState::Running("phase Pending".into())
    );
    assert_eq!(
        pod_state(&ended(
            "Succeeded",
            json!({"exitCode": 0, "message": "{\"files\":[]}"})
        )),
        PodState::Succeeded("{\"files\":[]}".into())
    );
    assert_eq!(
        pod_state(&ended(
            "Failed",
            json!({"exitCode": 1, "reason": "Error", "message": "etcdctl: context deadline exceeded\n"})
        )),
        PodState::Failed("exit code 1, Error: etcdctl: context deadline exceeded".into())
    );
    let deadline = json!({"status": {"phase": "Failed", "reason": "DeadlineExceeded", "message": "Pod was active on the node longer than the specified deadline"}});
    assert_eq!(
        pod_state(&deadline),
        PodState::Failed("no exit code, DeadlineExceeded: Pod was active on the node longer than the specified deadline".into())
    );
}

fn result_json(snapshot: &str, sha: &str) -> String {
    json!({"files": [
        {"role": "snapshot", "name": snapshot, "size": 10, "sha256": sha},
        {"role": "static_resources", "name": "static_kuberesources_2026-12-07_101500.tar.gz", "size": 5, "sha256": "b".repeat(64)},
    ]})
    .to_string()
}

#[test]
fn a_result_names_both_files_with_sizes_and_checksums() {
    let files = parse_result(
        &result_json("snapshot_2026-12-07_101500.db", &"A".repeat(64)),
        "p",
        "n",
    )
    .unwrap();
    assert_eq!(files[0].object, "p/n/snapshot.db");
    assert_eq!(files[0].sha256, "a".repeat(64));
    assert_eq!(files[1].role, "static_resources");
    for bad in [
        result_json("db.sqlite", &"a".repeat(64)),
        result_json("snapshot_1.db", "abc"),
        "{\"files\":[]}".to_string(),
        "nope".to_string(),
    ] {
        assert!(
            matches!(parse_result(&bad, "p", "n"), Err(PlanError::Result(_))),
            "{bad}"
        );
    }
}

#[test]
fn retention_keeps_the_newest_counting_the_new_one_and_stays_under_the_prefix() {
    let rec = recorded(&[
        json!({"name": "elsewhere", "files": [{"object": "old-prefix/elsewhere/snapshot.db"}]}),
        json!({"name": "a", "files": [{"object": "p/a/snapshot.db"}, {"object": "p/a/static_kuberesources.tar.gz"}]}),
        json!({"name": "b", "files": [{"object": "p/b/snapshot.db"}]}),
        json!({"name": "c", "files": [{"object": "p/c/snapshot.db"}]}),
        json!({"name": "mixed", "files": [{"object": "p/mixed/snapshot.db"}, {"object": "q/mixed/x"}]}),
    ])
    .unwrap();
    let names = |new, keep| {
        to_prune(&rec, new, keep, "p")
            .into_iter()
            .map(|r| r.name)
            .collect::<Vec<_>>()
    };
    assert_eq!(names("d", 0), Vec::<String>::new());
    assert_eq!(names("d", 2), vec!["a", "b"]);
    assert_eq!(names("d", 3), vec!["a"]);
    assert_eq!(names("d", 9), Vec::<String>::new());
    assert_eq!(to_prune(&rec, "d", 3, "p")[0].objects.len(), 2);
    // A name taken again replaces its entry: it is not counted twice.
    assert_eq!(names("c", 2), vec!["a"]);
    assert_eq!(
        recorded(&[json!({"files": []})]).unwrap_err(),
        "backups[0] has no name"
    );
}
