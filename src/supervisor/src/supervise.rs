//! The supervisor's life: it checks that the layers it was asked for exist here, starts
//! the interpreter under them ([`crate::child`]), and then, on one thread, waits for
//! whatever comes next with `ppoll`: a program from the server, the interpreter's
//! output (framed and passed on), its run-time hooks' records, a call the filter handed
//! over (a refusal to report, or the main thread asking for its next program), and the
//! interpreter's end. Only the supervisor writes to the server, so nothing the program
//! does can end a run early, end it late, or say how it ended.
//!
//! The program reaches the interpreter through the call channel: the interpreter's main
//! thread `read`s a channel fd number ([`crate::filter::CHANNEL`]), the filter hands the
//! call over, and the supervisor answers it (only for the main thread) with a fresh
//! memfd holding the program, put into the interpreter's fd table as the call's result.
//! In a session the same `read` says the call before is done, and with which status.
//! Where the kernel has no user notification (gVisor), the program comes through a
//! pipe (fd 4) and the end of a session call through the records pipe: the same
//! protocol, without the main-thread check.

use crate::child::{self, Child, Spawn};
use crate::files::{self, Caps, Stamp};
use crate::filter::{CHANNEL, READY};
use crate::io::{
    close, memfd, nonblocking, poll, read, wait, watch, write_all, POLLERR, POLLHUP, POLLIN,
};
use crate::landlock;
use crate::notify::{self, Notification};
use crate::settings::Settings;
use crate::sys::{self, Errno};
use crate::wire::{FromBox, Program, Status, ToBox};
use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

const PR_SET_DUMPABLE: usize = 4;
/// Output still arriving after the interpreter exited is read for this long (a child
/// it started may hold the pipes).
const EXIT_GRACE: Duration = Duration::from_millis(200);
/// The line the interpreter writes on its records pipe when a session call is done,
/// where there is no call channel: `\x1edone <status>`.
const DONE_RECORD: &[u8] = b"\x1edone ";

/// What the kernel here offers (`--probe`): one `key=value` line each.
pub fn probe() -> String {
    format!(
        "landlock-abi={}\nseccomp-notify={}\n",
        landlock::abi().unwrap_or(0),
        if notify::available() { "yes" } else { "no" }
    )
}

/// Why the settings cannot be kept here, if they cannot: `abi` is this kernel's
/// Landlock ABI, `proc_mem_writable` whether a process here can open its own
/// `/proc/self/mem` for writing without Landlock (gVisor's cannot).
fn missing_layer(settings: &Settings, abi: Option<u32>, proc_mem_writable: bool) -> Option<String> {
    if abi.is_some() {
        return None;
    }
    if settings.readable.is_some() {
        return Some(
            "the policy's filesystem rule denies reading outside the sandbox's folders, which \
             the kernel keeps with Landlock, and this kernel has no Landlock (Linux 5.13 or \
             later with Landlock enabled; gVisor has none): nothing runs. Set the rule to `warn` \
             to run here without that promise"
                .into(),
        );
    }
    if settings.protect && proc_mem_writable {
        return Some(
            "the policy's rules need the kernel to keep the filesystem closed (writes only to \
             the sandbox's folders, nothing under /proc), which it does with Landlock, and this \
             kernel has no Landlock (Linux 5.13 or later with Landlock enabled): nothing runs. \
             Use a newer kernel, or run under gVisor (`runtime: runsc`, which keeps /proc \
             closed itself)"
                .into(),
        );
    }
    None
}

