//! Ordinary code runs (issue 22): what real notebooks and scripts do works under the
//! default policy, in the images the project builds — `localhost` resolves, the
//! images' own libraries' headline functions run, files handed in are modules of the
//! program, and a notebook-style session goes from data in to a figure out.

use crate::common::mcp_client::{structured, text_of, InProcess, TestImage};
use crate::common::{self, request};

use code_sandbox_mcp::analysis::Language;
use code_sandbox_mcp::policy::PolicyEngine;
use code_sandbox_mcp::sandbox::{RunOutcome, Sandbox};
use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;

crate::common::harness::tests! {
    multi_thread(2) localhost_resolves_in_every_image needs common::DOCKER;
    multi_thread(2) the_images_libraries_work_under_the_default_policy needs common::DOCKER;
    multi_thread(2) a_notebook_session_runs_from_data_in_to_a_figure_out needs common::DOCKER;
    multi_thread(2) modules_handed_in_are_checked_and_importable needs common::DOCKER;
}

/// A sandbox of the test policy (the default preset's rules) on `images`.
fn sandbox_on(python: &str, javascript: &str) -> Sandbox {
    let (python, javascript) = (python.to_string(), javascript.to_string());
    Sandbox::new(common::test_policy(move |policy| {
        policy.pool.size = 0;
        policy.images.python = vec![python];
        policy.images.javascript = vec![javascript];
    }))
}

async fn run(sandbox: &Sandbox, language: Language, code: &str) -> RunOutcome {
    sandbox
        .run(request(language, code), CancellationToken::new())
        .await
        .expect("the run happens")
}

const PYTHON_LOCALHOST: &str = "import socket\n\
    print(sorted({a[4][0] for a in socket.getaddrinfo('localhost', 80, proto=socket.IPPROTO_TCP)}))";
const NODE_LOCALHOST: &str =
    "require('dns').lookup('localhost', { all: true }, (error, found) => {\n\
    if (error) throw error;\n\
    console.log(JSON.stringify(found.map((a) => a.address).sort()));\n\
});";

/// The engine writes no /etc/hosts for a box without a network: the images answer
/// `localhost` themselves (nss-myhostname), with both loopback addresses.
async fn localhost_resolves_in_every_image() {
    let images = [
        (common::LOCAL_IMAGE, common::LOCAL_IMAGE),
        (
            common::library_image(Language::Python),
            common::library_image(Language::JavaScript),
        ),
    ];
    for (python, javascript) in images {
        let sandbox = sandbox_on(python, javascript);
        let found = run(&sandbox, Language::Python, PYTHON_LOCALHOST).await;
        assert_eq!(found.exit_code, 0, "{python}: {found:?}");
        assert_eq!(
            found.stdout, "['127.0.0.1', '::1']\n",
            "{python}: {found:?}"
        );
        let found = run(&sandbox, Language::JavaScript, NODE_LOCALHOST).await;
        assert_eq!(found.exit_code, 0, "{javascript}: {found:?}");
        assert_eq!(
            found.stdout, "[\"127.0.0.1\",\"::1\"]\n",
            "{javascript}: {found:?}"
        );
        sandbox.shutdown().await;
    }
}

/// The headline functions of the libraries the images ship, called as a script would.
const PYTHON_LIBRARIES: &str = "import numpy as np, pandas as pd, sympy, scipy.stats, scipy.spatial\n\
import sklearn.linear_model, seaborn, openpyxl, bs4, PIL.Image\n\
import matplotlib\n\
matplotlib.use('Agg')\n\
import matplotlib.pyplot as plt\n\
df = pd.DataFrame({'a': [1, 2, 3], 'b': [4, 5, 6]})\n\
print(df.eval('c = a + b')['c'].tolist(), df.query('a > 1 and b < 6')['a'].tolist(), pd.eval('df.a * 2').tolist())\n\
x = sympy.Symbol('x')\n\
print(sympy.sympify('x**2 + 2*x + 1').factor(), sympy.solve(x**2 - 4, x), round(sympy.lambdify(x, sympy.sin(x) ** 2)(1.0), 4))\n\
print(scipy.stats.norm.cdf(0), scipy.spatial.distance.euclidean([0, 0], [3, 4]))\n\
print(sklearn.linear_model.LinearRegression().fit([[0], [1], [2]], [0, 2, 4]).coef_.round(3).tolist())\n\
fig, ax = plt.subplots()\n\
seaborn.lineplot(x=[1, 2, 3], y=[1, 4, 9], ax=ax)\n\
fig.savefig('plot.png')\n\
print(bs4.BeautifulSoup('<p>hi</p>', 'html.parser').p.text, PIL.Image.open('plot.png').size)";

