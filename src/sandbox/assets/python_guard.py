"""The policy inside a Python sandbox: audit hooks installed before the snippet's first line.

Started (imported) with SETTINGS_JSON as its argument, under the box's supervisor, when
the box is made, before any code is known. It installs one `sys.addaudithook` hook that
maps CPython's audit events to the policy's blocking rules (given in SETTINGS_JSON),
imports what the policy preloads, then asks the supervisor for the program (see
`_Channel`): one header line of JSON (`file`, `call`, `env`) and the code. It runs the
code as `__main__`, exactly as `python3 main.py` would (the supervisor wrote the file).
In a session (`"session": true`) it runs call after call in one namespace instead.

The hook explains; it does not hold the line. What the policy's capabilities are kept
by lies outside this process: the kernel refuses a new process or program and any
write outside the sandbox's folders, and the supervisor alone reports how the run
ended. A denied event here writes one record (rule, layer, what was attempted, the
snippet's line) on fd 3, which the supervisor passes on, and ends the process at once
with exit status 126: an early, precise explanation of what the kernel would refuse.

Who asks matters. Starting a process is denied whoever asks, but only the snippet's own
attempt ends the run: a library's (pandas' import runs `uname -p`) gets a PermissionError,
as on a system without the command, and copes. Compiling source text,
importing a denied module and the like are denied only when the request comes from the
snippet, from code it wrote (files under /sandbox, /tmp, /dev/shm), or from a standard
library module whose job is running code given as a string (timeit, pdb, code, ...): the
standard library and installed packages keep working (dataclasses and namedtuple compile
source, numpy imports ctypes, matplotlib imports subprocess).

Everything the hook relies on is captured here, before the snippet runs, and kept in
closures: the snippet may replace `os.write`, `sys.stderr` or builtins without effect.
Standard library only; CPython 3.8 and later.
"""