/// Runs the supervisor with `settings`; returns the process's exit code.
pub fn run(settings: Settings) -> i32 {
    // SAFETY: plain system calls with constant arguments.
    unsafe {
        // The program runs as the same user: not dumpable, the supervisor's memory and
        // fds are closed to it (no ptrace, no /proc/<pid>/mem, no pidfd_getfd).
        let _ = sys::call(sys::PRCTL, &[PR_SET_DUMPABLE, 0, 0, 0, 0]);
        // A process group of its own, which the filter keeps the program from signalling.
        let _ = sys::call(sys::SETSID, &[]);
    }
    let abi = landlock::abi();
    let proc_mem_writable = abi.is_none() && child::writable(c"/proc/self/mem");
    if let Some(reason) = missing_layer(&settings, abi, proc_mem_writable) {
        return refuse_every_program(&reason);
    }
    let ruleset = match abi {
        Some(abi) => match landlock::Ruleset::new(
            abi,
            &landlock::Paths {
                writable: settings.writable.clone(),
                writable_files: settings.writable_files.clone(),
                readable: settings.readable.clone(),
            },
        ) {
            Ok(ruleset) => Some(ruleset),
            Err(error) if settings.protect || settings.readable.is_some() => {
                return refuse_every_program(&format!("the Landlock ruleset: {error}"))
            }
            Err(_) => None,
        },
        None => None,
    };
    if let Some((port, socket)) = &settings.relay {
        if let Err(error) = crate::relay::start(*port, socket) {
            eprintln!("code-sandbox-mcp supervisor: {error}");
        }
    }
    let _ = std::fs::create_dir_all(&settings.figures);
    let notify = notify::available();
    let figures_env = [("CODE_SANDBOX_FIGURES".to_string(), settings.figures.clone())];
    let channel_env = (
        "CODE_SANDBOX_CHANNEL".to_string(),
        if notify { "notify" } else { "pipe" }.to_string(),
    );
    let env: Vec<(String, String)> = figures_env.into_iter().chain([channel_env]).collect();
    let child = match child::spawn(&Spawn {
        argv: &settings.interpreter,
        env: &env,
        floor: settings.floor,
        landlock: ruleset.as_ref().map(landlock::Ruleset::fd),
        notify,
    }) {
        Ok(child) => child,
        Err(error) => return refuse_every_program(&error),
    };
    drop(ruleset);
    Supervisor::new(settings, child).serve()
}

/// Where a layer is missing: answers every program with why, and never starts one.
fn refuse_every_program(reason: &str) -> i32 {
    let mut input = std::io::stdin().lock();
    let mut out = std::io::stdout().lock();
    while let Ok(Some(_)) = ToBox::read(&mut input) {
        if FromBox::Unavailable(reason.to_string())
            .write(&mut out)
            .is_err()
        {
            break;
        }
    }
    0
}

/// A program in the interpreter's hands: what the working directory held when it got
/// it, and the OOM kills before it.
struct Flight {
    before: BTreeMap<String, Stamp>,
    /// The stateless run's own file, which is not its output.
    main_file: Option<String>,
    oom_kills: u64,
}

struct Supervisor {
    settings: Settings,
    child: Child,
    pidfd: i32,
    out: std::io::Stdout,
    /// Bytes from the server not yet a whole frame.
    input: Vec<u8>,
    input_open: bool,
    /// The main thread's call-channel `read`, held until there is a program for it.
    waiting: Option<u64>,
    /// A program the interpreter has not asked for yet.
    queued: Option<Vec<u8>>,
    flight: Option<Flight>,
    /// A records line not yet whole.
    records: Vec<u8>,
    stdout_open: bool,
    stderr_open: bool,
    records_open: bool,
    /// The status the interpreter's `exit_group` named: it is ending, and its end is
    /// reported as soon as its output is all read, not after the kernel has torn it
    /// down.
    exiting: Option<i32>,
}

impl Supervisor {
    fn new(settings: Settings, child: Child) -> Supervisor {
        // SAFETY: pidfd_open of our own child.
        let pidfd = unsafe { sys::call(sys::PIDFD_OPEN, &[child.pid as usize, 0]) }
            .map(|fd| fd as i32)
            .unwrap_or(-1);
        for fd in [child.stdout, child.stderr, child.explain, 0] {
            nonblocking(fd);
        }
        Supervisor {
            settings,
            child,
            pidfd,
            out: std::io::stdout(),
            input: Vec::new(),
            input_open: true,
            waiting: None,
            queued: None,
            flight: None,
            records: Vec::new(),
            stdout_open: true,
            stderr_open: true,
            records_open: true,
            exiting: None,
        }
    }

    fn send(&mut self, message: FromBox) {
        if message.write(&mut self.out.lock()).is_err() {
            // The server is gone: so is the box's reason to exist.
            self.kill_and_exit();
        }
    }