const JAVASCRIPT_LIBRARIES: &str = "const d3 = require('d3');\n\
const _ = require('lodash');\n\
const YAML = require('yaml');\n\
const jsyaml = require('js-yaml');\n\
const moment = require('moment');\n\
const { v4: uuid } = require('uuid');\n\
const { marked } = require('marked');\n\
const cheerio = require('cheerio');\n\
const rows = d3.csvParse('name,score\\nada,3\\nbob,5');\n\
const tsv = d3.tsvParse('a\\tb\\n1\\t2');\n\
console.log(rows.length, d3.sum(rows, (d) => +d.score), rows.columns.join('|'), tsv[0].b);\n\
console.log(_.template('<%= name %> scored <%- total %>')({ name: 'all', total: 8 }));\n\
console.log(YAML.parse('a: 1').a + jsyaml.load('b: 2').b, moment('2024-01-02').format('YYYY'), uuid().length, marked.parse('# hi').trim(), cheerio.load('<i>x</i>')('i').text());";

/// d3's csvParse and lodash's template build functions from strings: the default
/// policy names them as evaluators, so they work where code generation is refused.
async fn the_images_libraries_work_under_the_default_policy() {
    let sandbox = sandbox_on(
        common::library_image(Language::Python),
        common::library_image(Language::JavaScript),
    );
    let policy = common::test_policy(|_| {});
    let engine = PolicyEngine::new(policy.as_ref().clone());
    for (language, code, expected) in [
        (
            Language::Python,
            PYTHON_LIBRARIES,
            "[5, 7, 9] [2] [2, 4, 6]\n(x + 1)**2 [-2, 2] 0.7081\n0.5 5.0\n[2.0]\nhi (640, 480)\n",
        ),
        (
            Language::JavaScript,
            JAVASCRIPT_LIBRARIES,
            "2 8 name|score 2\nall scored 8\n3 2024 36 <h1 id=\"hi\">hi</h1> x\n",
        ),
    ] {
        let report = engine.check(language, code).unwrap();
        assert!(!report.denied(), "{language:?}: {:?}", report.findings);
        let outcome = run(&sandbox, language, code).await;
        assert!(outcome.blocked.is_empty(), "{language:?}: {outcome:?}");
        assert_eq!(outcome.exit_code, 0, "{language:?}: {outcome:?}");
        assert_eq!(outcome.stdout, expected, "{language:?}: {outcome:?}");
    }
    sandbox.shutdown().await;
}

async fn call(server: &mut InProcess, arguments: Value) -> Value {
    server.client.call_tool("run_python_code", arguments).await
}

async fn call_javascript(server: &mut InProcess, arguments: Value) -> Value {
    server
        .client
        .call_tool("run_javascript_code", arguments)
        .await
}

/// A notebook, cell after cell in one session on the library image: data handed in,
/// the idioms the default policy once refused (introspection, computed attributes, a
/// pickle of its own data, timeit, saving a script), an error that leaves the session
/// alive, and a figure back.
async fn a_notebook_session_runs_from_data_in_to_a_figure_out() {
    let image = TestImage::of(common::library_image(Language::Python), "notebook", 0);
    let mut server = InProcess::start(&image.policy_path, Vec::new()).await;
    let data: String = std::iter::once("x,y\n".to_string())
        .chain((0..20).map(|i| format!("{i},{}\n", i * i)))
        .collect();
    let cells: &[(&str, &str)] = &[
        (
            "import pandas as pd\nimport numpy as np\ndf = pd.read_csv('data.csv')\nprint(df.shape)",
            "(20, 2)\n",
        ),
        (
            "df['z'] = df.eval('x * y')\nprint(df.query('z > 1000').shape[0])",
            "9\n",
        ),
        (
            "ops = ['mean', 'max']\nprint({op: float(getattr(np, op)(df.y)) for op in ops})",
            "{'mean': 123.5, 'max': 361.0}\n",
        ),
        (
            "class Row:\n    def __init__(self, x):\n        self.x = x\nr = Row(3)\nprint(r.__dict__, vars(r), 'df' in globals())",
            "{'x': 3} {'x': 3} True\n",
        ),
        (
            "import pickle\nprint(pickle.loads(pickle.dumps(df)).equals(df))",
            "True\n",
        ),
        (
            "from timeit import default_timer, timeit\nprint(timeit(lambda: df.y.sum(), number=3) >= 0, default_timer() > 0)",
            "True True\n",
        ),
        ("print(undefined_name)", ""),
        (
            "open('solution.py', 'w').write('print(1)\\n')\nprint(open('solution.py').read().strip())",
            "print(1)\n",
        ),
        (
            "import matplotlib.pyplot as plt\nax = df.plot(x='x', y='z')\nplt.show()\nprint(len(df))",
            "20\n",
        ),
    ];
    for (index, (code, expected)) in cells.iter().enumerate() {
        let mut arguments = json!({ "code": code, "session": "notebook" });
        if index == 0 {
            arguments["files"] = json!([{ "path": "data.csv", "content": data }]);
        }
        let result = call(&mut server, arguments).await;
        let outcome = structured(&result);
        assert_eq!(outcome["session"]["call"], index + 1, "{result}");
        assert_eq!(outcome["session"]["ended"], Value::Null, "{result}");
        assert_eq!(outcome["stdout"], *expected, "cell {}: {result}", index + 1);
        let refused = outcome["findings"]
            .as_array()
            .is_some_and(|f| f.iter().any(|f| f["action"] == "deny"));
        assert!(!refused, "cell {}: {result}", index + 1);
        if code.contains("undefined_name") {
            assert_eq!(outcome["exit_code"], 1, "{result}");
            assert!(outcome["stderr"].as_str().unwrap().contains("NameError"));
        } else {
            assert_eq!(outcome["exit_code"], 0, "cell {}: {result}", index + 1);
        }
        if code.contains("plt.show") {
            let figure = outcome["files"]
                .as_array()
                .and_then(|files| files.iter().find(|f| f["figure"] == true))
                .unwrap_or_else(|| panic!("no figure: {result}"));
            assert_eq!(figure["mime_type"], "image/png", "{result}");
            let images = result["content"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|block| block["type"] == "image")
                .count();
            assert_eq!(images, 1, "{result}");
        }
    }
    server.close().await;
    assert!(image
        .wait_for_containers(|now| now.is_empty())
        .await
        .is_empty());
}

