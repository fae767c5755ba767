//! The egress proxy held against a box that attacks it (issue 21), with the real
//! engine: addresses that are this machine's own, the engine's bridge, other
//! containers and loopback, reached by address, by a name whose DNS answers one of
//! them, or in another spelling; requests in disguise through the box's relay; and a
//! flood of 2,000 connections from one box, while another box's request goes through.
//! Only hosts of the test's own: a service on this machine, containers it starts.

use crate::common;
use crate::common::mcp_client::{structured, InProcess, TestImage};
use crate::network::{default_bridge_gateway, OtherNetworkServer};
use serde_json::json;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

crate::common::harness::tests! {
    multi_thread(2) special_addresses_are_reached_only_when_named needs common::DOCKER;
    multi_thread(4) a_flood_of_connections_from_one_box_starves_nobody needs common::DOCKER;
}

/// A service on every address of this machine, answering `hello`; counts the
/// requests it answers.
async fn host_service() -> (u16, Arc<AtomicUsize>) {
    let listener = tokio::net::TcpListener::bind("0.0.0.0:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let count = Arc::new(AtomicUsize::new(0));
    let counted = count.clone();
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            let counted = counted.clone();
            tokio::spawn(async move {
                let mut buffer = vec![0u8; 4096];
                if !matches!(stream.read(&mut buffer).await, Ok(read) if read > 0) {
                    return;
                }
                counted.fetch_add(1, Ordering::SeqCst);
                let _ = stream
                    .write_all(
                        b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nConnection: close\r\n\r\nhello",
                    )
                    .await;
            });
        }
    });
    (port, count)
}

/// This machine's address on its default route (found without sending anything),
/// if it has one that is not loopback.
fn own_address() -> Option<String> {
    let socket = std::net::UdpSocket::bind("0.0.0.0:0").ok()?;
    socket.connect("192.0.2.1:9").ok()?;
    let ip = socket.local_addr().ok()?.ip();
    (!ip.is_loopback() && !ip.is_unspecified()).then(|| ip.to_string())
}

/// A policy of `image` with `allow` as its network list.
fn allow(image: &TestImage, entries: &[String]) {
    let text = std::fs::read_to_string(&image.policy_path).unwrap();
    let list: Vec<String> = entries.iter().map(|e| format!("\"{e}\"")).collect();
    std::fs::write(
        &image.policy_path,
        format!("{text}network:\n  allow: [{}]\n", list.join(", ")),
    )
    .unwrap();
}