    fn kill_and_exit(&self) -> ! {
        // SAFETY: signalling our own child.
        let _ = unsafe { sys::call(sys::KILL, &[self.child.pid as usize, 9]) };
        std::process::exit(0)
    }

    fn serve(mut self) -> i32 {
        loop {
            let listener = self.child.listener.as_ref().map_or(-1, |l| l.fd);
            let mut fds = [
                watch(if self.input_open { 0 } else { -1 }),
                watch(if self.stdout_open {
                    self.child.stdout
                } else {
                    -1
                }),
                watch(if self.stderr_open {
                    self.child.stderr
                } else {
                    -1
                }),
                watch(if self.records_open {
                    self.child.explain
                } else {
                    -1
                }),
                watch(listener),
                watch(self.pidfd),
            ];
            if let Err(errno) = poll(&mut fds, None) {
                if errno != Errno::EINTR {
                    eprintln!("code-sandbox-mcp supervisor: ppoll: {errno}");
                    self.kill_and_exit();
                }
                continue;
            }
            let ready = |i: usize| fds[i].revents & (POLLIN | POLLHUP | POLLERR) != 0;
            if ready(4) {
                self.on_notification();
            }
            if ready(1) {
                self.pass_output(true);
            }
            if ready(2) {
                self.pass_output(false);
            }
            if ready(3) {
                self.pass_records();
            }
            if ready(0) {
                self.on_input();
            }
            if ready(5) || (self.pidfd < 0 && !self.stdout_open && !self.stderr_open) {
                return self.on_exit(None);
            }
            // It called `exit_group` and nothing can write its pipes any more (it closed
            // them first): its end is known.
            if let Some(code) = self.exiting {
                if !self.stdout_open && !self.stderr_open && !self.records_open {
                    return self.on_exit(Some(Status::Exited(code)));
                }
            }
        }
    }

    /// Reads what the server sent; each whole program goes to the interpreter.
    fn on_input(&mut self) {
        let mut chunk = vec![0u8; 256 * 1024];
        match read(0, &mut chunk) {
            Ok(0) => {
                self.input_open = false;
                if self.flight.is_none() {
                    // The session (or the unused box) is over.
                    self.kill_and_exit();
                }
                return;
            }
            Ok(n) => self.input.extend_from_slice(&chunk[..n]),
            Err(Errno::EAGAIN | Errno::EINTR) => return,
            Err(_) => {
                self.input_open = false;
                return;
            }
        }
        loop {
            match ToBox::take(&mut self.input) {
                Ok(Some(ToBox::Program(program))) => self.accept(program),
                Ok(None) => return,
                Err(error) => {
                    eprintln!("code-sandbox-mcp supervisor: from the server: {error}");
                    self.kill_and_exit();
                }
            }
        }
    }

    /// Writes the program's files, notes what the working directory holds, and hands
    /// the program over (now, or when the interpreter asks).
    fn accept(&mut self, program: Program) {
        let root = Path::new(&self.settings.workdir).to_path_buf();
        for (path, bytes) in &program.files {
            if let Err(error) = files::write(&root, path, bytes) {
                let note = format!("code-sandbox-mcp: files: {error}\n");
                self.send(FromBox::Stderr(note.into_bytes()));
            }
        }
        let main_file = (!program.file.is_empty()).then(|| program.file.clone());
        if let Some(file) = &main_file {
            if let Err(error) = files::write(&root, file, &program.code) {
                let note = format!("code-sandbox-mcp: the program's file: {error}\n");
                self.send(FromBox::Stderr(note.into_bytes()));
            }
        }
        let before = if self.settings.files {
            files::listing(&root, &self.settings.skip)
        } else {
            BTreeMap::new()
        };
        self.flight = Some(Flight {
            before,
            main_file,
            oom_kills: oom_kills(),
        });
        self.queued = Some(message(&self.settings.workdir, &program));
        self.deliver();
    }

