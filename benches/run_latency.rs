//! Latency of `print(1)` through the warm pool, against the two ways of running it with
//! the Docker CLI: `docker exec` into a container that is already running, and
//! `docker run --rm`. Then throughput with 4 concurrent callers.
//!
//! Run through `benches/run-latency.sh` (it starts the engine and builds the offline
//! image first). Arguments: `[ITERATIONS]` (default 40); `--bench` from cargo is ignored.
//! The image is the one `tests/policies/local-image.yaml` names, so all paths run the
//! same interpreter.

use code_sandbox_mcp::analysis::{Language, SourceKind};
use code_sandbox_mcp::policy::Policy;
use code_sandbox_mcp::sandbox::{RunRequest, Sandbox};
use std::path::Path;
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

const CODE: &str = "print(1)";
const CONCURRENT_CALLERS: usize = 4;

fn main() {
    let iterations: usize = std::env::args()
        .skip(1)
        .find(|a| !a.starts_with("--"))
        .map(|a| a.parse().expect("ITERATIONS is a number"))
        .unwrap_or(40);
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let policy_path = root.join("tests/policies/local-image.yaml");
    let mut policy =
        Policy::discover(Some(policy_path.to_str().unwrap()), root).expect("the test policy");
    policy.pool.size = 2;
    policy.pool.max_concurrent = CONCURRENT_CALLERS;
    let image = policy.images.python[0].clone();
    let policy = Arc::new(policy);

    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    let load = load.split_whitespace().next().unwrap_or("?");
    println!(
        "print(1) in {image}, {iterations} iterations per path; {cores} cores, load average {load}"
    );
    println!(
        "{:<44} {:>8} {:>8} {:>8}",
        "path", "p50 ms", "p95 ms", "mean ms"
    );

    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let sandbox = Sandbox::new(policy.clone());
        sandbox.warm_up().await;
        // One run to settle the connection and the page cache.
        one_run(&sandbox).await;
        wait_for_pool(&sandbox, 2).await;

        // Warm: each call finds a ready container (the pool refills between calls,
        // outside the timing, as it does between an agent's calls).
        let mut warm = Vec::new();
        for _ in 0..iterations {
            wait_for_pool(&sandbox, 2).await;
            let started = Instant::now();
            one_run(&sandbox).await;
            warm.push(started.elapsed());
        }
        report("warm pool, Sandbox::run (refilled between)", &mut warm);

        // Back to back: calls come faster than the pool refills.
        let mut back_to_back = Vec::new();
        wait_for_pool(&sandbox, 2).await;
        for _ in 0..iterations {
            let started = Instant::now();
            one_run(&sandbox).await;
            back_to_back.push(started.elapsed());
        }
        report("warm pool, Sandbox::run (back to back)", &mut back_to_back);

        // Throughput: 4 callers, each doing its share back to back.
        wait_for_pool(&sandbox, 2).await;
        let total = iterations.max(CONCURRENT_CALLERS * 5);
        let started = Instant::now();
        let callers = (0..CONCURRENT_CALLERS).map(|_| {
            let sandbox = sandbox.clone();
            tokio::spawn(async move {
                for _ in 0..total / CONCURRENT_CALLERS {
                    one_run(&sandbox).await;
                }
            })
        });
        futures_util::future::join_all(callers).await;
        let elapsed = started.elapsed();
        let done = total / CONCURRENT_CALLERS * CONCURRENT_CALLERS;
        println!(
            "throughput, {CONCURRENT_CALLERS} concurrent callers: {done} runs in {:.2} s = {:.1} runs/s",
            elapsed.as_secs_f64(),
            done as f64 / elapsed.as_secs_f64()
        );
        sandbox.shutdown().await;
    });

    // The CLI baselines, with the same hardening flags the sandbox uses.
    let hardening = [
        "--network",
        "none",
        "--read-only",
        "--cap-drop",
        "ALL",
        "--security-opt",
        "no-new-privileges",
        "--user",
        "65534:65534",
        "--pids-limit",
        "128",
        "--memory",
        "512m",
        "--memory-swap",
        "512m",
        "--label",
        "code-sandbox-mcp=bench",
    ];
    let container = docker(
        &[
            &["run", "-d", "--rm"][..],
            &hardening,
            &[&image, "sleep", "infinity"],
        ]
        .concat(),
    );
    let container = container.trim().to_string();
    let mut exec = Vec::new();
    for _ in 0..iterations {
        let started = Instant::now();
        docker(&["exec", &container, "python3", "-u", "-c", CODE]);
        exec.push(started.elapsed());
    }
    report("docker exec (CLI) into a running container", &mut exec);

    let started = Instant::now();
    let per_caller = iterations.max(CONCURRENT_CALLERS * 5) / CONCURRENT_CALLERS;
    std::thread::scope(|scope| {
        for _ in 0..CONCURRENT_CALLERS {
            scope.spawn(|| {
                for _ in 0..per_caller {
                    docker(&["exec", &container, "python3", "-u", "-c", CODE]);
                }
            });
        }
    });
    let elapsed = started.elapsed();
    println!(
        "throughput, docker exec (CLI), {CONCURRENT_CALLERS} callers, one container: {:.1} runs/s",
        (per_caller * CONCURRENT_CALLERS) as f64 / elapsed.as_secs_f64()
    );
    docker(&["rm", "-f", &container]);

    let mut run = Vec::new();
    for _ in 0..iterations.min(20) {
        let started = Instant::now();
        docker(
            &[
                &["run", "--rm"][..],
                &hardening,
                &[&image, "python3", "-u", "-c", CODE],
            ]
            .concat(),
        );
        run.push(started.elapsed());
    }
    report("docker run --rm (CLI)", &mut run);
}

async fn one_run(sandbox: &Sandbox) {
    let outcome = sandbox
        .run(
            RunRequest {
                kind: SourceKind::Python,
                code: CODE.into(),
                timeout: None,
                env: Vec::new(),
                tap: None,
                files: Vec::new(),
                approved: Vec::new(),
                packages: Vec::new(),
            },
            CancellationToken::new(),
        )
        .await
        .expect("the run happens");
    assert_eq!(outcome.stdout, "1\n", "{outcome:?}");
}

/// Waits (bounded) until `size` containers are ready.
async fn wait_for_pool(sandbox: &Sandbox, size: usize) {
    for _ in 0..500 {
        if sandbox.warm_containers(Language::Python) >= size {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

fn docker(args: &[&str]) -> String {
    let output = Command::new("docker").args(args).output().expect("docker");
    assert!(
        output.status.success(),
        "docker {args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn report(name: &str, samples: &mut [Duration]) {
    samples.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    let at = |q: f64| ms(samples[((samples.len() - 1) as f64 * q).round() as usize]);
    let mean = samples.iter().map(|d| ms(*d)).sum::<f64>() / samples.len() as f64;
    println!(
        "{name:<44} {:>8.1} {:>8.1} {:>8.1}",
        at(0.50),
        at(0.95),
        mean
    );
}
