//! For the HTTP server tests: the binary started as `serve --http 127.0.0.1:0`, its
//! address read from its log; a raw HTTP/1.1 client that writes exactly the request a
//! test spells out (any Host, any Origin, any body), so that attacks are made as an
//! attacker would make them; and a small static HTTP server for the documents an
//! OAuth issuer publishes.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How long the server may take to say it listens (a liveness bound).
const START_LIMIT: Duration = Duration::from_secs(60);

/// The binary serving HTTP.
pub struct HttpServer {
    child: Option<Child>,
    pub port: u16,
    /// `http://127.0.0.1:PORT/mcp` (or what the log names).
    pub url: String,
    log_path: PathBuf,
}

impl HttpServer {
    /// `serve --http 127.0.0.1:0 ARGS…` (policy and all in `args`), started.
    pub fn start(args: &[&str]) -> HttpServer {
        HttpServer::start_with(args, &[])
    }

    /// Like [`HttpServer::start`], with environment variables.
    pub fn start_with(args: &[&str], env: &[(&str, &str)]) -> HttpServer {
        match HttpServer::try_start(args, env) {
            Ok(server) => server,
            Err((status, log)) => panic!("the server did not start ({status:?}):\n{log}"),
        }
    }

    /// Starts it; when it exits instead of listening, its status and log.
    pub fn try_start(
        args: &[&str],
        env: &[(&str, &str)],
    ) -> Result<HttpServer, (Option<ExitStatus>, String)> {
        let dir = super::scratch(&format!("http-server-{}", next()));
        let log_path = dir.join("stderr");
        let mut command = super::binary();
        command
            .args(["serve", "--http", "127.0.0.1:0"])
            .args(args)
            .env("RUST_LOG", "warn,code_sandbox_mcp=debug")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log_path).unwrap());
        for (name, value) in env {
            command.env(name, value);
        }
        let mut child = command.spawn().expect("the binary starts");
        let started = Instant::now();
        loop {
            let log = std::fs::read_to_string(&log_path).unwrap_or_default();
            if let Some(url) = log
                .lines()
                .find_map(|line| line.split("listening on ").nth(1))
                .and_then(|rest| rest.split_whitespace().next())
            {
                // `listening on URL` or, behind --public-url, `… (bound to ADDRESS)`.
                let bound = log
                    .lines()
                    .find_map(|line| line.split("(bound to ").nth(1))
                    .and_then(|rest| rest.split(')').next())
                    .unwrap_or(url);
                let port = bound
                    .rsplit(':')
                    .next()
                    .and_then(|p| p.trim_end_matches("/mcp").parse().ok())
                    .expect("a port in the address");
                return Ok(HttpServer {
                    child: Some(child),
                    port,
                    url: url.to_string(),
                    log_path,
                });
            }
            if let Ok(Some(status)) = child.try_wait() {
                let log = std::fs::read_to_string(&log_path).unwrap_or_default();
                return Err((Some(status), log));
            }
            if started.elapsed() > START_LIMIT {
                let _ = child.kill();
                let _ = child.wait();
                return Err((None, log));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Everything the server logged so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log_path).unwrap_or_default()
    }

    /// Sends `signal` (`HUP`, `TERM`, …) to the server.
    pub fn signal(&self, signal: &str) {
        let pid = self.child.as_ref().expect("running").id();
        let status = Command::new("kill")
            .arg(format!("-{signal}"))
            .arg(pid.to_string())
            .status()
            .expect("kill");
        assert!(status.success());
    }

    /// Waits (up to 30 s) until the log contains `text`.
    pub fn wait_for_log(&self, text: &str) -> String {
        let started = Instant::now();
        loop {
            let log = self.log();
            if log.contains(text) || started.elapsed() > Duration::from_secs(30) {
                return log;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// SIGTERM, then waits for the exit (killing it past a minute); the status and log.
    pub fn stop(mut self) -> (ExitStatus, String) {
        let status = self.terminate();
        (status, self.log())
    }

    fn terminate(&mut self) -> ExitStatus {
        let mut child = self.child.take().expect("running");
        let _ = Command::new("kill")
            .arg("-TERM")
            .arg(child.id().to_string())
            .status();
        let started = Instant::now();
        loop {
            if let Ok(Some(status)) = child.try_wait() {
                return status;
            }
            if started.elapsed() > Duration::from_secs(60) {
                let _ = child.kill();
                return child.wait().unwrap();
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        if self.child.is_some() {
            self.terminate();
        }
    }
}

fn next() -> usize {
    static COUNTER: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    COUNTER.fetch_add(1, std::sync::atomic::Ordering::SeqCst)
}

/// An HTTP answer.
#[derive(Debug, Clone)]
pub struct Reply {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    /// The body, de-chunked.
    pub body: String,
}

impl Reply {
    /// The first header `name` (any case).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// The JSON-RPC messages of an SSE (or JSON) body.
    pub fn messages(&self) -> Vec<serde_json::Value> {
        if let Ok(value) = serde_json::from_str(&self.body) {
            return vec![value];
        }
        self.body
            .lines()
            .filter_map(|line| line.strip_prefix("data:"))
            .filter_map(|data| serde_json::from_str(data.trim()).ok())
            .collect()
    }
}

/// A request as written: `METHOD PATH HTTP/1.1`, then `headers` in order (nothing
/// added but `Content-Length` when there is a body and `Connection: close`).
pub fn raw(port: u16, method: &str, path: &str, headers: &[(&str, &str)], body: &[u8]) -> Reply {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    stream
        .set_read_timeout(Some(Duration::from_secs(120)))
        .unwrap();
    let mut head = format!("{method} {path} HTTP/1.1\r\n");
    for (name, value) in headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    if !body.is_empty() || method == "POST" {
        head.push_str(&format!("Content-Length: {}\r\n", body.len()));
    }
    head.push_str("Connection: close\r\n\r\n");
    stream.write_all(head.as_bytes()).unwrap();
    // A server that answers before reading a huge body may close early: that is its
    // answer, not a failure to send.
    let _ = stream.write_all(body);
    let mut bytes = Vec::new();
    let _ = stream.read_to_end(&mut bytes);
    parse(&bytes)
}

/// A POST of the JSON `message` to /mcp with the headers MCP clients send, plus
/// `extra` (Authorization, Mcp-Session-Id, …).
pub fn post_mcp(port: u16, extra: &[(&str, &str)], message: &serde_json::Value) -> Reply {
    let host = format!("127.0.0.1:{port}");
    let mut headers = vec![
        ("Host", host.as_str()),
        ("Content-Type", "application/json"),
        ("Accept", "application/json, text/event-stream"),
    ];
    headers.extend_from_slice(extra);
    raw(
        port,
        "POST",
        "/mcp",
        &headers,
        message.to_string().as_bytes(),
    )
}

/// An `initialize` request.
pub fn initialize_message() -> serde_json::Value {
    serde_json::json!({
        "jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "raw-test", "version": "0"}
        }
    })
}

/// Initializes a session with `extra` headers; its `Mcp-Session-Id`, after the
/// `initialized` notification.
pub fn open_session(port: u16, extra: &[(&str, &str)]) -> String {
    let reply = post_mcp(port, extra, &initialize_message());
    assert_eq!(reply.status, 200, "{reply:?}");
    let id = reply
        .header("mcp-session-id")
        .expect("a session id")
        .to_string();
    let mut headers = extra.to_vec();
    headers.push(("Mcp-Session-Id", &id));
    headers.push(("MCP-Protocol-Version", "2025-06-18"));
    let notified = post_mcp(
        port,
        &headers,
        &serde_json::json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
    );
    assert_eq!(notified.status, 202, "{notified:?}");
    id
}

fn parse(bytes: &[u8]) -> Reply {
    let text = String::from_utf8_lossy(bytes);
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let mut lines = head.lines();
    let status = lines
        .next()
        .and_then(|line| line.split_whitespace().nth(1))
        .and_then(|code| code.parse().ok())
        .unwrap_or(0);
    let headers: Vec<(String, String)> = lines
        .filter_map(|line| line.split_once(':'))
        .map(|(n, v)| (n.trim().to_string(), v.trim().to_string()))
        .collect();
    let chunked = headers.iter().any(|(n, v)| {
        n.eq_ignore_ascii_case("transfer-encoding") && v.eq_ignore_ascii_case("chunked")
    });
    let body = if chunked {
        dechunk(body)
    } else {
        body.to_string()
    };
    Reply {
        status,
        headers,
        body,
    }
}

fn dechunk(mut text: &str) -> String {
    let mut out = String::new();
    while let Some((size, rest)) = text.split_once("\r\n") {
        let Ok(size) = usize::from_str_radix(size.trim(), 16) else {
            break;
        };
        if size == 0 || rest.len() < size {
            out.push_str(&rest[..rest.len().min(size)]);
            break;
        }
        out.push_str(&rest[..size]);
        text = rest[size..].strip_prefix("\r\n").unwrap_or(&rest[size..]);
    }
    out
}

/// A tiny HTTP server answering GETs of fixed paths with fixed JSON documents,
/// changeable while it runs; it counts the requests each path got.
#[derive(Clone)]
pub struct StaticServer {
    pub port: u16,
    routes: Arc<Mutex<Vec<(String, String)>>>,
    hits: Arc<Mutex<Vec<String>>>,
}

impl StaticServer {
    pub fn start(routes: Vec<(String, String)>) -> StaticServer {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let server = StaticServer {
            port,
            routes: Arc::new(Mutex::new(routes)),
            hits: Arc::new(Mutex::new(Vec::new())),
        };
        let shared = server.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                shared.answer(stream);
            }
        });
        server
    }

    /// Replaces the document at `path`.
    pub fn set(&self, path: &str, body: String) {
        let mut routes = self.routes.lock().unwrap();
        routes.retain(|(p, _)| p != path);
        routes.push((path.to_string(), body));
    }

    /// How many requests `path` got.
    pub fn hits(&self, path: &str) -> usize {
        self.hits
            .lock()
            .unwrap()
            .iter()
            .filter(|p| *p == path)
            .count()
    }

    fn answer(&self, mut stream: TcpStream) {
        let _ = stream.set_read_timeout(Some(Duration::from_secs(5)));
        let mut buffer = [0u8; 8192];
        let n = stream.read(&mut buffer).unwrap_or(0);
        let request = String::from_utf8_lossy(&buffer[..n]);
        let path = request.split_whitespace().nth(1).unwrap_or("/").to_string();
        self.hits.lock().unwrap().push(path.clone());
        let found = self
            .routes
            .lock()
            .unwrap()
            .iter()
            .find(|(p, _)| *p == path)
            .map(|(_, body)| body.clone());
        let response = match found {
            Some(body) => format!(
                "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            ),
            None => "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n".to_string(),
        };
        let _ = stream.write_all(response.as_bytes());
    }
}