    /// Gives the queued program to the interpreter if it is asking for one.
    fn deliver(&mut self) {
        if self.queued.is_none() {
            return;
        }
        if let Some(pipe) = self.child.program_pipe {
            let message = self.queued.take().expect("queued");
            let mut framed = (message.len() as u32).to_le_bytes().to_vec();
            framed.extend_from_slice(&message);
            // SAFETY: writing our buffer to our pipe end (blocking: the interpreter reads).
            let _ = write_all(pipe, &framed);
            return;
        }
        let Some(id) = self.waiting else {
            return;
        };
        if !self
            .listener()
            .is_some_and(|listener| listener.still_waiting(id))
        {
            self.waiting = None;
            return;
        }
        let message = self.queued.take().expect("queued");
        let memfd = match memfd(&message) {
            Ok(fd) => fd,
            Err(errno) => {
                let note = format!("code-sandbox-mcp supervisor: memfd: {errno}\n");
                self.send(FromBox::Stderr(note.into_bytes()));
                return;
            }
        };
        let answered = self.listener().map_or(Err(Errno::EBADF), |listener| {
            listener.answer_with_fd(id, memfd)
        });
        close(memfd);
        self.waiting = None;
        if answered.is_err() {
            // The thread was interrupted; it asks again, and gets it then.
            self.queued = Some(message);
        }
    }

    fn on_notification(&mut self) {
        let Some(call) = self.listener().and_then(|listener| listener.receive().ok()) else {
            return; // no listener, or the call went away before we looked
        };
        let nr = call.data.nr as u32;
        if nr == sys::EXIT_GROUP {
            // The status is the call's argument, as the kernel copied it: the exit
            // status `wait4` will give (`exit_group` cannot fail, and its code is fixed
            // once it proceeds). No thread runs the program's code after it. Only the
            // interpreter's main thread counts: a process it started (where the policy
            // allows them) exits with its own status, and another thread's exit is
            // left to `wait4`.
            if call.pid == self.child.pid {
                self.exiting = Some((call.data.args[0] & 0xff) as i32);
            }
            if let Some(listener) = self.listener() {
                let _ = listener.proceed(call.id);
            }
            return;
        }
        let fd = call.data.args[0] as u32;
        if nr == sys::READ && CHANNEL.contains(&fd) {
            if call.pid != self.child.pid {
                self.refuse(call.id);
                self.send(FromBox::Refused {
                    syscall: "read".into(),
                    detail: format!(
                        "of the call channel by thread {}: only the interpreter's main thread \
                         takes the next call",
                        call.pid
                    ),
                });
                return;
            }
            self.waiting = Some(call.id);
            if fd != READY {
                self.finish_call((fd - CHANNEL.start) as i32);
            }
            self.deliver();
            return;
        }
        // Read what the call names while its thread still waits for the answer: once
        // refused, the program runs on and may free or reuse that memory (a report then
        // named `dbin/sh` for `/bin/sh`). The read counts only if the call still waits
        // after it (seccomp_unotify(2): the thread may have been interrupted meanwhile).
        let (syscall, mut detail) = describe(&call);
        if !self
            .listener()
            .is_some_and(|listener| listener.still_waiting(call.id))
        {
            detail = format!("{detail} (as read after the call went away)");
        }
        self.refuse(call.id);
        self.send(FromBox::Refused { syscall, detail });
    }

    /// Whether a notification waits to be received, without waiting for one.
    fn pending_notification(&self) -> bool {
        let Some(listener) = self.listener() else {
            return false;
        };
        let mut fds = [watch(listener.fd)];
        poll(&mut fds, Some(Duration::ZERO)).is_ok() && fds[0].revents & POLLIN != 0
    }

    fn listener(&self) -> Option<&notify::Listener> {
        self.child.listener.as_ref()
    }

    fn refuse(&self, id: u64) {
        if let Some(listener) = self.listener() {
            let _ = listener.refuse(id, Errno::EPERM.0);
        }
    }

    /// A session call is done: its output so far, its files, its end.
    fn finish_call(&mut self, status: i32) {
        let Some(flight) = self.flight.take() else {
            return;
        };
        self.drain_now();
        self.send_files(&flight);
        let oom = oom_kills() > flight.oom_kills;
        self.send(FromBox::End {
            status: Status::Finished(status),
            oom,
            gone: false,
        });
    }

