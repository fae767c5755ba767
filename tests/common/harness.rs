//! The harness of the test binaries that need a container engine (`runtime` and `cli`,
//! `harness = false` in Cargo.toml), on libtest-mimic, so that `cargo test`'s arguments
//! work as with the built-in harness: filters, `--exact`, `--skip`, `--list`,
//! `--ignored`, `--include-ignored`, `--test-threads` (or `RUST_TEST_THREADS`).
//!
//! Why a harness of our own: under the built-in one a test cannot mark itself ignored
//! while it runs, so a test whose engine was missing returned early and was counted as
//! passed. Here each module declares its tests with [`tests!`], each naming what it
//! needs ([`Prerequisite`]: Docker, gVisor, the MCP test clients). Before anything runs,
//! every prerequisite of a selected test is prepared once; when one cannot be had, its
//! tests are reported *ignored*, with one loud line saying why, or, with `CI=true`, they
//! run and fail with that reason. After the last test the run removes its scratch
//! directories and fails if a container or volume of this process is left.

use libtest_mimic::{Arguments, Failed, Trial};
use std::cell::RefCell;
use std::collections::HashMap;
use std::panic::PanicHookInfo;
use std::process::{Command, ExitCode};
use std::sync::Mutex;

/// Something a test needs from the machine.
pub struct Prerequisite {
    /// What is needed, as the skip line names it.
    pub name: &'static str,
    /// Makes it ready when it can (starts the engine, installs the clients) or says why
    /// not. Called at most once per process.
    pub prepare: fn() -> Result<(), String>,
}

impl Prerequisite {
    /// Whether this is ready, preparing it the first time it is asked.
    pub fn ready(&'static self) -> Result<(), String> {
        static PREPARED: Mutex<Vec<(&str, Result<(), String>)>> = Mutex::new(Vec::new());
        let mut prepared = PREPARED.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((_, result)) = prepared.iter().find(|(name, _)| *name == self.name) {
            return result.clone();
        }
        let result = (self.prepare)();
        prepared.push((self.name, result.clone()));
        result
    }
}

