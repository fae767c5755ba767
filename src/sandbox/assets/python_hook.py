"""The policy's explainer inside a Python sandbox: one audit hook, installed by the
bootstrap (python_guard.py) before anything else runs in the interpreter.

It maps CPython's audit events to the policy's blocking rules. A denied request writes
one record (rule, layer, what was attempted, the snippet's line) on fd 3, which the
supervisor passes on, and ends the process at once with status 126. The hook explains;
it does not hold the line: the kernel refuses any new process and any write outside
the sandbox's folders whatever happens here (PEP 578: audit hooks are not a sandbox).
It is still made hard to switch off cheaply:

- It never calls an object of the snippet's. Arguments are used only when their type
  is exactly `str`, `bytes` or `int` (no `os.fspath`, `repr`, `hash` or `==` on
  anything else, so no `__fspath__`, `__repr__` or `__eq__` of the snippet's runs
  while the hook's frame is live), and no attribute of theirs is read.
- Its state lives in its closure, which nothing of the snippet's can reach: the hook
  calls no snippet code, and a frame of this file handed out through a traceback,
  `sys._current_frames` or the garbage collector is refused.
- Who asks is decided by code identity, never by names the snippet can set: a frame
  whose code comes from a file of the read-only image (the standard library, the
  image's and the policy's packages, this guard) is a library's; anything else (the
  snippet's file, `<call N>`, `<string>`, files under the writable folders, a path
  spelled with `..`) is the snippet's. Import machinery is skipped. A library frame
  that reaches `exec`, `eval` or `compile` (or an import) through a variable rather
  than by name is acting for someone else (a thread pool, `sched`, `singledispatch`,
  `copy` reductions, `asyncio` callbacks, `weakref.finalize`): the request is the
  snippet's. No Python frame at all (a builtin handed to `atexit` or a thread) is the
  snippet's too, and threads the snippet starts are its own.
- A library evaluating a string by name on the program's behalf (outside its own
  import) is allowed only when the policy names it (`evaluators` in the rule that
  denies `exec`): `collections.namedtuple`, `dataclasses`, `typing`'s string
  annotations and `sympy` in the default policy. The code they evaluate runs as the
  snippet's own (its frames are `<string>`), so whatever it asks is judged again.

Standard library only; CPython 3.8 and later.
"""


