//! What comes back besides the output, through the MCP server: matplotlib figures as
//! PNG image content, files written under /sandbox (inline text, images, embedded
//! resources), caps that list rather than drop, the export folder, and mounts.

use crate::common;
use crate::common::mcp_client::{is_error, structured, text_of, InProcess, TestImage};
use base64::Engine as _;
use code_sandbox_mcp::analysis::Language;
use serde_json::{json, Value};
use std::path::Path;

crate::common::harness::tests! {
    multi_thread(2) a_pandas_plot_comes_back_as_a_png_with_the_output_and_the_csv needs common::DOCKER;
    multi_thread(2) files_over_a_cap_are_listed_with_the_cap_not_dropped needs common::DOCKER;
    multi_thread(2) files_are_exported_where_the_policy_says_and_never_overwritten_unasked needs common::DOCKER;
    multi_thread(2) a_mount_is_read_only_unless_the_policy_says_rw needs common::DOCKER;
    multi_thread(2) javascript_files_come_back_and_a_session_call_returns_only_its_own needs common::DOCKER;
    multi_thread(2) descriptions_and_resources_name_the_packages_the_image_has needs common::DOCKER;
    multi_thread(2) the_first_image_the_engine_has_is_the_one_used needs common::DOCKER;
}

/// A server on a tag of `base`, its policy the test policy plus `extra` YAML, written
/// in `project` (a folder of its own, which relative paths in `extra` are under).
async fn server_in(base: &str, name: &str, project: &Path, extra: &str) -> (TestImage, InProcess) {
    let image = TestImage::of(base, name, 0);
    let text = std::fs::read_to_string(&image.policy_path).unwrap();
    let policy = project.join(".code-sandbox.yaml");
    std::fs::write(&policy, format!("{text}{extra}")).unwrap();
    let server = InProcess::start(&policy, Vec::new()).await;
    (image, server)
}

async fn python(server: &mut InProcess, code: &str) -> Value {
    server
        .client
        .call_tool("run_python_code", json!({ "code": code }))
        .await
}

/// The content blocks of `kind` (`image`, `resource`) in a tool result.
fn blocks<'a>(result: &'a Value, kind: &str) -> Vec<&'a Value> {
    result["content"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|block| block["type"] == kind)
        .collect()
}

fn listed<'a>(result: &'a Value, path: &str) -> &'a Value {
    structured(result)["files"]
        .as_array()
        .and_then(|files| files.iter().find(|file| file["path"] == path))
        .unwrap_or_else(|| panic!("{path} is not listed: {result}"))
}

async fn a_pandas_plot_comes_back_as_a_png_with_the_output_and_the_csv() {
    let base = common::library_image(Language::Python);
    let project = common::scratch("outputs-plot");
    let (_image, mut server) = server_in(base, "plot", &project, "").await;
    let result = python(
        &mut server,
        "import pandas as pd\nimport matplotlib.pyplot as plt\n\
         df = pd.DataFrame({'x': range(10), 'y': [i * i for i in range(10)]})\n\
         df.plot(x='x', y='y', title='squares')\n\
         plt.show()\n\
         plt.figure()\nplt.bar(['a', 'b'], [3, 5])\n\
         df.to_csv('squares.csv', index=False)\n\
         print(int(df['y'].sum()))",
    )
    .await;
    assert!(!is_error(&result), "{result}");
    assert_eq!(structured(&result)["stdout"], "285\n", "{result}");

    // Two figures: the one shown and the one still open at the end, in that order.
    let images = blocks(&result, "image");
    assert_eq!(images.len(), 2, "{result}");
    for image in &images {
        assert_eq!(image["mimeType"], "image/png");
        let png = base64::engine::general_purpose::STANDARD
            .decode(image["data"].as_str().unwrap())
            .unwrap();
        assert!(png.starts_with(b"\x89PNG\r\n\x1a\n"), "a PNG header");
        assert!(
            png.len() > 3_000,
            "a drawn figure, not an empty one: {} bytes",
            png.len()
        );
        // Its width and height (IHDR): matplotlib's default 640 × 480.
        assert_eq!(&png[16..24], &[0, 0, 2, 128, 0, 0, 1, 224]);
    }
    let figure = listed(&result, "figure-1.png");
    assert_eq!(figure["figure"], true);
    assert_eq!(figure["mime_type"], "image/png");
    listed(&result, "figure-2.png");

    // The small CSV is inline in the text, and listed.
    let csv = listed(&result, "squares.csv");
    assert_eq!(csv["mime_type"], "text/csv");
    assert_eq!(csv["size"], 50);
    let text = text_of(&result);
    assert!(
        text.contains("--- file squares.csv ---\nx,y\n0,0\n1,1\n"),
        "{text}"
    );
    assert!(!text.contains("Nothing was printed"), "{text}");
    server.close().await;
}