async fn special_addresses_are_reached_only_when_named() {
    let (port, connections) = host_service().await;
    let unnamed = OtherNetworkServer::named("unnamed");
    let named = OtherNetworkServer::named("named");
    let gateway = default_bridge_gateway();
    let own = own_address();
    let hostname = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .unwrap()
        .trim()
        .to_string();
    let image = TestImage::new("egress-addresses", 0);
    // Ranges that take in every address name none of the special ones; `localhost`
    // names loopback; one container is named by its address.
    allow(
        &image,
        &[
            format!("0.0.0.0/0:{port}"),
            "0.0.0.0/0:8000".to_string(),
            format!("[::/0]:{port}"),
            format!("{hostname}:{port}"),
            format!("localhost:{port}"),
            format!("{}:8000", named.address),
        ],
    );
    let mut server = InProcess::start(&image.policy_path, Vec::new()).await;
    let mut urls = vec![
        format!("http://{}:8000/", unnamed.address),
        format!("http://{gateway}:{port}/"),
        format!("http://127.0.0.1:{port}/"),
        format!("http://[::ffff:127.0.0.1]:{port}/"),
        format!("http://[::1]:{port}/"),
        format!("http://{hostname}:{port}/"),
        format!("http://2130706433:{port}/"),
        format!("http://0x7f.1:{port}/"),
        format!("http://localhost:{port}/"),
        format!("http://{}:8000/", named.address),
    ];
    if let Some(own) = &own {
        urls.push(format!("http://{own}:{port}/"));
    }
    let code = format!(
        "import socket, urllib.request\n\
         for url in {urls:?}:\n\
         \x20   try:\n\
         \x20       print(urllib.request.urlopen(url, timeout=20).status, url)\n\
         \x20   except Exception as error:\n\
         \x20       print(getattr(error, 'code', error), url)\n\
         def raw(data):\n\
         \x20   with socket.create_connection(('127.0.0.1', 3128), timeout=20) as s:\n\
         \x20       s.sendall(data)\n\
         \x20       s.shutdown(socket.SHUT_WR)\n\
         \x20       answer = b''\n\
         \x20       while chunk := s.recv(65536):\n\
         \x20           answer += chunk\n\
         \x20   return answer\n\
         lf = raw(b'GET http://localhost:{port}/ HTTP/1.1\\nHost: evil.example\\r\\nHost: localhost:{port}\\r\\n\\r\\n')\n\
         print('bare-lf', lf.split(b' ')[1].decode())\n\
         tunnel = raw(b'CONNECT localhost:{port} HTTP/1.1\\r\\nHost: localhost:{port}\\r\\n\\r\\nGET / HTTP/1.1\\r\\nHost: evil.example\\r\\n\\r\\n')\n\
         print('tunnel', tunnel.split(b'\\r\\n\\r\\n', 1)[1].split(b' ')[1].decode())\n"
    );
    let result = server
        .client
        .call_tool("run_python_code", json!({ "code": code }))
        .await;
    let out = structured(&result)["stdout"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let status = |url: &str| {
        out.lines()
            .find(|line| line.ends_with(&format!(" {url}")))
            .unwrap_or_else(|| panic!("no line for {url}: {result}"))
            .split(' ')
            .next()
            .unwrap()
            .to_string()
    };
    for url in &urls {
        let expected = if url.contains("localhost") || url.contains(&named.address) {
            "200"
        } else if url.contains("2130706433") || url.contains("0x7f") {
            "400"
        } else {
            "403"
        };
        assert_eq!(status(url), expected, "{url}: {result}");
    }
    assert!(out.contains("bare-lf 400"), "{result}");
    assert!(out.contains("tunnel 403"), "{result}");
    let reasons: Vec<String> = structured(&result)["network_refused"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            format!(
                "{}:{} {}",
                r["host"].as_str().unwrap(),
                r["port"],
                r["reason"].as_str().unwrap()
            )
        })
        .collect();
    let reasons = reasons.join("\n");
    for (host, why) in [
        (
            unnamed.address.clone(),
            "is the container engine's network 172.".to_string(),
        ),
        (gateway.clone(), "this machine's own address".to_string()),
        ("127.0.0.1".to_string(), "is loopback".to_string()),
        ("::1".to_string(), "is loopback".to_string()),
        (hostname.clone(), format!("{hostname} resolves to ")),
        (
            "localhost".to_string(),
            "the Host header names `evil.example`".to_string(),
        ),
    ] {
        assert!(
            reasons
                .lines()
                .any(|l| l.starts_with(&format!("{host}:")) && l.contains(&why)),
            "{host} / {why}:\n{reasons}"
        );
    }
    if let Some(own) = &own {
        assert!(
            reasons
                .lines()
                .any(|l| l.starts_with(own.as_str()) && l.contains("own address")),
            "{own}:\n{reasons}"
        );
    }
    assert_eq!(
        connections.load(Ordering::SeqCst),
        1,
        "the host service answered once, to `localhost`"
    );
    server.close().await;
}

/// This process's open descriptors.
fn descriptors() -> usize {
    std::fs::read_dir("/proc/self/fd")
        .map(|d| d.count())
        .unwrap_or(0)
}

/// This process's resident memory, in KiB.
fn resident_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches(" kB").parse().ok())
        .unwrap_or(0)
}