    fn send_files(&mut self, flight: &Flight) {
        let root = Path::new(&self.settings.workdir).to_path_buf();
        let figures = files::take_figures(Path::new(&self.settings.figures));
        let mut after = if self.settings.files {
            files::listing(&root, &self.settings.skip)
        } else {
            BTreeMap::new()
        };
        if let Some(main) = &flight.main_file {
            after.remove(main);
        }
        let caps = Caps {
            max_files: self.settings.max_files,
            max_file_size: self.settings.max_file_size,
            max_total_size: self.settings.max_total_size,
        };
        let (entries, unlisted) = files::collect(&root, &flight.before, &after, figures, caps);
        if !entries.is_empty() || unlisted > 0 {
            self.send(FromBox::Files { entries, unlisted });
        }
    }

    /// Reads what is in the output pipes right now, without waiting.
    fn drain_now(&mut self) {
        while self.stdout_open && self.pass_output(true) {}
        while self.stderr_open && self.pass_output(false) {}
        while self.records_open && self.pass_records() {}
    }

    /// Passes one chunk of the interpreter's stdout (or stderr) on; false when there
    /// was none.
    fn pass_output(&mut self, stdout: bool) -> bool {
        let fd = if stdout {
            self.child.stdout
        } else {
            self.child.stderr
        };
        let mut chunk = vec![0u8; 64 * 1024];
        match read(fd, &mut chunk) {
            Ok(0) => {
                self.close_output(stdout);
                false
            }
            Ok(n) => {
                chunk.truncate(n);
                self.send(if stdout {
                    FromBox::Stdout(chunk)
                } else {
                    FromBox::Stderr(chunk)
                });
                true
            }
            Err(Errno::EAGAIN | Errno::EINTR) => false,
            Err(_) => {
                self.close_output(stdout);
                false
            }
        }
    }

    fn close_output(&mut self, stdout: bool) {
        if stdout {
            self.stdout_open = false;
        } else {
            self.stderr_open = false;
        }
    }

    /// Passes the whole records the hooks wrote on; false when there were none.
    fn pass_records(&mut self) -> bool {
        let mut chunk = vec![0u8; 64 * 1024];
        match read(self.child.explain, &mut chunk) {
            Ok(0) => {
                self.records_open = false;
                false
            }
            Ok(n) => {
                self.records.extend_from_slice(&chunk[..n]);
                while let Some(end) = self.records.iter().position(|&b| b == b'\n') {
                    let line: Vec<u8> = self.records.drain(..=end).collect();
                    let line = &line[..line.len() - 1];
                    match line.strip_prefix(DONE_RECORD) {
                        Some(status) if self.child.listener.is_none() => {
                            let status =
                                String::from_utf8_lossy(status).trim().parse().unwrap_or(1);
                            self.finish_call(status);
                        }
                        _ => self.send(FromBox::Explained(line.to_vec())),
                    }
                }
                // A record is a line: one without an end is cut at 64 KiB.
                if self.records.len() > 64 * 1024 {
                    let line = std::mem::take(&mut self.records);
                    self.send(FromBox::Explained(line));
                }
                true
            }
            Err(Errno::EAGAIN | Errno::EINTR) => false,
            Err(_) => {
                self.records_open = false;
                false
            }
        }
    }

    /// The interpreter is gone (or going: `known`, from its `exit_group`, with its
    /// output all read): the rest of its output, its files, how it ended.
    fn on_exit(mut self, known: Option<Status>) -> i32 {
        if known.is_some() {
            // Calls its other threads made before `exit_group` stopped them.
            while self.pending_notification() {
                self.on_notification();
            }
        }
        let status = known.unwrap_or_else(|| wait(self.child.pid));
        let deadline = Instant::now() + EXIT_GRACE;
        while self.stdout_open || self.stderr_open || self.records_open {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            let mut fds = [
                watch(if self.stdout_open {
                    self.child.stdout
                } else {
                    -1
                }),
                watch(if self.stderr_open {
                    self.child.stderr
                } else {
                    -1
                }),
                watch(if self.records_open {
                    self.child.explain
                } else {
                    -1
                }),
            ];
            if poll(&mut fds, Some(left)).is_err() {
                break;
            }
            let ready = |i: usize| fds[i].revents & (POLLIN | POLLHUP | POLLERR) != 0;
            if ready(0) {
                self.pass_output(true);
            }
            if ready(1) {
                self.pass_output(false);
            }
            if ready(2) {
                self.pass_records();
            }
            if !fds.iter().any(|f| f.revents != 0) {
                break;
            }
        }
        let flight = self.flight.take();
        let oom_before = flight.as_ref().map_or(0, |f| f.oom_kills);
        if let Some(flight) = &flight {
            self.send_files(flight);
        }
        let oom = oom_kills() > oom_before;
        self.send(FromBox::End {
            status,
            oom,
            gone: true,
        });
        0
    }
}

