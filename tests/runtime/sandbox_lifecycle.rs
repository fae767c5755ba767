//! The sandbox's life around its runs, against the real engine and the offline image:
//! fresh boxes per run, the warm pool filling, growing and preloading, cancellation and
//! callers that stop waiting, images missing or removed, an engine that cannot be
//! reached, what a dead process left, and shutdown. Helpers are `sandbox`'s.

use crate::common::{self, request};
use crate::sandbox::{containers_of, finish, policy, run};

use code_sandbox_mcp::analysis::Language;
use code_sandbox_mcp::policy::EngineKind;
use code_sandbox_mcp::sandbox::{Sandbox, SandboxError};
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

crate::common::harness::tests! {
    multi_thread(2) every_run_gets_a_fresh_container_and_its_own_env needs common::DOCKER;
    multi_thread(2) eight_concurrent_runs_queue_and_all_succeed needs common::DOCKER;
    multi_thread(2) the_warm_pool_fills_and_refills needs common::DOCKER;
    multi_thread(2) preloaded_modules_are_imported_before_the_call needs common::DOCKER;
    multi_thread(2) the_warm_pool_grows_with_demand_up_to_max_concurrent needs common::DOCKER;
    multi_thread(2) cancelling_kills_the_run needs common::DOCKER;
    multi_thread(2) a_run_whose_caller_stops_waiting_is_removed needs common::DOCKER;
    multi_thread(2) a_missing_image_says_how_to_get_one needs common::DOCKER;
    multi_thread(2) an_image_removed_after_its_check_is_reported_and_checked_again needs common::DOCKER;
    multi_thread(2) an_unreachable_engine_is_one_clear_error;
    multi_thread(2) containers_of_a_dead_process_are_removed_at_start needs common::DOCKER;
    multi_thread(2) a_cancelled_run_keeps_its_slot_until_its_container_is_gone needs common::DOCKER;
    multi_thread(2) a_run_after_shutdown_is_refused_as_shutting_down needs common::DOCKER;
}

async fn every_run_gets_a_fresh_container_and_its_own_env() {
    let sandbox = Sandbox::new(policy(|_| {}));
    let first = run(
        &sandbox,
        Language::Python,
        "import os\nopen('/tmp/left-behind', 'w').write('x')\nprint(os.path.exists('/tmp/left-behind'))",
    )
    .await;
    assert_eq!(first.stdout, "True\n");
    let mut second = request(
        Language::Python,
        "import os\nprint(os.path.exists('/tmp/left-behind'), os.environ['GREETING'])",
    );
    second.env = vec![("GREETING".into(), "hi there".into())];
    let second = sandbox.run(second, CancellationToken::new()).await.unwrap();
    assert_eq!(second.stdout, "False hi there\n");
    finish(sandbox).await;
}

async fn eight_concurrent_runs_queue_and_all_succeed() {
    let sandbox = Sandbox::new(policy(|p| {
        p.pool.size = 2;
        p.pool.max_concurrent = 3;
    }));
    sandbox.warm_up().await;
    let runs = (0..8).map(|i| {
        let sandbox = sandbox.clone();
        let language = if i % 2 == 0 {
            Language::Python
        } else {
            Language::JavaScript
        };
        let code = match language {
            Language::Python => format!("print('run', {i})"),
            Language::JavaScript => format!("console.log('run', {i})"),
        };
        tokio::spawn(async move { run(&sandbox, language, &code).await })
    });
    let outcomes = futures_util::future::join_all(runs).await;
    for (i, outcome) in outcomes.into_iter().enumerate() {
        let outcome = outcome.expect("no panic");
        assert_eq!(outcome.stdout, format!("run {i}\n"));
        assert_eq!(outcome.exit_code, 0);
    }
    finish(sandbox).await;
}

