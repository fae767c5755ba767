//! Ordinary code runs (issue 22): what real notebooks and scripts do works under the
//! default policy, in the images the project builds — `localhost` resolves, the
//! images' own libraries' headline functions run, files handed in are modules of the
//! program, and a notebook-style session goes from data in to a figure out.

use crate::common::{self, request};

use code_sandbox_mcp::analysis::Language;
use code_sandbox_mcp::sandbox::{RunOutcome, Sandbox};
use tokio_util::sync::CancellationToken;

crate::common::harness::tests! {
    multi_thread(2) localhost_resolves_in_every_image needs common::DOCKER;
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
