//! The server raises its own descriptor limit at start: the egress proxy holds two
//! descriptors per connection, and the usual soft limit of 1,024 is what one busy
//! sandbox used to exhaust. Started under a lowered soft limit, `serve` runs with its
//! soft limit at the hard limit.

use std::io::Write;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

crate::common::harness::tests! {
    sync serve_raises_its_descriptor_limit_to_the_hard_limit;
}

/// The soft and hard "Max open files" of process `pid`.
fn open_files(pid: u32) -> Option<(String, String)> {
    let limits = std::fs::read_to_string(format!("/proc/{pid}/limits")).ok()?;
    let line = limits.lines().find(|l| l.starts_with("Max open files"))?;
    let mut numbers = line["Max open files".len()..].split_whitespace();
    Some((numbers.next()?.to_string(), numbers.next()?.to_string()))
}

fn serve_raises_its_descriptor_limit_to_the_hard_limit() {
    // The control: under this shell, a process starts with the lowered soft limit.
    let control = Command::new("sh")
        .arg("-c")
        .arg("ulimit -Sn 256 && exec cat /proc/self/limits")
        .output()
        .unwrap();
    let control = String::from_utf8_lossy(&control.stdout);
    let line = control
        .lines()
        .find(|l| l.starts_with("Max open files"))
        .unwrap();
    assert_eq!(line.split_whitespace().nth(3), Some("256"), "{line}");
    // `exec` keeps the pid: the shell lowers the soft limit, then becomes the server.
    let mut child = Command::new("sh")
        .arg("-c")
        .arg("ulimit -Sn 256 && exec \"$0\" serve --policy default")
        .arg(crate::common::binary_path())
        .env_remove("CODE_SANDBOX_POLICY")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut seen = None;
    while Instant::now() < deadline {
        seen = open_files(child.id());
        if matches!(&seen, Some((soft, hard)) if soft == hard) {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = child.stdin.take().map(|mut stdin| stdin.write_all(b""));
    let _ = child.kill();
    let _ = child.wait();
    let (soft, hard) = seen.expect("the server's limits were readable");
    assert_eq!(soft, hard, "the soft limit was raised to the hard limit");
    assert_ne!(soft, "256");
}