/// The first of `needs` that cannot be had, and why.
fn unmet(needs: &[&'static Prerequisite]) -> Option<(&'static str, String)> {
    needs
        .iter()
        .find_map(|need| need.ready().err().map(|reason| (need.name, reason)))
}

/// One test: its name as libtest would give it (`module::function`), what it needs, and
/// its body.
pub struct Test {
    pub name: String,
    pub needs: Vec<&'static Prerequisite>,
    pub body: Box<dyn FnOnce() + Send>,
}

impl Test {
    /// `module` is the declaring module's `module_path!()`, whose first segment (the
    /// test binary) libtest leaves out of a test's name too.
    pub fn new(
        module: &str,
        function: &str,
        needs: &[&'static Prerequisite],
        body: Box<dyn FnOnce() + Send>,
    ) -> Test {
        let name = match module.split_once("::") {
            Some((_, path)) => format!("{path}::{function}"),
            None => function.to_string(),
        };
        Test {
            name,
            needs: needs.to_vec(),
            body,
        }
    }
}

/// How an async test runs: on the runtime `#[tokio::test]` would give it.
pub enum Flavor {
    /// `#[tokio::test]`.
    CurrentThread,
    /// `#[tokio::test(flavor = "multi_thread", worker_threads = N)]`.
    MultiThread(usize),
}

/// Runs the future `test` returns to completion on a fresh runtime of `flavor`.
pub fn block_on<F: std::future::Future<Output = ()>>(flavor: Flavor, test: impl FnOnce() -> F) {
    let mut builder = match flavor {
        Flavor::CurrentThread => tokio::runtime::Builder::new_current_thread(),
        Flavor::MultiThread(workers) => {
            let mut builder = tokio::runtime::Builder::new_multi_thread();
            builder.worker_threads(workers);
            builder
        }
    };
    let runtime = builder
        .enable_all()
        .build()
        .expect("build the test's runtime");
    runtime.block_on(test());
}

/// Declares a module's tests: `pub(crate) fn tests() -> Vec<Test>` for the binary's
/// `main`. One line per test function, in this form:
///
/// ```text
/// sync                NAME [needs PREREQUISITE, …];   // a plain fn
/// current_thread      NAME [needs …];                 // #[tokio::test]
/// multi_thread(N)     NAME [needs …];                 // flavor = "multi_thread", worker_threads = N
/// ```
///
/// A test function left out of the list is dead code, which the lints refuse.
macro_rules! tests {
    ($($flavor:ident $(($workers:literal))? $name:ident $(needs $($need:path),+)?;)*) => {
        /// This module's tests, as the harness runs them (tests/common/harness.rs).
        pub(crate) fn tests() -> Vec<$crate::common::harness::Test> {
            vec![$(
                $crate::common::harness::Test::new(
                    module_path!(),
                    stringify!($name),
                    &[$($(&$need),+)?],
                    $crate::common::harness::tests!(@body $flavor $(($workers))? $name),
                )
            ),*]
        }
    };
    (@body sync $name:ident) => {
        Box::new($name)
    };
    (@body current_thread $name:ident) => {
        Box::new(|| {
            $crate::common::harness::block_on($crate::common::harness::Flavor::CurrentThread, $name)
        })
    };
    (@body multi_thread($workers:literal) $name:ident) => {
        Box::new(|| {
            $crate::common::harness::block_on(
                $crate::common::harness::Flavor::MultiThread($workers),
                $name,
            )
        })
    };
}
pub(crate) use tests;

/// Whether this run is CI's, where a missing prerequisite is a failure.
pub fn in_ci() -> bool {
    std::env::var("CI").as_deref() == Ok("true")
}

/// The test binary's `main`: runs the tests of `modules` as `cargo test` asked, then
/// cleans up after them. `sources` is the folder of the binary's modules, read by the
/// check that no test there is marked for the built-in harness (which would never run it).
pub fn main(sources: &str, modules: &[fn() -> Vec<Test>]) -> ExitCode {
    let (args, filters) = arguments();
    let mut tests: Vec<Test> = modules.iter().flat_map(|module| module()).collect();
    tests.push(stray_attribute_check(sources));
    tests.sort_by(|a, b| a.name.cmp(&b.name));
    if filters.len() > 1 {
        let matches = |name: &str, filter: &String| match args.exact {
            true => name == filter,
            false => name.contains(filter.as_str()),
        };
        tests.retain(|test| filters.iter().any(|filter| matches(&test.name, filter)));
    }

    // Prepared only for the tests the filters select, and not for `--list`: listing
    // or running one check test does not start an engine.
    let mut by_name = args.clone();
    by_name.ignored = false;
    let mut missing: HashMap<&'static str, (String, usize)> = HashMap::new();
    let mut trials = Vec::new();
    for test in tests {
        let Test { name, needs, body } = test;
        let probe = Trial::test(name.clone(), || Ok(()));
        let selected = !args.list && !by_name.is_filtered_out(&probe);
        let unmet_need = if selected { unmet(&needs) } else { None };
        if let Some((need, reason)) = &unmet_need {
            missing.entry(need).or_insert_with(|| (reason.clone(), 0)).1 += 1;
        }
        let thread_name = name.clone();
        let trial = Trial::test(name, move || {
            // Reached with a need missing only under CI=true or --include-ignored.
            if let Some((need, reason)) = unmet(&needs) {
                return Err(format!("{need} is not available here: {reason}").into());
            }
            run_in_thread(thread_name, body)
        });
        trials.push(trial.with_ignored_flag(unmet_need.is_some() && !in_ci()));
    }

    let say_what_is_missing = || {
        for (need, (reason, count)) in &missing {
            let verdict = if in_ci() {
                "CI=true, so they FAIL"
            } else {
                "they are IGNORED"
            };
            eprintln!(
                "\n!!!!!!!! {count} test(s) need {need}, which is not available here ({verdict}): {reason}\n"
            );
        }
    };
    say_what_is_missing();
    let conclusion = libtest_mimic::run(&args, trials);
    say_what_is_missing();
    if args.list {
        return ExitCode::SUCCESS;
    }
    let left = clean_up(conclusion.has_failed());
    if !left.is_empty() {
        eprintln!("\n!!!!!!!! the tests left these behind (now removed): {left:?}\n");
        return ExitCode::from(101);
    }
    conclusion.exit_code()
}

/// The command line as libtest-mimic reads it, with `RUST_TEST_THREADS` as libtest
/// reads it, and the filters. libtest takes several (`cargo test -- a b` runs the tests
/// matching either), libtest-mimic one: with more than one, they are taken out here and
/// [`main`] applies them (the summary then counts none as filtered out).
fn arguments() -> (Arguments, Vec<String>) {
    const TAKES_A_VALUE: &[&str] = &[
        "--test-threads",
        "--logfile",
        "--skip",
        "--color",
        "--format",
        "-Z",
    ];
    let mut raw = std::env::args();
    let mut options: Vec<String> = raw.next().into_iter().collect();
    let mut filters = Vec::new();
    let mut value_follows = false;
    for arg in raw {
        if value_follows || arg.starts_with('-') {
            value_follows = !value_follows && TAKES_A_VALUE.contains(&arg.as_str());
            options.push(arg);
        } else {
            filters.push(arg);
        }
    }
    let mut args = Arguments::from_iter(options);
    if filters.len() == 1 {
        args.filter = filters.pop();
    }
    if args.test_threads.is_none() {
        args.test_threads = std::env::var("RUST_TEST_THREADS")
            .ok()
            .and_then(|n| n.parse().ok());
    }
    (args, filters)
}

/// Runs `body` in a thread named after the test (panic messages then say which test),
/// turning a panic into the test's failure with its message and place.
fn run_in_thread(name: String, body: Box<dyn FnOnce() + Send>) -> Result<(), Failed> {
    install_panic_hook();
    let joined = std::thread::Builder::new()
        .name(name)
        .spawn(move || {
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(body)).map_err(|payload| {
                let message = payload
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| payload.downcast_ref::<&str>().map(|s| s.to_string()))
                    .unwrap_or_else(|| "a panic without a message".to_string());
                let place = LAST_PANIC_PLACE.with(|place| place.borrow_mut().take());
                match place {
                    Some(place) => format!("panicked at {place}:\n{message}"),
                    None => format!("panicked: {message}"),
                }
            })
        })
        .expect("start the test's thread")
        .join();
    match joined {
        Ok(Ok(())) => Ok(()),
        Ok(Err(message)) => Err(message.into()),
        Err(_) => Err("the test's thread could not report its end".into()),
    }
}