def install(settings, guard_file, library_roots):
    import os
    import sys
    import _thread

    rules = tuple(settings["rules"])
    if not rules:
        return
    # -- captured before the snippet can touch anything -----------------------------
    write = os.write
    exit_now = os._exit
    getframe = sys._getframe
    realpath = os.path.realpath
    normpath = os.path.normpath
    get_ident = _thread.get_ident
    main_thread = get_ident()
    stdout = sys.stdout
    version = sys.version_info[:2]
    str_type, bytes_type, int_type, tuple_type = str, bytes, int, tuple
    frame_type = type(getframe(0))
    code_type = type(install.__code__)
    from hashlib import sha256
    try:
        raise LookupError
    except LookupError as error:
        traceback_type = type(error.__traceback__)
    handle_type = getattr(_thread, "_ThreadHandle", None)
    hook_file = install.__code__.co_filename
    import opcode

    opmap = opcode.opmap
    EXTENDED_ARG = opmap["EXTENDED_ARG"]
    LOAD_GLOBAL = opmap["LOAD_GLOBAL"]
    LOAD_NAME = opmap["LOAD_NAME"]
    LOAD_ATTR = opmap["LOAD_ATTR"]
    LOAD_METHOD = opmap.get("LOAD_METHOD", -1)
    IMPORT_NAME = opmap["IMPORT_NAME"]
    LOAD_FROM_DICT = opmap.get("LOAD_FROM_DICT_OR_GLOBALS", -1)
    global_shift = 1 if version >= (3, 11) else 0
    attr_shift = 1 if version >= (3, 12) else 0

    writable = tuple(
        path.rstrip("/") + "/" for path in settings.get("writable") or ("/sandbox", "/tmp", "/dev/shm")
    )
    # The image's own code: the standard library, the site and package folders, this
    # guard. Everything under them is read-only in the box.
    stdlib = os.path.dirname(os.__file__)
    image_roots = [stdlib + "/", os.path.dirname(guard_file) + "/"]
    for root in library_roots:
        if root.startswith("/"):
            image_roots.append(root.rstrip("/") + "/")
    image_roots = tuple(root for root in image_roots if not root.startswith(writable))
    machinery_files = (stdlib + "/importlib/",)
    # The `-c` line that imported the bootstrap: the bottom frame of the main thread.
    bottom = getframe(0)
    while bottom.f_back is not None:
        bottom = bottom.f_back
    trusted_codes = (bottom.f_code,)


    # ---- the policy ---------------------------------------------------------------
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
                if glob_matches(pattern, module) or module.startswith(pattern + "."):
                    return rule
        return None

    def rule_for_module_file(filename):
        # `/usr/lib/python3.13/subprocess.py` is `subprocess`; a package's `__init__.py`
        # is its folder's name. Matched against the last part of each denied module.
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

    dynamic_rule = rule_for_names(("exec", "eval", "compile")) or rule_for_kind("string-code")
    file_rule = rule_for_kind("file-code") or dynamic_rule
    any_rule = dynamic_rule or rules[0]
    evaluators = tuple(dynamic_rule.get("evaluators", ())) if dynamic_rule else ()
    # Evaluators of string annotations: a type needs names, dots, subscripts, commas,
    # `|`, literals and `None`; anything else (a call, arithmetic) is code smuggled in.
    annotation_evaluators = ("typing.*", "inspect.get_annotations", "annotationlib.*")
    type_characters = frozenset(
        "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.,[]| '\"-\t"
    )

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
    # Modules that start processes for whoever calls them: skipped to find who asked.
    process_plumbing = tuple(
        stdlib + "/" + name
        for name in ("subprocess.py", "os.py", "pty.py", "asyncio/", "multiprocessing/",
                     "concurrent/", "webbrowser.py")
    ) + ("<frozen os>",)
    # Names a library calls when it starts a process itself.
    process_names = frozenset((
        "Popen", "run", "call", "check_call", "check_output", "getoutput", "getstatusoutput",
        "system", "popen", "fork", "forkpty", "posix_spawn", "posix_spawnp", "spawn",
        "spawnv", "spawnve", "spawnl", "spawnle", "spawnlp", "spawnvp", "spawnvpe", "execv",
        "execve", "execl", "execle", "execlp", "execvp", "execvpe", "create_subprocess_exec",
        "create_subprocess_shell", "subprocess_exec", "subprocess_shell", "open",
        "_get_command_stdout", "_syscmd_file", "_syscmd_ver", "startfile",
    ))
    # Events that reach native code, build code by hand or walk the interpreter: the
    # classic routes around every hook. Libraries use some of them for themselves.
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
        "sys._current_frames": ("sys._getframe",),
        "sys._current_exceptions": ("sys._getframe",),
    }
    ctypes_plumbing = (stdlib + "/ctypes/",)
    # Events that load code or objects from data.
    data_events = {
        "pickle.find_class": ("pickle.loads", "pickle.load"),
        "marshal.loads": ("marshal.loads",),
        "marshal.load": ("marshal.load", "marshal.loads"),
        "_xxsubinterpreters.create": ("_xxsubinterpreters.create",),
        "_interpreters.create": ("_interpreters.create",),
        "cpython.run_command": ("exec",),
        "cpython.run_file": ("exec",),
    }
    code_names = frozenset(("exec", "eval", "compile"))
    import_names = frozenset(("__import__", "import_module"))

    # ---- who asks ---------------------------------------------------------------------
    # `modules_in`: the modules handed in with the program, by path, with the SHA-256
    # of the source the static check read: importing one is importing checked code.
    # `exiting`: the bootstrap runs the program's exit handlers and finalizers (from
    # its own frame, which then vouches for nothing).
    state = {"program": None, "code": None, "modules_in": {}, "exiting": False}
    snippet_threads = []  # thread handles the snippet started
    raw_threads = [False]  # a thread started without threading, by the snippet

    def is_library_file(filename):
        if filename.startswith("<frozen "):
            return True
        if not filename.startswith(image_roots) or filename.startswith(writable):
            return False
        # A path spelled with `..`, `.` or `//` is not what it says.
        return normpath(filename) == filename

    def is_library(code):
        return code in trusted_codes or is_library_file(code.co_filename)

    def is_machinery(code):
        filename = code.co_filename
        return filename.startswith("<frozen importlib") or filename.startswith(machinery_files)

    loads_cache = {}

    def loads_of(code):
        """Global names, attribute names and imports the code's own instructions name."""
        key = id(code)
        cached = loads_cache.get(key)
        if cached is not None and cached[0] is code:
            return cached[1]
        names = code.co_names
        found = set()
        raw = code.co_code
        extended = 0
        for at in range(0, len(raw) - 1, 2):
            op = raw[at]
            arg = raw[at + 1] | extended
            if op == EXTENDED_ARG:
                extended = arg << 8
                continue
            extended = 0
            if op == LOAD_GLOBAL:
                index = arg >> global_shift
            elif op == LOAD_ATTR:
                index = arg >> attr_shift
            elif op in (LOAD_NAME, LOAD_FROM_DICT, LOAD_METHOD):
                index = arg
            elif op == IMPORT_NAME:
                found.add("import")
                continue
            else:
                continue
            if index < len(names):
                found.add(names[index])
        result = frozenset(found)
        loads_cache[key] = (code, result)
        return result

    def snippet_thread():
        ident = get_ident()
        if ident == main_thread:
            return False
        for handle in snippet_threads:
            if handle.ident == ident:
                return True
        return raw_threads[0]

    def first_asker(frame, plumbing=()):
        """The first frame that is neither import machinery nor `plumbing`."""
        while frame is not None:
            code = frame.f_code
            if not is_machinery(code) and not code.co_filename.startswith(plumbing):
                return frame
            frame = frame.f_back
        return None

    def in_library_import(frame):
        """True when, below `frame`, a library module is being imported before any of
        the snippet's frames: a library's own initialisation."""
        while frame is not None:
            code = frame.f_code
            if not is_library(code):
                return False
            if code.co_filename.startswith("<frozen importlib"):
                return True
            frame = frame.f_back
        return False

    def at_exit(asker):
        """The bootstrap's frame while it runs the program's exit handlers: a builtin
        the program handed to `atexit` (or a weakref callback) is called from it."""
        return state["exiting"] and asker is not None and asker.f_code.co_filename == guard_file

    def by_snippet(frame, names, plumbing=()):
        """Whether the request made at `frame` is the snippet's: its own code asked, or
        a library relayed it (named none of `names`), or nothing Python asked."""
        if state["program"] is None:
            return False  # the bootstrap, before any program
        asker = first_asker(frame, plumbing)
        if asker is None or at_exit(asker):
            return True
        if not is_library(asker.f_code):
            return True
        if names is not None and not (loads_of(asker.f_code) & names):
            return True
        return False

    def module_of(code):
        """`package.module.Qualified.name` of a library frame's code."""
        filename = code.co_filename
        if filename.startswith("<frozen "):
            path = filename[8:-1]
        else:
            path = filename
            for root in sorted(image_roots, key=len, reverse=True):
                if filename.startswith(root):
                    path = filename[len(root):]
                    break
            for suffix in ("/__init__.py", ".py"):
                if path.endswith(suffix):
                    path = path[: -len(suffix)]
                    break
            path = path.replace("/", ".")
        qualname = getattr(code, "co_qualname", code.co_name)
        return path + "." + qualname

    def allowed_evaluator(asker, event, source):
        """A library evaluating a string by name on the program's behalf: allowed when
        the policy names it, and then only for what it is named for."""
        name = module_of(asker.f_code)
        if not any(glob_matches(pattern, name) for pattern in evaluators):
            return False
        if any(glob_matches(pattern, name) for pattern in annotation_evaluators):
            if event == "compile" and type(source) is bytes_type:
                source = source.decode("utf-8", "replace")
            if event == "compile" and type(source) is str_type:
                for char in source:
                    if char not in type_characters:
                        return False
        if name.startswith("timeit.Timer."):
            # Timing a callable is not running a string; `stmt="..."` is. Given a
            # callable, the Timer's template calls it by a name of its own (`_stmt()`),
            # which is all that text can do.
            local = asker.f_locals
            for key, own in (("stmt", "_stmt()"), ("setup", "_setup()")):
                value = local.get(key)
                if type(value) is str_type and value != "pass" and value != own:
                    return False
        return True

    def innermost_line(frame):
        first = None
        while frame is not None:
            code = frame.f_code
            filename = code.co_filename
            if filename == state["program"] or filename.startswith("<call "):
                return frame.f_lineno
            if first is None and not is_library(code):
                first = frame.f_lineno
            frame = frame.f_back
        return first

    # ---- reporting --------------------------------------------------------------------
    def text_of(value):
        # Exact types only: nothing of the snippet's is called to describe it.
        kind = type(value)
        if kind is str_type:
            text = value
        elif kind is bytes_type:
            text = value.decode("utf-8", "replace")
        elif kind is int_type or value is None or value is True or value is False:
            text = "%r" % (value,)
        elif kind is tuple_type:
            return "(" + ", ".join(text_of(item) for item in value[:4]) + ")"
        else:
            text = "<object>"
        return text if len(text) <= 160 else text[:157] + "..."

    def quoted(text):
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

    def block(rule, event, args, frame):
        # Whatever goes wrong while reporting, the process ends here.
        try:
            line = innermost_line(frame)
            attempted = event + " " + " ".join(text_of(a) for a in args[:3])
            record = "{%s: %s, %s: %s, %s: %s, %s: %s, %s: %s}\n" % (
                quoted("rule"), quoted(rule["id"]),
                quoted("message"), quoted(rule["message"]),
                quoted("layer"), quoted("python-audit-hook"),
                quoted("attempted"), quoted(attempted.strip()),
                quoted("line"), "null" if line is None else "%d" % line,
            )
            try:
                stdout.flush()
            except BaseException:
                pass
            write(3, record.encode("utf-8", "replace"))
        finally:
            exit_now(126)

    def cached_module(path):
        # `/sandbox/__pycache__/helpers.cpython-313.pyc` caches `/sandbox/helpers.py`.
        head, _, file = normpath(path).rpartition("/__pycache__/")
        name = file.split(".")[0]
        return head + "/" + name + ".py" if head and name else None

    def path_of(value):
        kind = type(value)
        if kind is bytes_type:
            value = value.decode("utf-8", "replace")
        elif kind is not str_type:
            return None  # the kernel judges what the snippet's own objects name
        return value

    def proc_mem(path):
        # /proc/(self|thread-self|PID)[/task/TID]/mem
        parts = path.split("/")
        if len(parts) not in (4, 6) or parts[:2] != ["", "proc"] or parts[-1] != "mem":
            return False
        owner_ok = parts[2] in ("self", "thread-self") or parts[2].isdigit()
        return owner_ok and (len(parts) == 4 or (parts[3] == "task" and parts[4].isdigit()))

    def is_proc_mem(path):
        if not path.startswith("/"):
            path = os.getcwd() + "/" + path
        path = normpath(path)
        if path.startswith("//"):
            path = path[1:]
        # Links (a symlink in /tmp, /proc/self/fd/N, /proc/self/cwd) are followed.
        return proc_mem(path) or proc_mem(realpath(path))

    def importing(frame):
        # Import machinery between here and the program's own module frame.
        code = state["code"]
        while frame is not None and frame.f_code is not code:
            filename = frame.f_code.co_filename
            if filename.startswith("<frozen importlib") or filename == "<frozen zipimport>":
                return True
            frame = frame.f_back
        return False

    def hook_frame(frame):
        return type(frame) is frame_type and frame.f_code.co_filename == hook_file

    own_functions = []

    # ---- the hook -----------------------------------------------------------------------
    inside = {}  # threads inside the hook: their events are the hook's own work

    def hook(event, args):
        ident = get_ident()
        if ident in inside or type(event) is not str_type:
            return
        inside[ident] = True
        try:
            judge(event, args)
        finally:
            inside.pop(ident, None)

    def judge(event, args):
        try:
            frame = getframe(2)
        except ValueError:
            frame = None  # no Python frame: a builtin called by C (atexit, a thread)
        if event == "code-sandbox-mcp.modules-in":
            # The bootstrap names the modules handed in: ((path, digest), ...).
            if frame is not None and frame.f_code.co_filename == guard_file and len(args) == 1:
                pairs = args[0]
                if type(pairs) is tuple_type:
                    for pair in pairs:
                        if type(pair) is tuple_type and len(pair) == 2:
                            if type(pair[0]) is str_type and type(pair[1]) is str_type:
                                state["modules_in"][pair[0]] = pair[1]
            return
        if event == "code-sandbox-mcp.exiting":
            if frame is not None and frame.f_code.co_filename == guard_file:
                state["exiting"] = True
            return
        if event == "code-sandbox-mcp.program":
            # The bootstrap names the program it runs (its file, then its code).
            if frame is not None and frame.f_code.co_filename == guard_file and len(args) == 2:
                if type(args[0]) is str_type:
                    state["program"] = args[0]
                state["code"] = args[1]
            return
        if event in process_events:
            rule = rule_for_names(process_events[event])
            if rule is not None:
                if by_snippet(frame, process_names, process_plumbing):
                    block(rule, event, args, frame)
                raise PermissionError(1, "starting processes is not allowed in this sandbox (rule %s)" % rule["id"])
            return
        if event in native_events:
            rule = rule_for_names(native_events[event])
            if rule is None and event.startswith("ctypes."):
                rule = rule_for_module("ctypes")
            if rule is None:
                return
            if event == "ctypes.dlsym" and state["program"] is not None and len(args) > 1:
                name = args[1]
                if type(name) is str_type and (name.startswith("Py") or name.startswith("_Py")):
                    block(rule, "ctypes.dlsym of the interpreter's C API", args[1:2], frame)
            if event.startswith("sys._current"):
                if by_snippet(frame, frozenset(("_current_frames", "_current_exceptions"))):
                    block(rule, event, (), frame)
                return
            plumbing = ctypes_plumbing if event.startswith("ctypes.") else ()
            if by_snippet(frame, None, plumbing):
                block(rule, event, args, frame)
            if state["program"] is not None and snippet_thread():
                asker = first_asker(frame, plumbing)
                if not in_library_import(asker):
                    block(rule, event + " in a thread the snippet started", args, frame)
            return
        if event == "open":
            path = path_of(args[0]) if args else None
            if path is None:
                return
            if is_proc_mem(path):
                block(any_rule, event, (path,), frame)
            # Source or bytecode the snippet wrote, read by the import system.
            if file_rule is not None and path.startswith(writable) and path != state["program"]:
                if path.endswith((".py", ".pyc", ".pth", ".zip", ".pyw", ".so")) and importing(frame):
                    if normpath(path) in state["modules_in"]:
                        return  # handed in and checked: judged by its source when compiled
                    # The import system looks for a handed-in module's cache first. With
                    # `-B` none is ever written, so one there was planted: it is never
                    # read (the import system takes an OSError here for "no cache" and
                    # compiles the source, whose digest is then compared). Checking
                    # whether it exists would leave a thread time to plant it after.
                    if path.endswith(".pyc") and cached_module(path) in state["modules_in"]:
                        raise FileNotFoundError(2, "code-sandbox-mcp: the bytecode cache of a module handed in is not read", path)
                    block(file_rule, "import of a file written at run time", (path,), frame)
            return
        if event == "import":
            module = args[0] if args else None
            if type(module) is not str_type:
                return
            rule = rule_for_module(module)
            if rule is not None and import_by_snippet(frame):
                block(rule, event, (module,), frame)
            return
        if event == "compile" or event == "exec":
            if dynamic_rule is None:
                return
            source = args[0] if args else None
            if event == "compile":
                filename = args[1] if len(args) > 1 else None
                if type(filename) is str_type and filename != state["program"] and filename.startswith(writable):
                    # A module handed in compiles when its source is the one checked.
                    expected = state["modules_in"].get(normpath(filename))
                    if expected is not None and type(source) is bytes_type and importing(frame):
                        if sha256(source).hexdigest() == expected:
                            return
                        block(file_rule, "compile of a module handed in, changed since it was checked", (filename,), frame)
                    block(file_rule, "compile of a file written at run time", (filename,), frame)
            elif source is not None and source is state["code"]:
                return
            if event == "exec" and importing(frame):
                # A module's own code, run by the import system; a module the snippet
                # wrote was refused when it was opened or compiled. A denied module
                # asked for through importlib is recognised by its file here.
                code_file = source.co_filename if type(source) is code_type else ""
                rule = rule_for_module_file(code_file)
                if rule is not None and import_by_snippet(frame):
                    block(rule, "import", (code_file,), frame)
                return
            if state["program"] is None:
                return
            asker = first_asker(frame)
            if asker is None or at_exit(asker) or not is_library(asker.f_code):
                block(dynamic_rule, event, (source,), frame)
            if asker.f_code.co_filename == guard_file or in_library_import(asker):
                return  # the bootstrap's own, or a library's while it is imported
            if not (loads_of(asker.f_code) & code_names):
                # A library calling what it was handed: it acts for the snippet.
                block(dynamic_rule, event + " relayed by a library", (source,), frame)
            if not allowed_evaluator(asker, event, source):
                block(dynamic_rule, event + " by " + module_of(asker.f_code) +
                      ", a library evaluator the policy does not allow here", (source,), frame)
            return
        if event in data_events:
            rule = rule_for_names(data_events[event])
            if rule is None and event.startswith(("marshal.", "pickle.")):
                rule = rule_for_module(event.split(".")[0])
            if rule is None:
                return
            if event.startswith("marshal.") and importing(frame):
                return  # the import system reading a cached module
            if by_snippet(frame, None):
                block(rule, event, args[:2], frame)
            return
        if event == "object.__getattr__":
            # A frame of this guard handed out (through a traceback) would let its
            # locals be rewritten: refused whoever asks.
            name = args[1] if len(args) == 2 else None
            if type(name) is not str_type:
                return
            if name == "tb_frame" and type(args[0]) is traceback_type:
                if hook_frame(args[0].tb_frame):
                    block(any_rule, "reading a frame of the sandbox's guard", (), frame)
            elif name in ("__globals__", "__code__", "__closure__"):
                for own in own_functions:
                    if args[0] is own:
                        block(any_rule, "reading the sandbox's guard", (name,), frame)
            return
        if event == "object.__setattr__" or event == "object.__delattr__":
            target = args[0] if args else None
            for own in own_functions:
                if target is own:
                    block(any_rule, event, (), frame)
            return
        if event in ("_thread.start_new_thread", "_thread.start_joinable_thread"):
            if state["program"] is None:
                return
            if snippet_thread() or any_snippet_frame(frame):
                handle = args[2] if event == "_thread.start_joinable_thread" and len(args) > 2 else None
                if handle is not None and handle_type is not None and type(handle) is handle_type:
                    snippet_threads.append(handle)
                else:
                    raw_threads[0] = True
            return

    def import_by_snippet(frame):
        if state["program"] is None:
            return False
        asker = first_asker(frame)
        if asker is None or at_exit(asker) or not is_library(asker.f_code):
            return True
        return not (in_library_import(asker) or imports_here(asker))

    def imports_here(frame):
        # The library frame is running an `import` statement, or calls an import
        # function by name.
        code = frame.f_code
        raw = code.co_code
        at = frame.f_lasti
        if 0 <= at < len(raw) - 1 and raw[at] == IMPORT_NAME:
            return True
        return bool(loads_of(code) & import_names)

    def any_snippet_frame(frame):
        while frame is not None:
            if not is_library(frame.f_code):
                return True
            frame = frame.f_back
        return False

    own_functions.extend((hook, judge, block, by_snippet, first_asker, is_library, allowed_evaluator))
    sys.addaudithook(hook)