def _install(settings):
    import os
    import sys

    rules = tuple(settings["rules"])

    # -- captured before the snippet can touch anything --------------------------------
    sys_module = sys
    write = os.write
    exit_now = os._exit
    def dumps(value):
        # JSON for the record: dicts of strings, numbers and None. Nested here:
        # the bootstrap's module globals are the snippet's once it runs.
        if value is None:
            return "null"
        if isinstance(value, bool):
            return "true" if value else "false"
        if isinstance(value, int):
            return str(value)
        if isinstance(value, dict):
            return "{" + ", ".join(dumps(str(k)) + ": " + dumps(v) for k, v in value.items()) + "}"
        text = str(value)
        out = ['"']
        for char in text:
            if char in '"\\':
                out.append("\\" + char)
            elif ord(char) < 0x20 or 0xD800 <= ord(char) <= 0xDFFF:
                out.append("\\u%04x" % ord(char))
            else:
                out.append(char)
        out.append('"')
        return "".join(out)
    getframe = sys._getframe
    realpath = os.path.realpath

    def proc_mem(path):
        # /proc/(self|thread-self|PID)[/task/TID]/mem
        parts = path.split("/")
        if len(parts) not in (4, 6) or parts[:2] != ["", "proc"] or parts[-1] != "mem":
            return False
        owner_ok = parts[2] in ("self", "thread-self") or parts[2].isdigit()
        return owner_ok and (len(parts) == 4 or (parts[3] == "task" and parts[4].isdigit()))
    fspath = os.fspath
    # The snippet's file, named when the program arrives (`running`).
    main_file = [None]
    writable = ("/sandbox/", "/tmp/", "/dev/shm/")
    frozen_import = ("<frozen importlib._bootstrap>", "<frozen importlib._bootstrap_external>")
    # Modules that only carry out an import someone else asked for.
    import_machinery = frozenset((
        "importlib", "importlib._bootstrap", "importlib._bootstrap_external",
        "importlib.util", "importlib.machinery", "importlib.abc", "importlib._common",
    ))
    # Standard-library modules whose purpose is running code handed over as a string:
    # a compile they do on the snippet's behalf is the snippet's.
    code_runners = frozenset((
        "timeit", "cProfile", "profile", "trace", "bdb", "pdb", "doctest", "code",
        "codeop", "runpy", "pydoc", "idlelib", "logging.config", "rlcompleter",
        "unittest.mock", "zipimport", "pkgutil", "imp", "_pyrepl", "site",
    ))

    type_evaluators = frozenset(("typing", "annotationlib"))

    def calls_in(source):
        return (isinstance(source, str) and "(" in source) or (
            isinstance(source, bytes) and b"(" in source)

    def glob_matches(pattern, name):
        # `*` matches any run of characters, dots included (as the static engine).
        parts = pattern.split("*")
        if len(parts) == 1:
            return pattern == name
        if not name.startswith(parts[0]) or not name.endswith(parts[-1]):
            return False
        position = len(parts[0])
        end = len(name) - len(parts[-1])
        for middle in parts[1:-1]:
            found = name.find(middle, position, end)
            if found < 0:
                return False
            position = found + len(middle)
        return position <= end

    def module_matches(pattern, module):
        return glob_matches(pattern, module) or module.startswith(pattern + ".")

    def rule_for_names(names):
        for rule in rules:
            for pattern in rule.get("references", ()):
                for name in names:
                    if glob_matches(pattern, name):
                        return rule
        return None

    def rule_for_module(module):
        for rule in rules:
            for pattern in rule.get("modules", ()):
                if module_matches(pattern, module):
                    return rule
        return None

    def rule_for_module_file(filename):
        # `/usr/lib/python3.13/subprocess.py` is `subprocess`; a package's
        # `__init__.py` is its directory's name. Matched against the last part of
        # each denied module pattern.
        parts = filename.rsplit("/", 2)
        if len(parts) < 2 or not filename.endswith(".py"):
            return None
        name = parts[-1][:-3]
        if name == "__init__":
            name = parts[-2]
        for rule in rules:
            for pattern in rule.get("modules", ()):
                if glob_matches(pattern.rsplit(".", 1)[-1], name):
                    return rule
        return None

    def rule_for_kind(kind):
        for rule in rules:
            if kind in rule.get("dynamic", ()):
                return rule
        return None

    # Audit events that start a process, with the names a rule's `references` must
    # match for the event to be denied. Denied whoever asks.
    process_events = {
        "subprocess.Popen": ("subprocess.Popen", "subprocess.run", "os.popen", "os.system"),
        "os.system": ("os.system",),
        "os.exec": ("os.execv", "os.execve", "os.execl", "os.execvp", "os.execvpe"),
        "os.spawn": ("os.spawnv", "os.spawnve", "os.spawnl", "os.spawnvp"),
        "os.posix_spawn": ("os.posix_spawn", "os.posix_spawnp"),
        "os.fork": ("os.fork", "pty.fork", "pty.spawn"),
        "os.forkpty": ("os.forkpty", "pty.fork", "pty.spawn"),
        "os.startfile": ("os.startfile",),
        "pty.spawn": ("pty.spawn",),
        "webbrowser.open": ("os.system", "subprocess.Popen"),
    }
    # Events that reach native code, build code by hand or walk the interpreter: the
    # classic routes around every hook. Denied when the snippet (or code it wrote, or
    # a code runner) asks; libraries use some of them for themselves (numpy imports
    # ctypes, asyncio and typing rebuild code objects).
    native_events = {
        "ctypes.dlopen": ("ctypes.CDLL", "ctypes.cdll"),
        "ctypes.dlsym": ("ctypes.CDLL", "ctypes.cdll"),
        "ctypes.dlsym/handle": ("ctypes.CDLL",),
        "ctypes.call_function": ("ctypes.CFUNCTYPE", "ctypes.CDLL"),
        "ctypes.cdata": ("ctypes.c_char", "ctypes.cast"),
        "ctypes.cdata/buffer": ("ctypes.c_char", "ctypes.cast"),
        "ctypes.string_at": ("ctypes.string_at",),
        "ctypes.wstring_at": ("ctypes.wstring_at",),
        "ctypes.addressof": ("ctypes.addressof",),
        "ctypes.create_string_buffer": ("ctypes.create_string_buffer",),
        "code.__new__": ("types.CodeType",),
        "function.__new__": ("types.FunctionType",),
        "gc.get_objects": ("gc.get_objects",),
        "gc.get_referrers": ("gc.get_referrers",),
        "gc.get_referents": ("gc.get_referents",),
        "sys.settrace": ("sys.settrace",),
        "sys.setprofile": ("sys.setprofile",),
    }
    # Events that load code or objects from data: denied when the snippet (or code it
    # wrote, or a code runner) asks.
    requested_events = {
        "pickle.find_class": ("pickle.loads", "pickle.load"),
        "marshal.loads": ("marshal.loads",),
        "marshal.load": ("marshal.load", "marshal.loads"),
        "exec": ("exec", "eval"),
        "compile": ("compile", "exec", "eval"),
        "_xxsubinterpreters.create": ("_xxsubinterpreters.create",),
        "_interpreters.create": ("_interpreters.create",),
        "cpython.run_command": ("exec",),
        "cpython.run_file": ("exec",),
    }

    def is_main(filename):
        # The snippet's file, or one call of a session (`<call 3>`).
        return filename == main_file[0] or (isinstance(filename, str) and filename.startswith("<call "))

    def innermost_line(frame):
        while frame is not None:
            if is_main(frame.f_code.co_filename):
                return frame.f_lineno
            frame = frame.f_back
        return None

    def from_writable(filename):
        return is_main(filename) or filename.startswith(writable) or filename == "<string>"

    def requester(frame):
        """The first frame below the import machinery and this hook: who asked."""
        while frame is not None:
            filename = frame.f_code.co_filename
            machinery = filename in frozen_import or filename.startswith("<frozen importlib")
            if not machinery and frame.f_globals.get("__name__") not in import_machinery:
                return frame
            frame = frame.f_back
        return None

    def asked_by_snippet(frame):
        """True when the code asking is the snippet's, code it wrote, or a code runner
        working for it (anywhere on the way down from the requester)."""
        frame = requester(frame)
        if frame is None:
            return False
        filename = frame.f_code.co_filename
        if from_writable(filename):
            # `<string>` is code compiled from text; it counts as the snippet's only
            # when the snippet is what is running it (always true for code that got
            # this far, since compiling it from the snippet was itself checked).
            return True
        module = frame.f_globals.get("__name__", "")
        if module in code_runners or module.split(".")[0] in code_runners:
            return True
        return False

    # Modules that start processes for whoever calls them.
    process_plumbing = frozenset((
        "subprocess", "os", "posix", "pty", "asyncio", "multiprocessing", "concurrent",
        "_posixsubprocess", "webbrowser",
    ))
    refused = PermissionError

    def started_by_snippet(frame):
        """True when the process start comes from the snippet (or code it wrote, or a
        code runner): the first frame outside the process plumbing is theirs. A library
        starting one for itself (`platform.processor()` runs `uname -p` when pandas
        loads) gets a PermissionError instead, as it would on a system without the
        command, and copes; either way nothing starts."""
        while frame is not None:
            filename = frame.f_code.co_filename
            module = frame.f_globals.get("__name__", "") or ""
            if from_writable(filename) or str(module).split(".")[0] not in process_plumbing:
                break
            frame = frame.f_back
        if frame is None:
            return True
        filename = frame.f_code.co_filename
        if from_writable(filename):
            return True
        module = str(frame.f_globals.get("__name__", ""))
        return module in code_runners or module.split(".")[0] in code_runners

    def short(value):
        try:
            text = repr(value)
        except Exception:
            text = "<unprintable>"
        return text if len(text) <= 160 else text[:157] + "..."

    def block(rule, event, args, frame):
        # Whatever goes wrong while reporting, the process ends here.
        try:
            record = {
                "rule": rule["id"],
                "message": rule["message"],
                "layer": "python-audit-hook",
                "attempted": event + " " + " ".join(short(a) for a in args[:3]),
                "line": innermost_line(frame),
            }
            try:
                sys_module.stdout.flush()
            except Exception:
                pass
            write(3, (dumps(record) + "\n").encode("utf-8", "replace"))
        finally:
            exit_now(126)

    def path_of(value):
        try:
            value = fspath(value)
        except TypeError:
            return None
        if isinstance(value, bytes):
            value = value.decode("utf-8", "replace")
        return value if isinstance(value, str) else None

    def is_proc_mem(path):
        # Links (a symlink in /tmp, /proc/self/fd/N) are followed to what they name.
        if path.startswith(("/proc", "/dev", "/sandbox", "/tmp")) or not path.startswith("/"):
            path = realpath(path)
        return proc_mem(path)

    dynamic_rule = rule_for_names(("exec", "eval", "compile")) or rule_for_kind("string-code")
    file_rule = rule_for_kind("file-code") or dynamic_rule
    any_rule = rules[0] if rules else None
    busy = [False]

    def hook(event, args):
        if busy[0]:
            return
        if event in process_events:
            rule = rule_for_names(process_events[event])
            if rule is not None:
                frame = getframe(1)
                if started_by_snippet(frame):
                    busy[0] = True
                    block(rule, event, args, frame)
                raise refused(1, "starting processes is not allowed in this sandbox (rule %s)" % rule["id"])
            return
        if event in native_events:
            rule = rule_for_names(native_events[event])
            if rule is None and event.startswith("ctypes."):
                rule = rule_for_module("ctypes")
            if rule is not None:
                frame = getframe(1)
                if asked_by_snippet(frame):
                    busy[0] = True
                    block(rule, event, args, frame)
            return
        if event == "open":
            path = path_of(args[0]) if args else None
            if path is None:
                return
            if any_rule is not None and is_proc_mem(path):
                busy[0] = True
                block(dynamic_rule or any_rule, event, args, getframe(1))
            # Source or bytecode the snippet wrote, read by the import system.
            if file_rule is not None and path.startswith(writable) and path != main_file[0]:
                if path.endswith((".py", ".pyc", ".pth", ".zip", ".pyw", ".so")):
                    frame = getframe(1)
                    if importing(frame):
                        busy[0] = True
                        block(file_rule, "import of a file written at run time", (path,), frame)
            return
        if event == "import":
            module = args[0] if args else ""
            if not isinstance(module, str):
                return
            rule = rule_for_module(module)
            if rule is not None:
                frame = getframe(1)
                if asked_by_snippet(frame):
                    busy[0] = True
                    block(rule, event, (module,), frame)
            return
        if event in requested_events:
            if event in ("compile", "exec"):
                if dynamic_rule is None:
                    return
                if event == "compile":
                    source = args[0] if args else None
                    filename = args[1] if len(args) > 1 else None
                    if isinstance(filename, str) and filename != main_file[0] and filename.startswith(writable):
                        busy[0] = True
                        block(file_rule, "compile of a file written at run time", (filename,), getframe(1))
                    if not isinstance(source, (str, bytes)) and type(source).__module__ != "ast":
                        return
                elif args and args[0] is main_code:
                    return
                frame = getframe(1)
                if event == "compile" and calls_in(args[0] if args else None):
                    # typing compiles string annotations (`ForwardRef`); a type never
                    # needs a call, so one with a call in it is code smuggled as a type.
                    asker = requester(frame)
                    if asker is not None and asker.f_globals.get("__name__") in type_evaluators:
                        busy[0] = True
                        block(dynamic_rule, "compile of a string annotation", (source,), frame)
                if event == "exec" and importing(frame):
                    # A module's own code, run by the import system; a module the
                    # snippet wrote was refused when it was opened or compiled. A
                    # denied module asked for through importlib (which raises no
                    # `import` event for it) is recognised by its file here.
                    rule = rule_for_module_file(getattr(args[0], "co_filename", ""))
                    if rule is not None and asked_by_snippet(frame):
                        busy[0] = True
                        block(rule, "import", (args[0].co_filename,), frame)
                    return
                if asked_by_snippet(frame):
                    busy[0] = True
                    block(dynamic_rule, event, args, frame)
                return
            rule = rule_for_names(requested_events[event])
            if rule is None and event.startswith(("marshal.", "pickle.")):
                rule = rule_for_module(event.split(".")[0])
            if rule is not None:
                frame = getframe(1)
                if event.startswith("marshal.") and importing(frame):
                    # The import system reading a cached module; one the snippet wrote
                    # was refused when it was opened.
                    return
                if asked_by_snippet(frame):
                    busy[0] = True
                    block(rule, event, args, frame)
            return
        if event == "object.__setattr__" or event == "object.__delattr__":
            # The hook's own function objects are not to be rewired.
            target = args[0] if args else None
            if target is hook or target is block or target is asked_by_snippet:
                busy[0] = True
                block(any_rule, event, args[:2], getframe(1))
            return

    def importing(frame):
        # Import machinery between here and the snippet's own module frame (the
        # bootstrap itself runs inside an import, which does not count).
        while frame is not None and frame.f_code is not main_code:
            if frame.f_code.co_filename in frozen_import or frame.f_globals.get("__name__") == "zipimport":
                return True
            frame = frame.f_back
        return False

    main_code = None

    def running(code, filename):
        # Called with the file before it is compiled (its compile is the snippet's
        # own), then with its code before it runs.
        nonlocal main_code
        main_code = code
        main_file[0] = filename

    if rules:
        sys_module.addaudithook(hook)
    return running


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