async fn files_over_a_cap_are_listed_with_the_cap_not_dropped() {
    let project = common::scratch("outputs-caps");
    let extra = "outputs:\n  max_files: 2\n  max_file_size: 1KiB\n  inline_text: 16B\n";
    let (_image, mut server) = server_in(common::LOCAL_IMAGE, "caps", &project, extra).await;
    let result = python(
        &mut server,
        "import os\n\
         open('a-small.txt', 'w').write('short')\n\
         open('b-big.bin', 'wb').write(os.urandom(5000))\n\
         open('c-text.txt', 'w').write('x' * 100)\n\
         open('d-late.txt', 'w').write('late')\n\
         os.makedirs('many')\n\
         for i in range(150):\n    open(f'many/{i:03}', 'w').write('.')\n\
         print('wrote')",
    )
    .await;
    assert!(!is_error(&result), "{result}");
    let small = listed(&result, "a-small.txt");
    assert!(small.get("omitted").is_none(), "{small}");
    let big = listed(&result, "b-big.bin");
    assert_eq!(big["size"], 5000);
    assert_eq!(big["omitted"], "larger than outputs.max_file_size (1KiB)");
    // Longer than `inline_text`: an embedded text resource.
    listed(&result, "c-text.txt");
    let resources = blocks(&result, "resource");
    assert_eq!(resources.len(), 1, "{result}");
    assert_eq!(
        resources[0]["resource"]["uri"],
        "sandbox://files/c-text.txt"
    );
    assert_eq!(resources[0]["resource"]["text"], "x".repeat(100));
    let late = listed(&result, "d-late.txt");
    assert!(
        late["omitted"]
            .as_str()
            .unwrap()
            .contains("outputs.max_files (2)"),
        "{late}"
    );
    // 154 files: 100 listed, the rest counted.
    assert_eq!(structured(&result)["files"].as_array().unwrap().len(), 100);
    assert_eq!(structured(&result)["files_unlisted"], 54);
    let text = text_of(&result);
    assert!(text.contains("--- file a-small.txt ---\nshort\n"), "{text}");
    assert!(text.contains("and 54 more files, not listed"), "{text}");
    server.close().await;
}

async fn files_are_exported_where_the_policy_says_and_never_overwritten_unasked() {
    let project = common::scratch("outputs-export");
    let extra = "outputs:\n  export:\n    path: results\n";
    let (_image, mut server) = server_in(common::LOCAL_IMAGE, "export", &project, extra).await;
    let code = "import os, sys\nos.makedirs('deep', exist_ok=True)\n\
                open('deep/report.txt', 'w').write(sys.argv[0] + ' ' + str(len(os.listdir('.'))))";
    let first = python(&mut server, code).await;
    let report = listed(&first, "deep/report.txt");
    assert_eq!(report["exported_to"], "results/deep/report.txt", "{first}");
    let written = project.join("results/deep/report.txt");
    assert_eq!(std::fs::read_to_string(&written).unwrap(), "main.py 2");

    std::fs::write(&written, "the user's edit").unwrap();
    let second = python(&mut server, code).await;
    let report = listed(&second, "deep/report.txt");
    assert!(report.get("exported_to").is_none(), "{second}");
    assert!(
        report["export_error"]
            .as_str()
            .unwrap()
            .contains("already there"),
        "{second}"
    );
    assert_eq!(
        std::fs::read_to_string(&written).unwrap(),
        "the user's edit"
    );
    server.close().await;
}

