//! Under a network allowlist the box has no network: its one way out is the egress
//! proxy's Unix socket, which this relays to from the loopback port `HTTP_PROXY` names.
//! It runs in a process of its own, forked by the supervisor before the interpreter
//! starts (so none of the interpreter's limits apply to it, and the program cannot
//! reach its memory: it is not dumpable), and dies with the supervisor.

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::os::unix::net::UnixStream;

const PR_SET_PDEATHSIG: usize = 1;
const SIGKILL: usize = 9;

/// Forks the relay process; returns in the supervisor once the port listens.
pub fn start(port: u16, socket: &str) -> Result<(), String> {
    // Bound before the fork, so the interpreter never starts before the port is there.
    let listener =
        TcpListener::bind(("127.0.0.1", port)).map_err(|e| format!("relay port {port}: {e}"))?;
    // SAFETY: a fork of a process with one thread (the supervisor, before it starts
    // anything else); the child runs ordinary Rust from here.
    let forked = unsafe { crate::sys::call(crate::sys::CLONE, &[17, 0, 0, 0, 0]) }
        .map_err(|e| format!("fork: {e}"))?;
    if forked != 0 {
        return Ok(()); // the supervisor: the child holds the listener now
    }
    // SAFETY: plain system calls with constant arguments.
    unsafe {
        let _ = crate::sys::call(crate::sys::PRCTL, &[PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0]);
    }
    // The server's streams are the supervisor's alone.
    if let Ok(null) = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/null")
    {
        use std::os::fd::AsRawFd;
        for fd in [0usize, 1] {
            // SAFETY: dup3 of an fd of ours over our own stdin and stdout.
            let _ =
                unsafe { crate::sys::call(crate::sys::DUP3, &[null.as_raw_fd() as usize, fd, 0]) };
        }
    }
    serve(listener, socket)
}

fn serve(listener: TcpListener, socket: &str) -> ! {
    for client in listener.incoming() {
        let Ok(client) = client else { continue };
        let socket = socket.to_string();
        std::thread::spawn(move || {
            if let Ok(upstream) = UnixStream::connect(&socket) {
                relay(client, upstream);
            }
        });
    }
    std::process::exit(0)
}

fn relay(client: TcpStream, upstream: UnixStream) {
    let (Ok(mut client_read), Ok(mut upstream_write)) = (client.try_clone(), upstream.try_clone())
    else {
        return;
    };
    let back = std::thread::spawn(move || {
        let mut upstream = upstream;
        let mut client = client;
        pump(&mut upstream, &mut client);
        let _ = client.shutdown(Shutdown::Write);
    });
    pump(&mut client_read, &mut upstream_write);
    let _ = upstream_write.shutdown(Shutdown::Write);
    let _ = back.join();
}

fn pump(from: &mut impl Read, to: &mut impl Write) {
    let mut buffer = [0u8; 64 * 1024];
    loop {
        match from.read(&mut buffer) {
            Ok(0) | Err(_) => return,
            Ok(n) => {
                if to.write_all(&buffer[..n]).is_err() {
                    return;
                }
            }
        }
    }
}