def _main(install, print_exception):
    import os
    import sys

    if len(sys.argv) != 2:
        sys.stderr.write("usage: python_guard.py SETTINGS_JSON\n")
        sys.exit(2)
    settings = _read_json(sys.argv[1])
    running = install(settings)
    channel = _Channel()
    folder = os.environ.pop("CODE_SANDBOX_FIGURES", None)
    figures = _Figures(folder if settings.get("figures") else None)
    # Imported so that its bytecode is cached: no handle on it is left in sys.modules
    # (an empty module stands in, which the import system expects to find there).
    if "python_guard" in sys.modules:
        sys.modules["python_guard"] = type(sys)("python_guard")
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
        _serve_session(channel, running, namespace, print_exception, figures)
        return

    header, source = channel.next()
    os.environ.update(header.get("env", {}))
    main_path = header["file"]
    # `python3 main.py` semantics: argv, the script's directory first on the path.
    sys.argv[:] = [main_path.rsplit("/", 1)[-1]]
    sys.path[0] = main_path.rsplit("/", 1)[0] or "/"
    namespace.update({"__file__": main_path, "__cached__": None})
    # Registered before the snippet's own exit handlers, so it runs after all of them.
    import atexit
    atexit.register(figures.save)
    try:
        failed = _run(source, main_path, namespace, running, print_exception)
    except SystemExit:
        figures.save()
        raise
    figures.save()
    if failed:
        sys.exit(1)


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


