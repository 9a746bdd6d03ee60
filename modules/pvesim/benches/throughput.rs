//! Throughput of simple authenticated requests (`cargo bench -p pvesim`).
//! Target: ≥ 1,000 requests/s so benchmarks measure the modules, not the simulator.

use std::time::{Duration, Instant};

fn token_header() -> String {
    format!("PVEAPIToken={}", pvesim::lab::ROOT_TOKEN)
}

fn run(label: &str, url: &str, threads: usize, per_thread: usize) -> f64 {
    let start = Instant::now();
    let handles: Vec<_> = (0..threads)
        .map(|_| {
            let url = url.to_string();
            let auth = token_header();
            std::thread::spawn(move || {
                let agent: ureq::Agent = ureq::Agent::config_builder()
                    .timeout_global(Some(Duration::from_secs(10)))
                    .build()
                    .into();
                for _ in 0..per_thread {
                    let mut r = agent
                        .get(&url)
                        .header("Authorization", auth.as_str())
                        .call()
                        .expect("request succeeds");
                    assert_eq!(r.status().as_u16(), 200);
                    let _ = r.body_mut().read_to_string();
                }
            })
        })
        .collect();
    for h in handles {
        h.join().expect("worker thread");
    }
    let total = threads * per_thread;
    let rate = total as f64 / start.elapsed().as_secs_f64();
    println!("{label:<40} {total:>6} requests, {threads} clients: {rate:>8.0} req/s");
    rate
}

fn main() {
    let sim = pvesim::Simulator::start(pvesim::Config::default()).expect("simulator starts");
    let api = sim.api_url();
    run("warm-up GET /version", &format!("{api}/version"), 1, 200);
    let a = run("GET /version", &format!("{api}/version"), 4, 1000);
    let b = run(
        "GET /nodes/pve1/qemu/100/status/current",
        &format!("{api}/nodes/pve1/qemu/100/status/current"),
        4,
        1000,
    );
    let c = run(
        "GET /cluster/resources",
        &format!("{api}/cluster/resources"),
        4,
        500,
    );
    let worst = a.min(b).min(c);
    println!("slowest: {worst:.0} req/s (target >= 1000)");
    sim.shutdown();
    if worst < 1000.0 {
        eprintln!("below target");
        std::process::exit(1);
    }
}