async fn a_flood_of_connections_from_one_box_starves_nobody() {
    let port = crate::network::test_server().await;
    let image = TestImage::new("egress-flood", 0);
    allow(&image, &[format!("localhost:{port}")]);
    let mut server = InProcess::start(&image.policy_path, Vec::new()).await;
    // Warm the proxy up (and see a normal request work) before measuring.
    let probe = format!(
        "import urllib.request\nprint(urllib.request.urlopen('http://localhost:{port}/probe', timeout=20).read().decode())\n"
    );
    let warm = server
        .client
        .call_tool("run_python_code", json!({ "code": probe }))
        .await;
    assert_eq!(structured(&warm)["stdout"], "hello /probe\n", "{warm}");
    let (fds_before, rss_before) = (descriptors(), resident_kib());

    // 2,000 connections straight to the proxy's socket, each a request head that never
    // ends (slowloris), held for a while.
    let flood = "import socket, time\n\
                 held, answered, failed = [], 0, 0\n\
                 for _ in range(2000):\n\
                 \x20   s = socket.socket(socket.AF_UNIX)\n\
                 \x20   try:\n\
                 \x20       s.connect('/run/code-sandbox/egress.sock')\n\
                 \x20       s.sendall(b'GET http://localhost')\n\
                 \x20   except OSError:\n\
                 \x20       failed += 1\n\
                 \x20       continue\n\
                 \x20   held.append(s)\n\
                 time.sleep(2)\n\
                 for s in held:\n\
                 \x20   s.setblocking(False)\n\
                 \x20   try:\n\
                 \x20       answered += s.recv(64).startswith(b'HTTP/1.1 503')\n\
                 \x20   except (BlockingIOError, OSError):\n\
                 \x20       pass\n\
                 print(len(held), answered, failed, flush=True)\n\
                 time.sleep(12)\n";
    let flood_call = server
        .client
        .start_request(
            "tools/call",
            json!({"name": "run_python_code", "arguments": { "code": flood }}),
        )
        .await;
    // While it holds its connections: the server's descriptors and memory, and
    // another box's request.
    let mut peak_fds = descriptors();
    let mut peak_rss = resident_kib();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    while peak_fds < fds_before + 100 && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(200)).await;
        peak_fds = peak_fds.max(descriptors());
        peak_rss = peak_rss.max(resident_kib());
    }
    assert!(
        peak_fds >= fds_before + 100,
        "the flood never arrived ({peak_fds} descriptors)"
    );
    let other = format!(
        "import urllib.request\nprint(urllib.request.urlopen('http://localhost:{port}/other-box', timeout=20).read().decode())\n"
    );
    let other_call = server
        .client
        .start_request(
            "tools/call",
            json!({"name": "run_python_code", "arguments": { "code": other }}),
        )
        .await;
    let sampler = tokio::spawn(async move {
        let (mut fds, mut rss) = (0, 0);
        for _ in 0..50 {
            fds = fds.max(descriptors());
            rss = rss.max(resident_kib());
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        (fds, rss)
    });
    let other_result = server.client.response(other_call).await;
    assert_eq!(
        structured(&other_result["result"])["stdout"],
        "hello /other-box\n",
        "another box is served during the flood: {other_result}"
    );
    let flood_result = server.client.response(flood_call).await;
    let (fds, rss) = sampler.await.unwrap();
    peak_fds = peak_fds.max(fds);
    peak_rss = peak_rss.max(rss);
    let flood_out = structured(&flood_result["result"])["stdout"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let numbers: Vec<usize> = flood_out
        .split_whitespace()
        .filter_map(|n| n.parse().ok())
        .collect();
    let [held, answered, failed] = numbers[..] else {
        panic!("{flood_result}");
    };
    let cap = code_sandbox_mcp::sandbox::egress::limits::PER_BOX;
    eprintln!(
        "flood of 2000 connections from one box: {held} connected, {answered} answered 503, \
         {failed} failed to connect; server descriptors {fds_before} before, {peak_fds} at \
         most; resident memory {rss_before} KiB before, {peak_rss} KiB at most"
    );
    assert_eq!(held + failed, 2000, "{flood_out}");
    assert!(
        answered >= held - cap,
        "over the cap, connections are refused at once: {flood_out}"
    );
    assert!(
        peak_fds < fds_before + cap + 200,
        "the server held {peak_fds} descriptors (from {fds_before})"
    );
    let refused = structured(&flood_result["result"])["network_refused"].to_string();
    assert!(
        refused.contains("connections open through the egress proxy"),
        "{flood_result}"
    );
    server.close().await;
}