def _run(source, filename, namespace, running, print_exception):
    """Compiles and runs one program (or session call) in `namespace`; returns 1 when
    it failed (the traceback printed as Python prints it), else 0. `SystemExit` goes
    through: it ends the interpreter, as it would end `python3 main.py`."""
    import sys

    running(None, filename)
    try:
        code = compile(source, filename, "exec", dont_inherit=True)
    except SyntaxError:
        # Without this bootstrap's frame: a syntax error shows only the snippet's line.
        print_exception(sys.exc_info(), skip=1)
        return 1
    running(code, filename)
    try:
        exec(code, namespace)
    except SystemExit:
        raise
    except BaseException:
        print_exception(sys.exc_info(), skip=1)
        return 1
    return 0


def _serve_session(channel, running, namespace, print_exception, figures):
    """Runs one call after another in the same namespace, as a REPL does: each call's
    code comes from the supervisor, its output goes out as it is written, and asking for
    the next call says this one is done. `sys.exit` ends the session (and the
    interpreter)."""
    import linecache
    import os
    import sys

    status = None
    env_set = False
    while True:
        header, source = channel.next(status)
        if not env_set:
            os.environ.update(header.get("env", {}))
            env_set = True
        name = "<call %d>" % header["call"]
        text = source.decode("utf-8", "replace")
        # Tracebacks show the call's lines: no file is written for it.
        linecache.cache[name] = (len(text), None, text.splitlines(True), name)
        status = _run(source, name, namespace, running, print_exception)
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


_main(_install, _print_exception)