async fn a_mount_is_read_only_unless_the_policy_says_rw() {
    let project = common::scratch("outputs-mounts");
    std::fs::create_dir_all(project.join("data")).unwrap();
    std::fs::write(project.join("data/input.csv"), "a,b\n1,2\n").unwrap();
    let scratch = project.join("scratch");
    std::fs::create_dir_all(&scratch).unwrap();
    // The sandbox writes as an unprivileged user: the folder must let it.
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&scratch, std::fs::Permissions::from_mode(0o777)).unwrap();
    }
    let extra = "mounts:\n  - source: ./data\n    target: /data\n  - source: scratch\n    target: /sandbox/scratch\n    rw: true\n";
    let (_image, mut server) = server_in(common::LOCAL_IMAGE, "mounts", &project, extra).await;

    let read = python(
        &mut server,
        "print(open('/data/input.csv').read().split()[1])\n\
         try:\n    open('/data/new.txt', 'w')\nexcept OSError as error:\n    print('refused', error.errno)",
    )
    .await;
    assert!(!is_error(&read), "{read}");
    // 30: EROFS, a read-only file system. No finding: /data is the sandbox's now.
    assert_eq!(structured(&read)["stdout"], "1,2\nrefused 30\n", "{read}");
    assert_eq!(structured(&read)["findings"], json!([]), "{read}");
    assert!(!project.join("data/new.txt").exists());

    let write = python(
        &mut server,
        "open('/sandbox/scratch/note.txt', 'w').write('kept')\nprint('ok')",
    )
    .await;
    assert_eq!(structured(&write)["stdout"], "ok\n", "{write}");
    assert_eq!(
        std::fs::read_to_string(scratch.join("note.txt")).unwrap(),
        "kept"
    );
    // A mounted folder is the project's, not the run's output: not returned.
    assert!(structured(&write).get("files").is_none(), "{write}");

    let node = server
        .client
        .call_tool(
            "run_javascript_code",
            json!({"code": "const fs = require('fs');\nfs.writeFileSync('/sandbox/scratch/js.txt', 'js');\nconsole.log(fs.readFileSync('/data/input.csv', 'utf8').length)"}),
        )
        .await;
    assert_eq!(structured(&node)["stdout"], "8\n", "{node}");
    assert_eq!(
        std::fs::read_to_string(scratch.join("js.txt")).unwrap(),
        "js"
    );
    server.close().await;
}

async fn javascript_files_come_back_and_a_session_call_returns_only_its_own() {
    let project = common::scratch("outputs-js");
    let (_image, mut server) = server_in(common::LOCAL_IMAGE, "js-out", &project, "").await;
    let call = |code: &str, session: Option<&str>| {
        let mut arguments = json!({ "code": code });
        if let Some(name) = session {
            arguments["session"] = json!(name);
        }
        arguments
    };
    let first = server
        .client
        .call_tool(
            "run_javascript_code",
            call(
                "require('fs').writeFileSync('out.json', JSON.stringify({n: 1}));",
                None,
            ),
        )
        .await;
    assert_eq!(listed(&first, "out.json")["mime_type"], "application/json");
    assert!(
        text_of(&first).contains("--- file out.json ---\n{\"n\":1}"),
        "{first}"
    );

    // A failing program still hands back what it wrote.
    let failing = server
        .client
        .call_tool(
            "run_javascript_code",
            call(
                "require('fs').writeFileSync('partial.txt', 'half');\nthrow new Error('late');",
                None,
            ),
        )
        .await;
    assert_eq!(structured(&failing)["exit_code"], 1, "{failing}");
    listed(&failing, "partial.txt");

    let one = server
        .client
        .call_tool(
            "run_javascript_code",
            call("require('fs').writeFileSync('one.txt', '1');", Some("s")),
        )
        .await;
    listed(&one, "one.txt");
    let two = server
        .client
        .call_tool(
            "run_javascript_code",
            call("require('fs').writeFileSync('two.txt', '2');", Some("s")),
        )
        .await;
    let files = structured(&two)["files"].as_array().unwrap();
    assert_eq!(files.len(), 1, "{two}");
    assert_eq!(files[0]["path"], "two.txt");

    let py_one = python_in_session(&mut server, "open('p.txt', 'w').write('p')").await;
    listed(&py_one, "p.txt");
    let py_two = python_in_session(&mut server, "print('nothing new')").await;
    assert!(structured(&py_two).get("files").is_none(), "{py_two}");
    server.close().await;
}