/// The cache file name of `helpers.py` in `image`'s Python, and, in base64, a cache for
/// it whose code prints `planted` and doubles to 0: made by that Python, so that its
/// magic number is the one the import system accepts.
fn planted_cache(image: &str) -> (String, String) {
    let script = "import base64, importlib.util, marshal, sys\n\
                  code = compile(\"print('planted')\\ndef double(x):\\n    return 0\\n\", '/sandbox/helpers.py', 'exec')\n\
                  flags = (1).to_bytes(4, 'little')\n\
                  data = importlib.util.MAGIC_NUMBER + flags + bytes(8) + marshal.dumps(code)\n\
                  print(importlib.util.cache_from_source('helpers.py'))\n\
                  print(base64.b64encode(data).decode())\n";
    let output = std::process::Command::new("docker")
        .args([
            "run",
            "--rm",
            "--network",
            "none",
            image,
            "python3",
            "-c",
            script,
        ])
        .output()
        .expect("docker runs");
    assert!(output.status.success(), "{output:?}");
    let text = String::from_utf8(output.stdout).unwrap();
    let mut lines = text.lines();
    let path = lines.next().unwrap().to_string();
    let data = lines.next().unwrap().to_string();
    (path, data)
}

/// A `.py` or `.js` file handed in is a module of the program: checked with it (a
/// finding names the file and its line), importable when it is what was checked,
/// refused when the program changed it first.
async fn modules_handed_in_are_checked_and_importable() {
    let image = TestImage::new("modules-in", 0);
    let mut server = InProcess::start(&image.policy_path, Vec::new()).await;
    let helpers = json!({ "path": "helpers.py", "content": "def double(x):\n    return 2 * x\n" });

    let unused = call(
        &mut server,
        json!({ "code": "print(1)", "files": [helpers] }),
    )
    .await;
    assert_eq!(structured(&unused)["exit_code"], 0, "{unused}");
    assert_eq!(structured(&unused)["stdout"], "1\n", "{unused}");

    let imported = call(
        &mut server,
        json!({ "code": "import helpers\nprint(helpers.double(21))", "files": [helpers] }),
    )
    .await;
    assert_eq!(structured(&imported)["stdout"], "42\n", "{imported}");
    assert_eq!(structured(&imported)["status"], "completed", "{imported}");

    // A bytecode cache planted beside a module handed in (unchecked and hash-based, so
    // Python would take it without looking at the source) is never read: the import
    // compiles the source that was checked.
    let (cache_path, cache) = planted_cache(&image.tag);
    let planted = call(
        &mut server,
        json!({ "code": "import helpers\nprint(helpers.double(21))", "files": [helpers, { "path": cache_path, "content": cache, "encoding": "base64" }] }),
    )
    .await;
    assert_eq!(structured(&planted)["stdout"], "42\n", "{planted}");
    assert_eq!(structured(&planted)["status"], "completed", "{planted}");

    let bad = json!({ "path": "lib/tools.py", "content": "import os\nos.system('id')\n" });
    let denied = call(
        &mut server,
        json!({ "code": "from lib import tools", "files": [bad] }),
    )
    .await;
    assert_eq!(structured(&denied)["status"], "denied", "{denied}");
    let finding = &structured(&denied)["findings"][0];
    assert_eq!(finding["file"], "lib/tools.py", "{denied}");
    assert_eq!(finding["line"], 2, "{denied}");
    assert_eq!(finding["rule"], "process-exec", "{denied}");
    assert!(
        text_of(&denied).contains("lib/tools.py, line 2"),
        "{denied}"
    );

    // In a session: imported as handed in, then changed by the program and reloaded.
    let first = call(
        &mut server,
        json!({ "code": "import helpers\nprint(helpers.double(2))", "files": [helpers], "session": "m" }),
    )
    .await;
    assert_eq!(structured(&first)["stdout"], "4\n", "{first}");
    let changed = call(
        &mut server,
        json!({ "code": "open('helpers.py', 'w').write('print(\"changed\")')\nimport importlib\nimportlib.reload(helpers)", "session": "m" }),
    )
    .await;
    assert_eq!(structured(&changed)["status"], "blocked", "{changed}");
    assert_eq!(structured(&changed)["stdout"], "", "{changed}");
    assert!(
        text_of(&changed).contains("changed since it was checked"),
        "{changed}"
    );

    // JavaScript: a module handed in is required by its path, checked the same way.
    let lib = json!({ "path": "lib/helpers.js", "content": "exports.double = (x) => 2 * x;\n" });
    let required = call_javascript(&mut server, json!({ "code": "const h = require('./lib/helpers.js');\nconst again = require('./lib/helpers');\nconsole.log(h.double(21), again === h)", "files": [lib] })).await;
    assert_eq!(structured(&required)["stdout"], "42 true\n", "{required}");
    let bad = json!({ "path": "lib/run.js", "content": "// runs\nrequire('child_process').execSync('id');\n" });
    let denied = call_javascript(
        &mut server,
        json!({ "code": "require('./lib/run.js');", "files": [bad] }),
    )
    .await;
    assert_eq!(structured(&denied)["status"], "denied", "{denied}");
    let finding = &structured(&denied)["findings"][0];
    assert_eq!(finding["file"], "lib/run.js", "{denied}");
    assert_eq!(finding["line"], 2, "{denied}");
    let changed = call_javascript(&mut server, json!({ "code": "require('fs').writeFileSync('lib/helpers.js', 'console.log(\"changed\")');\nrequire('./lib/helpers.js');", "files": [lib] })).await;
    assert_eq!(structured(&changed)["status"], "blocked", "{changed}");
    assert_eq!(structured(&changed)["stdout"], "", "{changed}");
    assert!(
        text_of(&changed).contains("changed since it was checked"),
        "{changed}"
    );
    // ES modules: a module handed in is imported (statically and with `import()`),
    // JSON handed in is data; one the program changed first is refused as it loads.
    let esm = json!({ "path": "lib/h.mjs", "content": "export const double = (x) => 2 * x;\n" });
    let config = json!({ "path": "config.json", "content": "{\"factor\": 5}" });
    let imported = call_javascript(&mut server, json!({ "code": "import { double } from './lib/h.mjs';\nimport config from './config.json' with { type: 'json' };\nimport h from './lib/helpers.js';\nconst again = await import('./lib/h.mjs');\nconsole.log(double(21), config.factor, h.double(1), again.double(2));", "files": [esm, config, lib] })).await;
    assert_eq!(structured(&imported)["stdout"], "42 5 2 4\n", "{imported}");
    assert_eq!(structured(&imported)["status"], "completed", "{imported}");
    let changed = call_javascript(&mut server, json!({ "code": "import { writeFileSync } from 'node:fs';\nwriteFileSync('lib/h.mjs', 'console.log(\"changed\"); export const double = 0;');\nconst m = await import('./lib/h.mjs');\nconsole.log(m.double);", "files": [esm] })).await;
    assert_eq!(structured(&changed)["status"], "blocked", "{changed}");
    assert_eq!(structured(&changed)["stdout"], "", "{changed}");
    assert!(
        text_of(&changed).contains("import of a module handed in, changed since it was checked"),
        "{changed}"
    );
    // In a session, a module handed in with one call is required by a later one.
    for (code, files, expected) in [
        ("console.log(1)", json!([lib]), "1\n"),
        (
            "const h = require('./lib/helpers');\nconsole.log(h.double(4))",
            json!([]),
            "8\n",
        ),
    ] {
        let result = call_javascript(
            &mut server,
            json!({ "code": code, "files": files, "session": "js" }),
        )
        .await;
        assert_eq!(structured(&result)["stdout"], expected, "{result}");
    }
    server.close().await;
    assert!(image
        .wait_for_containers(|now| now.is_empty())
        .await
        .is_empty());
}
