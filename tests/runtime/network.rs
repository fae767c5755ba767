//! Network by name: a policy's `network.allow`, enforced by the egress proxy that a
//! container with no network reaches through a socket. Only hosts of the test's own: an
//! HTTP server this test runs on the host's loopback (reached as `localhost` through
//! the proxy), one in a container on the engine's default bridge, and a listener on the
//! host's own addresses (neither of which a direct connection may reach).

use crate::common;
use crate::common::mcp_client::{structured, text_of, InProcess, TestImage};
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

crate::common::harness::tests! {
    multi_thread(2) only_the_allowed_host_answers_and_every_refusal_is_listed needs common::DOCKER;
}

/// An HTTP server on the host's loopback, answering `hello <path>`.
pub(crate) async fn test_server() -> u16 {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut buffer = vec![0u8; 4096];
                let read = stream.read(&mut buffer).await.unwrap_or(0);
                let request = String::from_utf8_lossy(&buffer[..read]).to_string();
                let path = request.split(' ').nth(1).unwrap_or("?").to_string();
                let body = format!("hello {path}");
                let _ = stream
                    .write_all(
                        format!(
                            "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                            body.len()
                        )
                        .as_bytes(),
                    )
                    .await;
            });
        }
    });
    port
}

/// An HTTP server in a container on the engine's default bridge, removed when dropped;
/// checked reachable from another container there before it is used.
pub(crate) struct OtherNetworkServer {
    name: String,
    pub(crate) address: String,
}

impl OtherNetworkServer {
    pub(crate) fn start() -> OtherNetworkServer {
        OtherNetworkServer::named("elsewhere")
    }

    /// One of several, told apart by `which`.
    pub(crate) fn named(which: &str) -> OtherNetworkServer {
        let name = format!("code-sandbox-mcp-test-{which}-{}", std::process::id());
        let docker = |args: &[&str]| {
            let output = std::process::Command::new("docker")
                .args(args)
                .output()
                .unwrap();
            String::from_utf8_lossy(&output.stdout).trim().to_string()
        };
        docker(&["rm", "-f", &name]);
        docker(&[
            "run",
            "-d",
            "--name",
            &name,
            "--network",
            "bridge",
            common::LOCAL_IMAGE,
            "python3",
            "-m",
            "http.server",
            "8000",
        ]);
        let address = docker(&[
            "inspect",
            "--format",
            "{{.NetworkSettings.IPAddress}}",
            &name,
        ]);
        let probe = format!(
            "import socket, time\nfor _ in range(50):\n    try:\n        socket.create_connection(('{address}', 8000), timeout=1); print('ok'); break\n    except OSError:\n        time.sleep(0.1)\n"
        );
        let reached = docker(&[
            "run",
            "--rm",
            "--network",
            "bridge",
            common::LOCAL_IMAGE,
            "python3",
            "-c",
            &probe,
        ]);
        assert_eq!(reached, "ok", "the server is reachable on its own network");
        OtherNetworkServer { name, address }
    }
}

impl Drop for OtherNetworkServer {
    fn drop(&mut self) {
        let _ = std::process::Command::new("docker")
            .args(["rm", "-f", &self.name])
            .output();
    }
}