thread_local! {
    /// Where the current thread last panicked (`file:line:column`).
    static LAST_PANIC_PLACE: RefCell<Option<String>> = const { RefCell::new(None) };
}

/// Records each panic's place for [`run_in_thread`], then prints it as usual.
fn install_panic_hook() {
    static INSTALLED: std::sync::Once = std::sync::Once::new();
    INSTALLED.call_once(|| {
        let default = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info: &PanicHookInfo<'_>| {
            if let Some(location) = info.location() {
                let place = format!(
                    "{}:{}:{}",
                    location.file(),
                    location.line(),
                    location.column()
                );
                LAST_PANIC_PLACE.with(|last| *last.borrow_mut() = Some(place));
            }
            default(info);
        }));
    });
}

/// Fails when a module of this binary still marks a test for the built-in harness:
/// under `harness = false` such a test would silently never run.
fn stray_attribute_check(sources: &str) -> Test {
    let folder = super::root().join(sources);
    Test::new(
        "harness::harness",
        "every_test_is_declared_to_this_harness",
        &[],
        Box::new(move || {
            let mut stray = Vec::new();
            for folder in [folder.as_path(), &super::root().join("tests/common")] {
                for entry in std::fs::read_dir(folder).expect("read the test sources") {
                    let path = entry.expect("a directory entry").path();
                    let text = std::fs::read_to_string(&path).unwrap_or_default();
                    for (number, line) in text.lines().enumerate() {
                        let line = line.trim_start();
                        if line.starts_with("#[test]") || line.starts_with("#[tokio::test") {
                            stray.push(format!("{}:{}", path.display(), number + 1));
                        }
                    }
                }
            }
            assert!(
                stray.is_empty(),
                "under this harness these tests never run; declare them with `tests!`: {stray:?}"
            );
        }),
    )
}

/// Removes this process's scratch directories (kept when a test failed, to look at),
/// then its containers and volumes (those carrying its pid: a test that failed before
/// shutting its sandbox down leaves some), and says which of those there were.
fn clean_up(failed: bool) -> Vec<String> {
    let pid = std::process::id();
    let scratch = super::root().join("target/test-scratch");
    let own = format!("-{pid}");
    let mut ours = Vec::new();
    if let Ok(entries) = std::fs::read_dir(&scratch) {
        for entry in entries.flatten() {
            if entry.file_name().to_string_lossy().ends_with(&own) {
                ours.push(entry.path());
            }
        }
    }
    if failed && !ours.is_empty() {
        eprintln!(
            "a test failed: its scratch directories are kept: {}",
            scratch.display()
        );
    } else {
        for dir in &ours {
            let _ = std::fs::remove_dir_all(dir);
        }
        // Empty once no other run is using it.
        let _ = std::fs::remove_dir(&scratch);
    }
    let _ = std::fs::remove_dir(std::env::temp_dir().join("code-sandbox-mcp-tests"));
    let filter = format!("label=code-sandbox-mcp.pid={pid}");
    let containers = engine_names(&["ps", "-a", "--format", "{{.Names}}", "--filter", &filter]);
    if !containers.is_empty() {
        let _ = Command::new("docker")
            .args(["rm", "-f", "-v"])
            .args(&containers)
            .output();
    }
    let volumes = engine_names(&["volume", "ls", "--format", "{{.Name}}", "--filter", &filter]);
    if !volumes.is_empty() {
        let _ = Command::new("docker")
            .args(["volume", "rm", "-f"])
            .args(&volumes)
            .output();
    }
    let containers = containers.iter().map(|name| format!("container {name}"));
    let volumes = volumes.iter().map(|name| format!("volume {name}"));
    containers.chain(volumes).collect()
}

/// The names `docker ARGS` lists, one a line; none when the engine cannot be asked.
fn engine_names(args: &[&str]) -> Vec<String> {
    match Command::new("docker").args(args).output() {
        Ok(output) if output.status.success() => String::from_utf8_lossy(&output.stdout)
            .lines()
            .map(str::to_string)
            .collect(),
        _ => Vec::new(),
    }
}
