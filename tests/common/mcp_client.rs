//! For the MCP tests: a minimal JSON-RPC line client, and a test image of our own so
//! that container assertions see only this test's containers, whatever else runs at
//! the same time on the machine.

use code_sandbox_mcp::mcp::{self, CodeSandboxServer, ServeEnd};
use code_sandbox_mcp::policy::Policy;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;
use tokio::io::DuplexStream;
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader, Lines};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// The protocol version this client asks for: one every MCP server of 2025 speaks.
pub const PROTOCOL_VERSION: &str = "2025-06-18";

/// How long a test waits for one message before it gives up (a liveness bound, not a
/// performance assertion: a cold Docker start can be slow on a busy machine).
pub const READ_LIMIT: Duration = Duration::from_secs(180);

/// A JSON-RPC client writing and reading one message per line, as MCP's stdio does.
pub struct RpcClient<R, W> {
    lines: Lines<BufReader<R>>,
    writer: Option<W>,
    next_id: u64,
    /// Every notification received so far, in order.
    pub notifications: Vec<Value>,
    /// Responses that arrived while waiting for another one.
    pending: Vec<Value>,
}

impl<R: AsyncRead + Unpin, W: AsyncWrite + Unpin> RpcClient<R, W> {
    pub fn new(reader: R, writer: W) -> Self {
        RpcClient {
            lines: BufReader::new(reader).lines(),
            writer: Some(writer),
            next_id: 1,
            notifications: Vec::new(),
            pending: Vec::new(),
        }
    }

    /// Writes one raw line (a newline is added).
    pub async fn send_line(&mut self, line: &str) {
        let writer = self.writer.as_mut().expect("input already closed");
        writer
            .write_all(line.as_bytes())
            .await
            .expect("write to the server");
        writer.write_all(b"\n").await.expect("write to the server");
        writer.flush().await.expect("flush to the server");
    }

    /// Writes raw bytes, with no newline added.
    pub async fn send_raw(&mut self, bytes: &[u8]) {
        let writer = self.writer.as_mut().expect("input already closed");
        writer.write_all(bytes).await.expect("write to the server");
        writer.flush().await.expect("flush to the server");
    }

    /// The next line from the server as it is (a batch's answer is an array).
    pub async fn next_raw_line(&mut self) -> Option<String> {
        tokio::time::timeout(READ_LIMIT, self.lines.next_line())
            .await
            .expect("the server answered nothing in time")
            .expect("read from the server")
    }

    pub async fn send(&mut self, message: &Value) {
        self.send_line(&message.to_string()).await;
    }

    /// Closes the server's input (stdin EOF).
    pub async fn close_input(&mut self) {
        if let Some(mut writer) = self.writer.take() {
            let _ = writer.shutdown().await;
        }
    }

    /// Sends a request and returns its id without waiting for the answer.
    pub async fn start_request(&mut self, method: &str, params: Value) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
            .await;
        id
    }

    /// The next message from the server, checked to be JSON-RPC 2.0.
    pub async fn next_message(&mut self) -> Option<Value> {
        let line = tokio::time::timeout(READ_LIMIT, self.lines.next_line())
            .await
            .expect("the server answered nothing in time")
            .expect("read from the server")?;
        let message: Value = serde_json::from_str(&line)
            .unwrap_or_else(|e| panic!("not JSON on the MCP stream ({e}): {line}"));
        assert_eq!(message["jsonrpc"], "2.0", "not JSON-RPC 2.0: {line}");
        Some(message)
    }

    /// Waits for the response to request `id`, keeping notifications and other responses.
    pub async fn response(&mut self, id: u64) -> Value {
        if let Some(index) = self.pending.iter().position(|m| m["id"] == id) {
            return self.pending.remove(index);
        }
        loop {
            let message = self
                .next_message()
                .await
                .expect("the server closed its output before answering");
            if message.get("id").is_some() && message.get("method").is_none() {
                if message["id"] == id {
                    return message;
                }
                self.pending.push(message);
            } else if message.get("id").is_none() {
                self.notifications.push(message);
            } else {
                panic!("unexpected request from the server: {message}");
            }
        }
    }

    /// Starts a tool call that asks for progress under `token`; returns its id.
    pub async fn start_call_with_progress(
        &mut self,
        name: &str,
        arguments: Value,
        token: &str,
    ) -> u64 {
        let params =
            json!({"name": name, "arguments": arguments, "_meta": {"progressToken": token}});
        self.start_request("tools/call", params).await
    }

    /// Whether the response to request `id` has arrived (and is waiting to be read).
    pub fn answered(&self, id: u64) -> bool {
        self.pending.iter().any(|m| m["id"] == id)
    }

    /// Waits for a notification matching `wanted`, reading past everything else.
    pub async fn notification(&mut self, wanted: impl Fn(&Value) -> bool) -> Value {
        if let Some(found) = self.notifications.iter().find(|n| wanted(n)) {
            return found.clone();
        }
        loop {
            let message = self
                .next_message()
                .await
                .expect("the server closed its output");
            if message.get("id").is_none() {
                self.notifications.push(message.clone());
                if wanted(&message) {
                    return message;
                }
            } else {
                self.pending.push(message);
            }
        }
    }

    pub async fn request(&mut self, method: &str, params: Value) -> Value {
        let id = self.start_request(method, params).await;
        self.response(id).await
    }

    /// The MCP handshake; returns the `initialize` result.
    pub async fn initialize(&mut self) -> Value {
        let response = self
            .request(
                "initialize",
                json!({
                    "protocolVersion": PROTOCOL_VERSION,
                    "capabilities": {},
                    "clientInfo": {"name": "code-sandbox-mcp-tests", "version": "0"}
                }),
            )
            .await;
        self.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
            .await;
        response["result"].clone()
    }

    /// Calls a tool and returns its `result` (panics on a JSON-RPC error).
    pub async fn call_tool(&mut self, name: &str, arguments: Value) -> Value {
        let response = self
            .request("tools/call", json!({"name": name, "arguments": arguments}))
            .await;
        assert!(
            response.get("error").is_none(),
            "tools/call {name} failed: {response}"
        );
        response["result"].clone()
    }
}