async fn the_warm_pool_fills_and_refills() {
    let sandbox = Sandbox::new(policy(|p| p.pool.size = 2));
    assert_eq!(
        sandbox.warm_containers(Language::Python),
        0,
        "no I/O in new()"
    );
    sandbox.warm_up().await;
    // A warm container holds one language's interpreter, waiting: a pool per language.
    assert_eq!(sandbox.warm_containers(Language::Python), 2);
    assert_eq!(sandbox.warm_containers(Language::JavaScript), 2);
    assert_eq!(containers_of(&sandbox).len(), 4);
    run(&sandbox, Language::Python, "print(1)").await;
    let mut refilled = false;
    for _ in 0..200 {
        if sandbox.warm_containers(Language::Python) == 2 && containers_of(&sandbox).len() == 4 {
            refilled = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(refilled, "the used container is removed and replaced");
    finish(sandbox).await;
}

async fn preloaded_modules_are_imported_before_the_call() {
    let sandbox = Sandbox::new(policy(|p| {
        p.pool.preload.python = vec!["decimal".into(), "no_such_module".into()];
        p.pool.preload.javascript = vec!["node:zlib".into()];
    }));
    sandbox.warm_up().await;
    let python = run(
        &sandbox,
        Language::Python,
        "import sys\nprint('decimal' in sys.modules)",
    )
    .await;
    assert_eq!(python.stdout, "True\n", "{python:?}");
    // A module the image lacks is said on stderr; the run goes on.
    assert!(
        python
            .stderr
            .contains("pool.preload: cannot import no_such_module"),
        "{python:?}"
    );
    let cold = Sandbox::new(policy(|_| {}));
    let plain = run(
        &cold,
        Language::Python,
        "import sys\nprint('decimal' in sys.modules)",
    )
    .await;
    assert_eq!(
        plain.stdout, "False\n",
        "not preloaded unless asked: {plain:?}"
    );
    let loaded = "console.log(process.moduleLoadList.includes('NativeModule zlib'))";
    let node = run(&sandbox, Language::JavaScript, loaded).await;
    assert_eq!(node.stdout, "true\n", "{node:?}");
    let plain = run(&cold, Language::JavaScript, loaded).await;
    assert_eq!(plain.stdout, "false\n", "{plain:?}");
    finish(sandbox).await;
    finish(cold).await;
}

async fn the_warm_pool_grows_with_demand_up_to_max_concurrent() {
    let sandbox = Sandbox::new(policy(|p| {
        p.pool.size = 1;
        p.pool.max_concurrent = 3;
    }));
    sandbox.warm_up().await;
    assert_eq!(sandbox.warm_containers(Language::Python), 1);
    // A burst of four parallel calls: one finds a container ready, the others do not.
    let burst = (0..4).map(|i| {
        let sandbox = sandbox.clone();
        tokio::spawn(async move { run(&sandbox, Language::Python, &format!("print({i})")).await })
    });
    for (i, outcome) in futures_util::future::join_all(burst)
        .await
        .into_iter()
        .enumerate()
    {
        assert_eq!(outcome.expect("no panic").stdout, format!("{i}\n"));
    }
    // The pool now keeps three ready for the next burst (never more: only three can
    // run at once), where `pool.size` alone would have kept one.
    // JavaScript's pool, not asked for more, stays at one.
    let mut grown = 0;
    for _ in 0..300 {
        grown = sandbox.warm_containers(Language::Python);
        if grown == 3 && containers_of(&sandbox).len() == 4 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(grown, 3, "the pool follows the burst");
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(containers_of(&sandbox).len(), 4, "and does not overshoot");
    assert_eq!(sandbox.warm_containers(Language::JavaScript), 1);
    finish(sandbox).await;
}

async fn cancelling_kills_the_run() {
    let sandbox = Sandbox::new(policy(|_| {}));
    let cancel = CancellationToken::new();
    let task = tokio::spawn({
        let sandbox = sandbox.clone();
        let cancel = cancel.clone();
        async move {
            sandbox
                .run(
                    request(Language::Python, "import time\ntime.sleep(600)"),
                    cancel,
                )
                .await
        }
    });
    tokio::time::sleep(Duration::from_millis(1500)).await;
    cancel.cancel();
    let result = task.await.unwrap();
    assert!(matches!(result, Err(SandboxError::Cancelled)), "{result:?}");
    finish(sandbox).await;
}

async fn a_run_whose_caller_stops_waiting_is_removed() {
    let sandbox = Sandbox::new(policy(|p| p.pool.size = 0));
    let abandoned = tokio::time::timeout(
        Duration::from_secs(3),
        run(&sandbox, Language::Python, "import time\ntime.sleep(600)"),
    )
    .await;
    assert!(abandoned.is_err(), "the caller gave up first");
    // Without shutdown: the dropped run removes its own container.
    let mut gone = false;
    for _ in 0..100 {
        if containers_of(&sandbox).is_empty() {
            gone = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(gone, "the abandoned run's container was removed");
    finish(sandbox).await;
}

async fn a_missing_image_says_how_to_get_one() {
    let sandbox = Sandbox::new(policy(|p| {
        p.images.python = vec!["code-sandbox-mcp-test/no-such-image:never".into()]
    }));
    let error = sandbox
        .run(
            request(Language::Python, "print(1)"),
            CancellationToken::new(),
        )
        .await
        .unwrap_err();
    let SandboxError::ImageUnavailable(message) = error else {
        panic!("{error:?}")
    };
    assert!(
        message.contains("code-sandbox-mcp-test/no-such-image:never"),
        "{message}"
    );
    assert!(
        message.contains("scripts/build-offline-image.sh"),
        "{message}"
    );
    assert!(message.contains("images:"), "{message}");
    finish(sandbox).await;
}

async fn an_image_removed_after_its_check_is_reported_and_checked_again() {
    let tag = format!("code-sandbox-mcp-test/removable:{}", std::process::id());
    let docker = |args: &[&str]| {
        let status = Command::new("docker").args(args).output().unwrap().status;
        assert!(status.success(), "docker {args:?}");
    };
    docker(&["tag", "code-sandbox-mcp-runtime:trixie", &tag]);
    let sandbox = Sandbox::new(policy(|p| {
        p.images.python = vec![tag.clone()];
        p.pool.size = 0;
    }));
    assert_eq!(
        run(&sandbox, Language::Python, "print(1)").await.stdout,
        "1\n"
    );
    docker(&["rmi", &tag]);
    for _ in 0..2 {
        // First the creation fails, then the new check (a pull, which fails here).
        let error = sandbox
            .run(
                request(Language::Python, "print(1)"),
                CancellationToken::new(),
            )
            .await
            .unwrap_err();
        let SandboxError::ImageUnavailable(message) = error else {
            panic!("{error:?}")
        };
        assert!(message.contains(&tag), "{message}");
    }
    docker(&["tag", "code-sandbox-mcp-runtime:trixie", &tag]);
    assert_eq!(
        run(&sandbox, Language::Python, "print(2)").await.stdout,
        "2\n"
    );
    docker(&["rmi", &tag]);
    finish(sandbox).await;
}

async fn an_unreachable_engine_is_one_clear_error() {
    // No Podman socket on this machine (Docker is the engine here); no engine needed.
    let podman_present = ["/run/podman/podman.sock"]
        .iter()
        .any(|p| std::path::Path::new(p).exists())
        || std::env::var_os("CONTAINER_HOST").is_some();
    if podman_present {
        return;
    }
    let sandbox = Sandbox::new(policy(|p| p.engine = EngineKind::Podman));
    for _ in 0..2 {
        // The second call tries again rather than remembering the failure.
        let error = sandbox
            .run(
                request(Language::Python, "print(1)"),
                CancellationToken::new(),
            )
            .await
            .unwrap_err();
        let SandboxError::EngineUnreachable(message) = error else {
            panic!("{error:?}")
        };
        assert!(message.contains("/run/podman/podman.sock"), "{message}");
        assert!(message.contains("podman.socket"), "{message}");
    }
    sandbox.shutdown().await;
}

async fn containers_of_a_dead_process_are_removed_at_start() {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .unwrap()
        .trim()
        .to_string();
    let dead = format!("dead-instance-{}", std::process::id());
    let created = Command::new("docker")
        .args(["create", "--label"])
        .arg(format!("code-sandbox-mcp={dead}"))
        // pid_max is at most 2^22: no process has this pid.
        .args(["--label", "code-sandbox-mcp.pid=4194304", "--label"])
        .arg(format!("code-sandbox-mcp.host={host}"))
        // The same PID namespace as this process: the pid can be judged here.
        .arg("--label")
        .arg(format!(
            "code-sandbox-mcp.pidns={}",
            std::fs::read_link("/proc/self/ns/pid").unwrap().display()
        ))
        .args(["code-sandbox-mcp-runtime:trixie", "sleep", "infinity"])
        .output()
        .unwrap();
    assert!(created.status.success(), "{created:?}");
    let orphan = String::from_utf8_lossy(&created.stdout).trim().to_string();

    let sandbox = Sandbox::new(policy(|_| {}));
    run(&sandbox, Language::Python, "print(1)").await;
    let mut gone = false;
    for _ in 0..100 {
        let inspect = Command::new("docker")
            .args(["inspect", &orphan])
            .output()
            .unwrap();
        if !inspect.status.success() {
            gone = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    if !gone {
        let _ = Command::new("docker").args(["rm", "-f", &orphan]).output();
    }
    assert!(gone, "the dead instance's container was removed");
    finish(sandbox).await;
}

/// A run cancelled while its container is still being created keeps its concurrency
/// slot until that creation has ended and the container is gone: with one slot, the
/// next run's container never exists beside the abandoned one.
async fn a_cancelled_run_keeps_its_slot_until_its_container_is_gone() {
    let sandbox = Sandbox::new(policy(|p| {
        p.pool.size = 0;
        p.pool.max_concurrent = 1;
    }));
    // The engine and the image are ready, so the cancellation lands in the creation.
    run(&sandbox, Language::Python, "print(1)").await;
    // Its container is removed in the background: wait until it is gone.
    for _ in 0..100 {
        if containers_of(&sandbox).is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let most = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let watching = CancellationToken::new();
    let watcher = {
        let (sandbox, most, watching) = (sandbox.clone(), most.clone(), watching.clone());
        tokio::spawn(async move {
            while !watching.is_cancelled() {
                let count = containers_of(&sandbox).len();
                most.fetch_max(count, std::sync::atomic::Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        })
    };
    let cancel = CancellationToken::new();
    let abandoned = {
        let (sandbox, cancel) = (sandbox.clone(), cancel.clone());
        tokio::spawn(async move {
            sandbox
                .run(request(Language::Python, "print(2)"), cancel)
                .await
        })
    };
    tokio::time::sleep(Duration::from_millis(60)).await;
    cancel.cancel();
    assert!(matches!(
        abandoned.await.unwrap(),
        Err(SandboxError::Cancelled)
    ));
    let next = run(
        &sandbox,
        Language::Python,
        "import time\ntime.sleep(1)\nprint(3)",
    )
    .await;
    assert_eq!(next.stdout, "3\n", "{next:?}");
    watching.cancel();
    watcher.await.unwrap();
    assert_eq!(
        most.load(std::sync::atomic::Ordering::SeqCst),
        1,
        "containers of this instance alive at once"
    );
    finish(sandbox).await;
}

/// After shutdown a run is refused with its own error, not one that invites a retry.
async fn a_run_after_shutdown_is_refused_as_shutting_down() {
    let sandbox = Sandbox::new(policy(|p| p.pool.size = 0));
    sandbox.shutdown().await;
    let refused = sandbox
        .run(
            request(Language::Python, "print(1)"),
            CancellationToken::new(),
        )
        .await;
    assert!(
        matches!(refused, Err(SandboxError::ShuttingDown)),
        "{refused:?}"
    );
    finish(sandbox).await;
}
