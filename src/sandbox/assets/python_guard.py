"""The bootstrap of a Python sandbox: the interpreter's first code, before any program.

Started with SETTINGS_JSON as its argument, under the box's supervisor, when the box is
made, before any code is known. The interpreter runs isolated (`-I -S`): no
`PYTHON*` variable, no user site, no `site` processing, so nothing of a package set
(a `sitecustomize`, a `.pth` file, a module shadowing the standard library) runs before
the policy's audit hook (python_hook.py), which is installed first. Only then are the
image's own site folders added (their `.pth` files are the image's), the package set's
folders after the standard library, and `exit`, `quit`, `help` put in place as `site`
would. It imports what the policy preloads, then asks the supervisor for the program
(see `_Channel`): one header line of JSON (`file`, `call`, `env`) and the code. It runs
the code as `__main__`, exactly as `python3 main.py` would (the supervisor wrote the
file). In a session (`"session": true`) it runs call after call in one namespace.

The hook explains; it does not hold the line: the kernel refuses a new process and any
write outside the sandbox's folders, and the supervisor alone reports how the run
ended. Standard library only; CPython 3.8 and later.
"""


def _read_json(text):
    """Parses the settings (objects, arrays, strings, numbers, true/false/null)."""
    at = 0
    escapes = {'"': '"', "\\": "\\", "/": "/", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t"}

    def skip():
        nonlocal at
        while at < len(text) and text[at] in " \t\r\n":
            at += 1

    def value():
        nonlocal at
        skip()
        char = text[at]
        if char == "{":
            at += 1
            result = {}
            skip()
            if text[at] == "}":
                at += 1
                return result
            while True:
                skip()
                key = value()
                skip()
                at += 1  # the colon
                result[key] = value()
                skip()
                at += 1
                if text[at - 1] == "}":
                    return result
        if char == "[":
            at += 1
            result = []
            skip()
            if text[at] == "]":
                at += 1
                return result
            while True:
                result.append(value())
                skip()
                at += 1
                if text[at - 1] == "]":
                    return result
        if char == '"':
            at += 1
            out = []
            while text[at] != '"':
                if text[at] == "\\":
                    kind = text[at + 1]
                    if kind == "u":
                        out.append(chr(int(text[at + 2:at + 6], 16)))
                        at += 6
                    else:
                        out.append(escapes[kind])
                        at += 2
                else:
                    out.append(text[at])
                    at += 1
            at += 1
            return "".join(out)
        for word, result in (("true", True), ("false", False), ("null", None)):
            if text.startswith(word, at):
                at += len(word)
                return result
        start = at
        while at < len(text) and text[at] in "-+.0123456789eE":
            at += 1
        number = text[start:at]
        return float(number) if any(c in number for c in ".eE") else int(number)

    return value()


def _main(print_exception):
    import os
    import sys

    if len(sys.argv) != 2:
        sys.stderr.write("usage: python_guard.py SETTINGS_JSON\n")
        sys.exit(2)
    settings = _read_json(sys.argv[1])
    # `site` is frozen into the interpreter: importing it runs nothing of the image's
    # or a package's (under -S it does not process anything by itself).
    import site

    site_dirs = [d for d in site.getsitepackages() if os.path.isdir(d)]
    package_dirs = [d for d in os.environ.get("PYTHONPATH", "").split(":") if d.startswith("/")]
    import python_hook

    python_hook.install(settings, __file__, site_dirs + package_dirs)
    _start_site(site, site_dirs, package_dirs)
    channel = _Channel()
    folder = os.environ.pop("CODE_SANDBOX_FIGURES", None)
    figures = _Figures(folder if settings.get("figures") else None)
    # Imported so that their bytecode is cached: no handle on them is left in
    # sys.modules (empty modules stand in, which the import system expects there).
    for name in ("python_guard", "python_hook"):
        if name in sys.modules:
            sys.modules[name] = type(sys)(name)
    # What the policy preloads is imported now, under the hook, so that its cost is
    # paid before the call; a module that fails to import is said once, on stderr.
    for name in settings.get("preload", ()):
        try:
            __import__(name)
        except Exception as error:
            sys.stderr.write("code-sandbox-mcp: pool.preload: cannot import %s (%s)\n" % (name, error))

    main = sys.modules["__main__"]
    # This bootstrap runs as `__main__`: its own names go, the snippet's namespace is
    # what `python3 main.py` would give it.
    namespace = main.__dict__
    builtins = namespace["__builtins__"]
    loader = getattr(main, "__loader__", None)
    namespace.clear()
    namespace.update({
        "__name__": "__main__",
        "__doc__": None,
        "__package__": None,
        "__loader__": loader,
        "__spec__": None,
        "__annotations__": {},
        "__builtins__": builtins,
    })
    if settings.get("session"):
        _serve_session(channel, namespace, print_exception, figures)
        return

    header, source = channel.next()
    _modules_in(header)
    os.environ.update(header.get("env", {}))
    main_path = header["file"]
    # `python3 main.py` semantics: argv, the script's directory first on the path.
    sys.argv[:] = [main_path.rsplit("/", 1)[-1]]
    sys.path[0] = main_path.rsplit("/", 1)[0] or "/"
    namespace.update({"__file__": main_path, "__cached__": None})
    # Registered before the snippet's own exit handlers, so it runs after all of them.
    import atexit
    atexit.register(figures.save)
    end = None
    try:
        code = _run(source, main_path, namespace, print_exception)
    except SystemExit as error:
        end = error
    # The figures still open, saved now: matplotlib's own exit handler, registered
    # after this one, closes them all first.
    figures.save()
    # From here on this file's frames call the program's own objects (its `SystemExit`
    # code's `__str__`, its exit handlers, weakref callbacks, `__del__`): the hook
    # judges what they ask as the program's.
    sys.audit("code-sandbox-mcp.exiting")
    if end is not None:
        code = _exit_code(end)
    _finish(code, namespace)


class _Channel:
    """The way the program comes from the supervisor. With user notification (`notify`)
    the main thread `read`s a number no fd has: the kernel hands the call to the
    supervisor, which answers it with a fresh fd holding the program (its number is the
    count `read` returns); the number read also says the call before is done, and with
    which status. Only the interpreter's main thread gets an answer. Without it (`pipe`,
    gVisor) the program comes on fd 4, framed by its length, and a session call's end
    is a line on fd 3."""

    FIRST = 0x7FFF0000
    READY = FIRST + 256

    def __init__(self):
        import os

        self.mode = os.environ.pop("CODE_SANDBOX_CHANNEL", "pipe")
        self.read = os.read
        self.write = os.write
        self.close = os.close

    def next(self, status=None):
        """The next program, `(header, code)`; `status`: the call before ended so."""
        if self.mode == "notify":
            number = self.READY if status is None else self.FIRST + (status & 0xFF)
            fd = len(self.read(number, 1 << 20))
            parts = []
            while True:
                chunk = self.read(fd, 1 << 20)
                if not chunk:
                    break
                parts.append(chunk)
            self.close(fd)
            data = b"".join(parts)
        else:
            if status is not None:
                self.write(3, b"\x1edone %d\n" % status)
            size = int.from_bytes(self._exactly(4, 4), "little")
            data = self._exactly(4, size)
        header, _, code = data.partition(b"\n")
        return _read_json(header.decode("utf-8")), code

    def _exactly(self, fd, size):
        parts = []
        while size > 0:
            chunk = self.read(fd, size)
            if not chunk:
                raise SystemExit(0)  # the supervisor is gone
            parts.append(chunk)
            size -= len(chunk)
        return b"".join(parts)


class _Figures:
    """Matplotlib draws off screen, with `show()` saving the open figures as PNG files in
    the folder the supervisor returns figures from (and closing them), instead of
    opening a window: the backend the program gets unless it picks another. The backend
    module is made only when matplotlib asks for it by name, so a program that never
    plots never imports matplotlib. What is still open when the program (or a session
    call) ends is saved too, as a notebook would show it."""

    def __init__(self, folder):
        self.folder = folder
        self.count = 0
        if folder:
            self._install()

    def save(self):
        """Saves the open figures, then closes them."""
        import sys

        if not self.folder:
            return
        pyplot = sys.modules.get("matplotlib.pyplot")
        if pyplot is None:
            return
        try:
            numbers = pyplot.get_fignums()
        except Exception:
            return
        for number in numbers:
            self.count += 1
            path = "%s/figure-%06d.png" % (self.folder, self.count)
            try:
                pyplot.figure(number).savefig(path, format="png")
            except Exception as error:
                sys.stderr.write("code-sandbox-mcp: figure %s could not be rendered: %s\n" % (number, error))
        try:
            pyplot.close("all")
        except Exception:
            pass

    def _install(self):
        import os
        import sys
        from importlib.machinery import ModuleSpec

        name = "_code_sandbox_figures"
        save = self.save

        def show(*args, **kwargs):
            save()

        class Backend:
            @staticmethod
            def find_spec(fullname, path=None, target=None):
                return ModuleSpec(name, Backend) if fullname == name else None

            @staticmethod
            def create_module(spec):
                return None

            @staticmethod
            def exec_module(module):
                from matplotlib.backends.backend_agg import FigureCanvasAgg

                module.FigureCanvas = FigureCanvasAgg
                module.show = show

        sys.meta_path.append(Backend)
        os.environ["MPLBACKEND"] = "module://" + name


def _modules_in(header):
    """Tells the hook the modules handed in with this program or call (their paths and
    the SHA-256 of the source the static check read), taken out of the environment the
    program will see."""
    import sys

    env = header.get("env") or {}
    listed = env.pop("CODE_SANDBOX_MODULES_IN", None)
    if not listed:
        return
    # Read with this file's own parser: importing `json` here (and `re` with it) would
    # cost every call about 10 ms.
    pairs = tuple((str(path), str(digest)) for path, digest in _read_json(listed).items())
    sys.audit("code-sandbox-mcp.modules-in", pairs)


def _run(source, filename, namespace, print_exception):
    """Compiles and runs one program (or session call) in `namespace`; returns 1 when
    it failed (the traceback printed as Python prints it), else 0. `SystemExit` goes
    through: it ends the interpreter, as it would end `python3 main.py`. The hook is
    told the program's file, then its code, by an audit event only this file's frames
    can raise to any effect."""
    import sys

    sys.audit("code-sandbox-mcp.program", filename, None)
    try:
        code = compile(source, filename, "exec", dont_inherit=True)
    except SyntaxError:
        # Without this bootstrap's frame: a syntax error shows only the snippet's line.
        print_exception(sys.exc_info(), skip=1)
        return 1
    sys.audit("code-sandbox-mcp.program", filename, code)
    try:
        exec(code, namespace)
    except SystemExit:
        raise
    except BaseException:
        print_exception(sys.exc_info(), skip=1)
        return 1
    return 0


def _exit_code(end):
    """The status `SystemExit` ends the interpreter with, as Python computes it: `None`
    is 0, an integer is itself, anything else is printed on stderr and is 1."""
    import sys

    code = end.code
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    try:
        sys.stdout.flush()
    except Exception:
        pass
    try:
        sys.stderr.write(str(code) + "\n")
        sys.stderr.flush()
    except Exception:
        pass
    return 1


def _finish(code, namespace):
    """Ends a stateless program as Python's own shutdown would, up to the point where
    what remains changes nothing the program can see: non-daemon threads are joined,
    the exit handlers run (the snippet's, then the figures), the program's namespace
    is released (so its objects' `__del__` run and its open files are flushed, as at
    shutdown), stdout and stderr are flushed (120 when that fails, as Python exits).
    Then the process exits at once: tearing down every imported module costs
    milliseconds for the standard library alone and about 90 ms once pandas is
    imported, and Python does not promise finalizers at exit (objects in reference
    cycles keep theirs unrun, as under `os._exit`). The supervisor reports the status
    this exit names to the kernel; nothing here decides it."""
    import atexit
    import os
    import sys

    threading = sys.modules.get("threading")
    if threading is not None:
        try:
            threading._shutdown()
        except BaseException:
            pass
    atexit._run_exitfuncs()
    flushed = True
    # As Python clears a module at shutdown: names with one leading underscore first,
    # then the others, `__builtins__` kept, so a `__del__` still finds the builtins.
    for private in (True, False):
        for name in [n for n in namespace if type(n) is str and n != "__builtins__"]:
            if not private or (name.startswith("_") and not name.startswith("__")):
                try:
                    namespace[name] = None
                except BaseException:
                    pass
    for stream in (sys.stdout, sys.stderr):
        try:
            if stream is not None:
                stream.flush()
        except BaseException:
            flushed = False
    if not flushed and code == 0:
        code = 120
    # Its output and records pipes are closed before it exits, so that the supervisor,
    # told of the `exit_group` by the kernel, reports the end without waiting for the
    # kernel to tear the process down.
    for fd in (1, 2, 3):
        try:
            os.close(fd)
        except OSError:
            pass
    os._exit(code & 0xFF if isinstance(code, int) else 1)


def _serve_session(channel, namespace, print_exception, figures):
    """Runs one call after another in the same namespace, as a REPL does: each call's
    code comes from the supervisor, its output goes out as it is written, and asking for
    the next call says this one is done. `sys.exit` ends the session (and the
    interpreter)."""
    import importlib
    import linecache
    import os
    import sys

    # As in Python's REPL, the working directory is where imports look first: a
    # module handed in with a call can be imported by it.
    sys.path[0] = os.getcwd()
    status = None
    env_set = False
    while True:
        header, source = channel.next(status)
        _modules_in(header)
        # Files of this call were written after the finders last looked.
        importlib.invalidate_caches()
        if not env_set:
            os.environ.update(header.get("env", {}))
            env_set = True
        name = "<call %d>" % header["call"]
        text = source.decode("utf-8", "replace")
        # Tracebacks show the call's lines: no file is written for it.
        linecache.cache[name] = (len(text), None, text.splitlines(True), name)
        status = _run(source, name, namespace, print_exception)
        figures.save()
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:
                pass


def _print_exception(info, skip):
    """Prints a traceback as Python would, without this bootstrap's own frames."""
    import sys
    import traceback

    kind, value, tb = info
    for _ in range(skip):
        if tb is not None:
            tb = tb.tb_next
    try:
        sys.stdout.flush()
    except Exception:
        pass
    traceback.print_exception(kind, value, tb)
    sys.stderr.flush()


def _start_site(site, site_dirs, package_dirs):
    """What `site` does at start-up, for the image's folders only: the package set's
    folders go right after the standard library (before the image's site folders, so
    that a package the policy installs wins over the image's copy), unprocessed; the
    image's site folders are added with their `.pth` files; `exit`, `quit`, `help`,
    `copyright`, `credits` and `license` are put in the builtins."""
    import sys

    known = set(sys.path)
    at = len(sys.path)
    for folder in package_dirs:
        if folder not in known:
            sys.path.insert(at, folder)
            at += 1
            known.add(folder)
    for folder in site_dirs:
        site.addsitedir(folder, known)
    site.setquit()
    site.setcopyright()
    site.sethelper()


_main(_print_exception)