/// What the interpreter's bootstrap reads: one line of JSON (`file`, `call`,
/// `awaits`, `env`), then the code.
fn message(workdir: &str, program: &Program) -> Vec<u8> {
    let file = if program.file.is_empty() {
        String::new()
    } else {
        format!("{workdir}/{}", program.file)
    };
    let env: Vec<String> = program
        .env
        .iter()
        .map(|(name, value)| format!("{}:{}", json_string(name), json_string(value)))
        .collect();
    let mut bytes = format!(
        "{{\"file\":{},\"call\":{},\"awaits\":{},\"env\":{{{}}}}}\n",
        json_string(&file),
        program.call,
        program.awaits,
        env.join(",")
    )
    .into_bytes();
    bytes.extend_from_slice(&program.code);
    bytes
}

/// `text` as a JSON string.
pub fn json_string(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// A refused call in words: which, and with what.
fn describe(call: &Notification) -> (String, String) {
    let args = call.data.args;
    let nr = call.data.nr as u32;
    if nr == sys::EXECVE || nr == sys::EXECVEAT {
        let path = if nr == sys::EXECVE { args[0] } else { args[1] };
        let name = if nr == sys::EXECVE {
            "execve"
        } else {
            "execveat"
        };
        return (name.into(), notify::read_string(call.pid, path, 512));
    }
    if nr == sys::CLONE {
        return (
            "clone".into(),
            format!("a new process (flags {:#x})", args[0]),
        );
    }
    if nr == sys::FORK || nr == sys::VFORK {
        let name = if nr == sys::FORK { "fork" } else { "vfork" };
        return (name.into(), "a new process".into());
    }
    (format!("syscall {nr}"), String::new())
}

/// The OOM killer's count for the box's memory cgroup (v2, else v1).
fn oom_kills() -> u64 {
    for file in [
        "/sys/fs/cgroup/memory.events",
        "/sys/fs/cgroup/memory/memory.oom_control",
    ] {
        if let Ok(text) = std::fs::read_to_string(file) {
            return text
                .lines()
                .filter_map(|line| line.strip_prefix("oom_kill "))
                .filter_map(|n| n.trim().parse::<u64>().ok())
                .sum();
        }
    }
    0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_kernel_without_landlock_refuses_what_needs_it_and_only_that() {
        let settings = |protect: bool, read: bool| Settings {
            protect,
            readable: read.then(|| vec!["/usr".to_string()]),
            ..Settings::default()
        };
        // With Landlock, everything can be kept.
        assert_eq!(missing_layer(&settings(true, true), Some(1), true), None);
        // Without it: the filesystem promise, where /proc/self/mem is writable.
        let refused = missing_layer(&settings(true, false), None, true).unwrap();
        assert!(refused.contains("no Landlock"), "{refused}");
        // gVisor keeps /proc closed itself: the promise holds there.
        assert_eq!(missing_layer(&settings(true, false), None, false), None);
        // A read limit needs Landlock everywhere.
        assert!(missing_layer(&settings(false, true), None, false).is_some());
        // Nothing asked, nothing missing.
        assert_eq!(missing_layer(&settings(false, false), None, true), None);
    }

    #[test]
    fn the_bootstraps_message_is_a_json_line_then_the_code() {
        let program = Program {
            file: "main.py".into(),
            call: 0,
            env: vec![("A\"".into(), "x\ny".into())],
            code: b"print(1)\n".to_vec(),
            ..Program::default()
        };
        let bytes = message("/sandbox", &program);
        let text = String::from_utf8(bytes).unwrap();
        let (header, code) = text.split_once('\n').unwrap();
        assert_eq!(
            header,
            r#"{"file":"/sandbox/main.py","call":0,"awaits":false,"env":{"A\"":"x\u000ay"}}"#
        );
        assert_eq!(code, "print(1)\n");
    }
}
