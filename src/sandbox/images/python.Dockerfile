# The Python sandbox image: Python 3 with the data-analysis stack most snippets reach for.
# Built by `code-sandbox-mcp image build python`, which tags it with the name in
# src/sandbox/image/build.rs: bump the version there whenever this file changes.
#
# Everything comes from Debian's own packages, not from pip: the same apt-get path
# works online (from debian:trixie-slim) and offline (from a local debootstrapped base
# given as `--base code-sandbox-mcp-runtime:trixie`, see scripts/build-offline-image.sh),
# needs no compiler, and gets versions Debian built and tested together.
ARG BASE=debian:trixie-slim
FROM ${BASE}

# `localhost` resolves in every box, whatever /etc/hosts holds (the engine writes none
# for a box without networking, and hides the image's): glibc asks nss-myhostname,
# which knows `localhost` itself, after the hosts file.
# pip is there for the policy's `packages:` (installed in a step of their own, into a
# cache the runs mount read-only), never for the code a run executes.
# Recommends are left out: they bring fonts, documentation and GUI toolkits that a
# headless sandbox never uses. The lists go afterwards, as the image never runs apt.
RUN set -eux; \
    export DEBIAN_FRONTEND=noninteractive; \
    apt-get update; \
    apt-get install -y --no-install-recommends \
        python3 \
        python3-numpy \
        python3-pandas \
        python3-matplotlib \
        python3-sklearn \
        python3-scipy \
        python3-requests \
        python3-pil \
        python3-openpyxl \
        python3-bs4 \
        python3-sympy \
        python3-seaborn \
        python3-pip \
        libnss-myhostname \
    ; \
    sed -i 's/^hosts:.*/hosts:          files myhostname dns/' /etc/nsswitch.conf; \
    apt-get clean; \
    rm -rf /var/lib/apt/lists/*

# The run's working directory; sticky and writable by anyone, because the sandbox runs
# as an unprivileged user and, without a tmpfs mounted there, writes into the image's.
RUN mkdir -p /sandbox && chmod 1777 /sandbox
WORKDIR /sandbox

# No display in a container: matplotlib must draw to files, not look for a GUI backend.
# Its cache goes to /tmp, writable at run time (the root filesystem is read-only).
ENV MPLBACKEND=Agg MPLCONFIGDIR=/tmp/matplotlib

# matplotlib builds its font cache on first use, which takes a run most of a second
# (and tries `fc-list` first, which the guard refuses, leaving the slow path): the cache
# is built here, and a startup module (a .pth file, run as Python starts) copies it into
# MPLCONFIGDIR, which starts empty in every run.
RUN set -eux; \
    fonts=/usr/share/code-sandbox-mcp/matplotlib; \
    MPLCONFIGDIR="$fonts" python3 -c 'import matplotlib.font_manager'; \
    ls "$fonts"/fontlist-*.json; \
    site=/usr/lib/python3/dist-packages; \
    printf '%s\n' \
        '"""Copies the font cache built with the image where matplotlib looks for it."""' \
        'import os' \
        '' \
        "_FONTS = \"$fonts\"" \
        '_cache = os.environ.get("MPLCONFIGDIR")' \
        'try:' \
        '    if _cache:' \
        '        os.makedirs(_cache, exist_ok=True)' \
        '        for _name in os.listdir(_FONTS):' \
        '            if not os.path.exists(os.path.join(_cache, _name)):' \
        '                with open(os.path.join(_FONTS, _name), "rb") as _source:' \
        '                    with open(os.path.join(_cache, _name), "wb") as _copy:' \
        '                        _copy.write(_source.read())' \
        'except OSError:' \
        '    pass' \
        > "$site/code_sandbox_mcp_startup.py"; \
    echo 'import code_sandbox_mcp_startup' > "$site/code_sandbox_mcp_startup.pth"; \
    MPLCONFIGDIR=/tmp/startup-check python3 -c 'import os; assert os.listdir("/tmp/startup-check")'; \
    rm -rf /tmp/startup-check

# The headline packages by import name: the server names them in the tool description,
# and the tests import exactly these.
LABEL io.code-sandbox-mcp.packages="numpy pandas matplotlib sklearn scipy requests PIL openpyxl bs4 sympy seaborn"