async fn python_in_session(server: &mut InProcess, code: &str) -> Value {
    server
        .client
        .call_tool("run_python_code", json!({ "code": code, "session": "py" }))
        .await
}

/// The description of the tool `name` in a `tools/list` answer.
async fn description(server: &mut InProcess, name: &str) -> String {
    let listed = server.client.request("tools/list", json!({})).await;
    listed["result"]["tools"]
        .as_array()
        .and_then(|tools| tools.iter().find(|tool| tool["name"] == name))
        .and_then(|tool| tool["description"].as_str())
        .unwrap_or_else(|| panic!("no tool {name}: {listed}"))
        .to_string()
}

async fn descriptions_and_resources_name_the_packages_the_image_has() {
    let base = common::library_image(Language::Python);
    let project = common::scratch("outputs-environments");
    let (image, mut server) = server_in(base, "environments", &project, "").await;

    // The resource waits for the probe; the tool list never does (it names what is
    // known at once), so it is read after the resource.
    let read = server
        .client
        .request("resources/read", json!({"uri": "sandbox://environments"}))
        .await;
    let python = description(&mut server, "run_python_code").await;
    // Named with the versions the image has, from its label's list.
    let probe = std::process::Command::new("docker")
        .args(["run", "--rm", &image.tag, "python3", "-c"])
        .arg("import numpy, pandas; print(numpy.__version__, pandas.__version__)")
        .output()
        .unwrap();
    let versions = String::from_utf8_lossy(&probe.stdout);
    let (numpy, pandas) = versions.trim().split_once(' ').unwrap();
    assert!(python.contains(&format!("numpy {numpy}")), "{python}");
    assert!(python.contains(&format!("pandas {pandas}")), "{python}");
    assert!(python.contains("matplotlib"), "{python}");
    assert!(
        python.contains(&format!("Image {} (Python 3.", image.tag)),
        "{python}"
    );
    assert!(python.contains("figures"), "{python}");

    let text = read["result"]["contents"][0]["text"].as_str().unwrap();
    let environments: Value = serde_json::from_str(text).unwrap();
    let packages = environments["python"]["packages"].as_array().unwrap();
    assert!(
        packages.iter().any(|p| p["name"] == "scipy"),
        "{environments}"
    );
    assert_eq!(environments["python"]["image"], image.tag.as_str());

    let listed = server.client.request("resources/list", json!({})).await;
    let uris: Vec<&str> = listed["result"]["resources"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|r| r["uri"].as_str())
        .collect();
    assert_eq!(uris, ["sandbox://policy", "sandbox://environments"]);
    let policy = server
        .client
        .request("resources/read", json!({"uri": "sandbox://policy"}))
        .await;
    let yaml = policy["result"]["contents"][0]["text"].as_str().unwrap();
    assert!(yaml.contains("max_file_size: 1MiB"), "{yaml}");
    assert!(!yaml.contains(project.to_str().unwrap()), "{yaml}");
    let missing = server
        .client
        .request("resources/read", json!({"uri": "sandbox://nothing"}))
        .await;
    assert!(
        missing["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("sandbox://policy")),
        "{missing}"
    );
    server.close().await;
}

async fn the_first_image_the_engine_has_is_the_one_used() {
    let project = common::scratch("outputs-image-choice");
    let image = TestImage::new("choice", 0);
    // A list: the missing first choice is passed over (not pulled), the tag is used.
    let policy = project.join(".code-sandbox.yaml");
    std::fs::write(
        &policy,
        format!(
            "version: 1\nextends: default\npool: {{size: 0}}\nimages:\n  python: [code-sandbox-mcp-test/absent:never, \"{}\"]\n  javascript: \"{}\"\n",
            image.tag, image.tag
        ),
    )
    .unwrap();
    let mut server = InProcess::start(&policy, Vec::new()).await;
    let result = python(&mut server, "print('chosen')").await;
    assert_eq!(structured(&result)["stdout"], "chosen\n", "{result}");
    let python = description(&mut server, "run_python_code").await;
    assert!(
        python.contains(&format!("Image {} (Python 3.", image.tag)),
        "{python}"
    );
    // The offline image has no packages beyond the standard library, and says so.
    assert!(python.contains("the standard library only"), "{python}");
    server.close().await;
}