/// The text of a tool result's first content block.
pub fn text_of(result: &Value) -> String {
    result["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

/// An image tag of its own (the offline image, tagged anew) and a policy that uses it,
/// so that `containers()` lists only the containers this test's server created.
pub struct TestImage {
    pub tag: String,
    pub policy_path: PathBuf,
}

impl TestImage {
    /// A new tag of the offline image and a policy; `pool_size` is the policy's warm
    /// pool size.
    pub fn new(name: &str, pool_size: usize) -> TestImage {
        TestImage::of("code-sandbox-mcp-runtime:trixie", name, pool_size)
    }

    /// A new tag of `base` and a policy for it.
    pub fn of(base: &str, name: &str, pool_size: usize) -> TestImage {
        static COUNTER: AtomicUsize = AtomicUsize::new(0);
        let unique = format!(
            "{name}-{}-{}",
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::SeqCst)
        );
        let tag = format!("code-sandbox-mcp-runtime:test-{unique}");
        let status = Command::new("docker")
            .args(["tag", base, &tag])
            .status()
            .expect("run docker tag");
        assert!(status.success(), "docker tag {tag} failed");
        let dir = std::env::temp_dir()
            .join("code-sandbox-mcp-tests")
            .join(&unique);
        std::fs::create_dir_all(&dir).expect("create the policy directory");
        let policy_path = dir.join("policy.yaml");
        std::fs::write(
            &policy_path,
            format!(
                "version: 1\nextends: default\nimages:\n  python: \"{tag}\"\n  javascript: \"{tag}\"\n\
                 pool:\n  size: {pool_size}\n"
            ),
        )
        .expect("write the policy");
        TestImage { tag, policy_path }
    }

    /// Containers created from this tag, running or not.
    pub fn containers(&self) -> Vec<String> {
        let output = Command::new("docker")
            .args(["ps", "-a", "--no-trunc", "--format", "{{.ID}}\t{{.Image}}"])
            .output()
            .expect("docker ps");
        String::from_utf8_lossy(&output.stdout)
            .lines()
            .filter_map(|line| line.split_once('\t'))
            .filter(|(_, image)| *image == self.tag)
            .map(|(id, _)| id.to_string())
            .collect()
    }

    /// Waits until `wanted(containers)` holds, for at most `READ_LIMIT`.
    pub async fn wait_for_containers(&self, wanted: impl Fn(&[String]) -> bool) -> Vec<String> {
        let deadline = tokio::time::Instant::now() + READ_LIMIT;
        loop {
            let containers = self.containers();
            if wanted(&containers) || tokio::time::Instant::now() > deadline {
                return containers;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
}

impl Drop for TestImage {
    fn drop(&mut self) {
        // A box of this tag may still be on its way out (removal runs in the
        // background), and the engine refuses to untag an image a container names: wait
        // a little, then untag anyway (the image itself keeps its other tag, the base's).
        let untagged = |force: bool| {
            let mut rmi = Command::new("docker");
            rmi.arg("rmi");
            if force {
                rmi.arg("--force");
            }
            rmi.arg(&self.tag).output().is_ok_and(|output| {
                output.status.success()
                    || String::from_utf8_lossy(&output.stderr).contains("No such image")
            })
        };
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while !untagged(false) && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(250));
        }
        let _ = untagged(true);
        if let Some(dir) = self.policy_path.parent() {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}

pub type Client = RpcClient<DuplexStream, DuplexStream>;

/// A server for the policy at `path`, served in this process over in-memory pipes.
pub struct InProcess {
    pub client: Client,
    pub stop: CancellationToken,
    pub served: JoinHandle<ServeEnd>,
}

impl InProcess {
    pub async fn start(policy_path: &Path, env: Vec<(String, String)>) -> InProcess {
        let policy = Policy::discover(Some(policy_path.to_str().unwrap()), Path::new("."))
            .expect("load the test policy");
        InProcess::start_with(policy, env).await
    }

    pub async fn start_with(policy: Policy, env: Vec<(String, String)>) -> InProcess {
        let (client_writer, server_reader) = tokio::io::duplex(1 << 20);
        let (server_writer, client_reader) = tokio::io::duplex(1 << 20);
        let stop = CancellationToken::new();
        let server = CodeSandboxServer::new(policy, env);
        let served = tokio::spawn(mcp::serve(
            server,
            server_reader,
            server_writer,
            stop.clone(),
        ));
        let mut client = RpcClient::new(client_reader, client_writer);
        let info = client.initialize().await;
        assert_eq!(info["serverInfo"]["name"], "code-sandbox-mcp", "{info}");
        InProcess {
            client,
            stop,
            served,
        }
    }

    /// Closes the input as a client going away does, and waits for the server to finish.
    pub async fn close(mut self) -> ServeEnd {
        self.client.close_input().await;
        self.served.await.expect("the server task")
    }
}

/// The structured content of a tool result.
pub fn structured(result: &Value) -> &Value {
    assert!(
        result["structuredContent"].is_object(),
        "no structured content: {result}"
    );
    &result["structuredContent"]
}

pub fn is_error(result: &Value) -> bool {
    result["isError"] == true
}
