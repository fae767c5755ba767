# The JavaScript sandbox image: Node.js with the libraries most snippets reach for.
# Built by `code-sandbox-mcp image build javascript`, which tags it with the name in
# src/sandbox/image/build.rs: bump the version there whenever this file changes.
#
# Everything comes from Debian's own packages, not from npm: the same apt-get path
# works online (from debian:trixie-slim) and offline (from a local debootstrapped base
# given as `--base code-sandbox-mcp-runtime:trixie`, see scripts/build-offline-image.sh),
# and trixie's nodejs is 20.19, new enough for the permission model the guard uses.
ARG BASE=debian:trixie-slim
FROM ${BASE}

# `localhost` resolves in every box, whatever /etc/hosts holds (the engine writes none
# for a box without networking, and hides the image's): glibc asks nss-myhostname,
# which knows `localhost` itself, after the hosts file.
# Recommends are left out: they bring documentation and build tools (npm, gyp) that a
# sandbox never uses. The lists go afterwards, as the image never runs apt.
# npm is there for the policy's `packages:` (installed in a step of their own, into a
# cache the runs mount read-only), never for the code a run executes.
RUN set -eux; \
    export DEBIAN_FRONTEND=noninteractive; \
    apt-get update; \
    apt-get install -y --no-install-recommends \
        nodejs \
        node-lodash \
        node-axios \
        node-yaml \
        node-js-yaml \
        node-moment \
        node-uuid \
        node-marked \
        node-cheerio \
        node-d3 \
        npm \
        libnss-myhostname \
    ; \
    sed -i 's/^hosts:.*/hosts:          files myhostname dns/' /etc/nsswitch.conf; \
    apt-get clean; \
    rm -rf /var/lib/apt/lists/*

# Debian's node finds these packages for require() in /usr/share/nodejs, but an ES
# module's `import` only looks in node_modules folders above the importing file: this
# link is the one above /sandbox, so both spellings find the same packages. (Except
# cheerio: Debian ships only its CommonJS build, so it is require() only.)
RUN ln -s /usr/share/nodejs /node_modules

# The run's working directory; sticky and writable by anyone, because the sandbox runs
# as an unprivileged user and, without a tmpfs mounted there, writes into the image's.
RUN mkdir -p /sandbox && chmod 1777 /sandbox
WORKDIR /sandbox

# The headline packages by require name: the server names them in the tool
# description, and the tests require exactly these.
LABEL io.code-sandbox-mcp.packages="lodash axios yaml js-yaml moment uuid marked cheerio d3"