async fn only_the_allowed_host_answers_and_every_refusal_is_listed() {
    let port = test_server().await;
    let other = port.checked_add(1).unwrap_or(1);
    // A server of the test's own on an ordinary network: reachable from containers
    // there, and not from the sandbox, whose connections that ignore the proxy go
    // nowhere.
    let elsewhere = OtherNetworkServer::start();
    let elsewhere = elsewhere.address.clone();
    // And a service of the host's own, on every host address: what a program ignoring
    // the proxy might try next.
    let host_service = std::net::TcpListener::bind("0.0.0.0:0").unwrap();
    let host_port = host_service.local_addr().unwrap().port();
    let gateway = default_bridge_gateway();
    let image = TestImage::new("allowlist", 0);
    let text = std::fs::read_to_string(&image.policy_path).unwrap();
    std::fs::write(
        &image.policy_path,
        format!("{text}network:\n  allow: [\"localhost:{port}\"]\n"),
    )
    .unwrap();
    let mut server = InProcess::start(&image.policy_path, Vec::new()).await;

    // Through the proxy: the allowed name, plainly and through a tunnel (what HTTPS
    // does); then an address, another port and another name, which are refused; then
    // DNS and a socket that ignores the proxy, which fail inside the sandbox.
    let code = format!(
        "import os, socket, urllib.request, http.client\n\
         print(urllib.request.urlopen('http://localhost:{port}/plain', timeout=10).read().decode())\n\
         host, proxy_port = os.environ['HTTPS_PROXY'][len('http://'):].rsplit(':', 1)\n\
         tunnel = http.client.HTTPConnection(host, int(proxy_port), timeout=10)\n\
         tunnel.set_tunnel('localhost', {port})\n\
         tunnel.request('GET', '/tunnel')\n\
         print(tunnel.getresponse().read().decode())\n\
         for url in ['http://127.0.0.1:{port}/ip', 'http://localhost:{other}/port', 'http://example.com/name']:\n\
         \x20   try:\n\
         \x20       urllib.request.urlopen(url, timeout=10)\n\
         \x20       print('reached', url)\n\
         \x20   except Exception as error:\n\
         \x20       print('refused', getattr(error, 'code', error))\n\
         try:\n\
         \x20   socket.getaddrinfo('example.com', 443)\n\
         \x20   print('dns resolved')\n\
         except OSError:\n\
         \x20   print('no dns')\n\
         try:\n\
         \x20   socket.create_connection(('{elsewhere}', 8000), timeout=3)\n\
         \x20   print('direct connection made')\n\
         except OSError:\n\
         \x20   print('no direct connection')\n\
         try:\n\
         \x20   socket.create_connection(('{gateway}', {host_port}), timeout=3)\n\
         \x20   print('host service reached')\n\
         except OSError:\n\
         \x20   print('no host service')\n"
    );
    let result = server
        .client
        .call_tool("run_python_code", json!({ "code": code }))
        .await;
    let structured = structured(&result);
    assert_eq!(
        structured["stdout"],
        "hello /plain\nhello /tunnel\nrefused 403\nrefused 403\nrefused 403\nno dns\nno direct connection\nno host service\n",
        "{result}"
    );
    let refused: Vec<String> = structured["network_refused"]
        .as_array()
        .unwrap_or_else(|| panic!("no refusals listed: {result}"))
        .iter()
        .map(|r| format!("{}:{}", r["host"].as_str().unwrap(), r["port"]))
        .collect();
    assert_eq!(
        refused,
        [
            format!("127.0.0.1:{port}"),
            format!("localhost:{other}"),
            "example.com:80".to_string()
        ]
    );
    let findings: Vec<&Value> = structured["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["layer"] == "egress-proxy")
        .collect();
    assert_eq!(findings.len(), 3, "{result}");
    assert!(text_of(&result).contains("egress proxy refused a connection to example.com:80"));

    // Node reaches it through the same relay (its `http` with the proxy as the target;
    // Node 20's fetch does not read HTTP_PROXY).
    let node = server
        .client
        .call_tool(
            "run_javascript_code",
            json!({ "code": format!(
                "const http = require('http');\n\
                 http.get({{ host: '127.0.0.1', port: 3128, path: 'http://localhost:{port}/node' }}, (response) => {{\n\
                 \x20 let body = '';\n\
                 \x20 response.on('data', (chunk) => (body += chunk));\n\
                 \x20 response.on('end', () => console.log(response.statusCode, body));\n\
                 }});\n"
            ) }),
        )
        .await;
    assert_eq!(
        node["structuredContent"]["stdout"], "200 hello /node\n",
        "{node}"
    );

    // The host service is there for a container on an ordinary network: the failure
    // above is the sandbox's isolation.
    let control = std::process::Command::new("docker")
        .args(["run", "--rm", "--network", "bridge", common::LOCAL_IMAGE, "python3", "-c"])
        .arg(format!(
            "import socket; socket.create_connection(('{gateway}', {host_port}), timeout=5); print('ok')"
        ))
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&control.stdout),
        "ok\n",
        "{control:?}"
    );
    drop(host_service);
    server.close().await;
}

/// The host's address on the engine's default bridge: the default route of a container
/// of the test's own there. (`IPAM.Config` of `docker network inspect` names it only on
/// some engines; Docker 20.10 leaves the gateway out.) Checked to be a private address,
/// so the test never reaches outside this machine.
pub(crate) fn default_bridge_gateway() -> String {
    let route = "import socket, struct\n\
                 for line in open('/proc/net/route').read().splitlines()[1:]:\n\
                 \x20   fields = line.split()\n\
                 \x20   if fields[1] == '00000000' and int(fields[3], 16) & 2:\n\
                 \x20       print(socket.inet_ntoa(struct.pack('<L', int(fields[2], 16))))\n\
                 \x20       break\n";
    let output = std::process::Command::new("docker")
        .args(["run", "--rm", "--network", "bridge", common::LOCAL_IMAGE])
        .args(["python3", "-c", route])
        .output()
        .unwrap();
    let gateway = String::from_utf8_lossy(&output.stdout).trim().to_string();
    let address: std::net::Ipv4Addr = gateway
        .parse()
        .unwrap_or_else(|_| panic!("no default route on the bridge: {output:?}"));
    assert!(
        address.is_private(),
        "the bridge's gateway {address} is not private"
    );
    gateway
}
