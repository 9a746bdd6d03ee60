//! The README's seed and fault examples are real: they parse and start a simulator.

use pvesim::{Config, Fault, Scenario, Seed, Simulator};

fn yaml_blocks(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur: Option<String> = None;
    for line in text.lines() {
        match (&mut cur, line.trim_start()) {
            (None, "```yaml") => cur = Some(String::new()),
            (Some(_), "```") => out.push(cur.take().unwrap()),
            (Some(b), _) => {
                b.push_str(line);
                b.push('\n');
            }
            _ => {}
        }
    }
    out
}

#[test]
fn readme_examples_are_valid() {
    let readme = include_str!("../README.md");
    let blocks = yaml_blocks(readme);
    assert_eq!(blocks.len(), 2, "seed example and fault list");
    let seed = Seed::from_yaml(&blocks[0]).expect("README seed parses");
    assert_eq!(seed.nodes[0].storages.len(), 3);
    let faults =
        Scenario::from_yaml(&format!("faults:\n{}", blocks[1])).expect("README faults parse");
    assert_eq!(faults.faults.len(), 10);
    assert!(matches!(faults.faults[0], Fault::FailTasks { .. }));
    // The seed example starts (fault targets refer to the lab, so use that for them).
    Simulator::start(Config::with_seed(seed))
        .expect("README seed starts")
        .shutdown();
    Simulator::start(Config {
        faults: faults.faults,
        ..Config::default()
    })
    .expect("README faults apply to the lab")
    .shutdown();
}

#[test]
fn help_scenario_example_is_valid() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_pvesim"))
        .arg("--help")
        .output()
        .unwrap();
    let help = String::from_utf8(out.stdout).unwrap();
    let start = help
        .find("    faults:")
        .expect("scenario example in --help");
    let block: String = help[start..]
        .lines()
        .take_while(|l| l.starts_with("    "))
        .map(|l| format!("{}\n", &l[4..]))
        .collect();
    let s = Scenario::from_yaml(&block).expect("--help scenario parses");
    assert_eq!(s.faults.len(), 7);
}
