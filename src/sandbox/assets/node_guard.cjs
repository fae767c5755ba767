// The policy inside a Node sandbox: Node's main module, started under the box's
// supervisor when the box is made, beside Node's permission model and
// `--disallow-code-generation-from-strings`, which the server sets from the same policy.
// Once installed it loads what the policy preloads and asks the supervisor for the
// program (a header line of JSON, then the code; see `nextProgram`): it starts the
// snippet's file (the supervisor wrote it) as the main module in its place, or, in a
// session, runs call after call in this one context.
//
// It refuses what those two do not cover:
// - built-in modules a deny rule names (`vm`, `inspector`, `child_process`, …), by every
//   route: `require`, `import`, `import()`, `process.getBuiltinModule`,
//   `module.createRequire`, `Module._load`: each of their functions becomes a reporter;
// - ES module sources that are strings or files the snippet wrote, unless handed in
//   as checked, through the module hooks of node_hooks.mjs; the same for CommonJS files
//   (`require`), and `Module.prototype._compile` called by the snippet itself;
// - `process.binding`, `process._linkedBinding`, `process.dlopen`, `process.execve` when a
//   rule's references name them.
// An uncaught permission-model or code-generation error is reported the same way.
//
// It explains; it does not hold the line: the kernel refuses a new process or program and
// writes outside the sandbox's folders whatever happens here, and the supervisor alone
// reports how the run ended. A refusal writes one record on fd 3 (rule, layer, what was
// attempted, the snippet's line), which the supervisor passes on, and ends the process at
// once with status 126, whatever goes wrong while reporting. It is made hard to switch off
// cheaply:
// - nothing it calls can be replaced by the snippet: the methods it uses are captured
//   before the snippet's first line and called through a captured `Reflect.apply`, loops
//   go by index (no array iterator), and no object of the snippet's is converted;
// - the loader's internals are frozen before the snippet's first line (`Module._load`,
//   `_resolveFilename`, `_findPath`, `_extensions`, the wrapper, the prototype's
//   `_compile`/`load`/`require`, the `fs` functions the loader reads files with), and a
//   replaced `Module.wrap` is refused when the next module is compiled;
// - paths and URLs are judged after resolution (real paths, the WHATWG parser's URL,
//   `package.json` "imports" maps resolved to the built-in they name), never as spelled;
// - the stack decides nothing: `Module.prototype._compile` runs only for the file the
//   loader itself is loading (a token the `.js` handler sets), never for a string.
'use strict';

(() => {
  const raw = process.env.CODE_SANDBOX_GUARD;
  delete process.env.CODE_SANDBOX_GUARD;
  if (!raw) return;
  const settings = JSON.parse(raw);
  const rules = settings.rules || [];
  // The snippet's file is named when the program arrives.
  let main = (settings.workdir || '/sandbox') + '/main.cjs';
  const mainDir = main.slice(0, main.lastIndexOf('/') + 1);

  const fs = require('fs');
  const net = require('net');
  const Module = require('module');
  // Taken before denied built-ins become reporters below: the session runs its calls
  // with `vm`, and the program starts through `Module.runMain`.
  const Script = require('vm').Script;
  const compileFunction = require('vm').compileFunction;
  const isProxy = require('util').types.isProxy;
  const createHash = require('crypto').createHash;
  const { update: hashUpdate, digest: hashDigest } = Object.getPrototypeOf(createHash('sha256'));
  const parseJson = JSON.parse;
  const runMain = Module.runMain;
  const createRequire = Module.createRequire;
  const readSync = fs.readSync;
  const writeSync = fs.writeSync;
  const reallyExit = process.reallyExit.bind(process);
  const stringify = JSON.stringify;
  const NativeError = Error;
  const defineProperty = Object.defineProperty;
  const freeze = Object.freeze;
  const ownNames = Object.getOwnPropertyNames;
  const apply = Reflect.apply;
  const realpathSync = fs.realpathSync;
  const pathResolve = require('path').resolve;
  // The way the modules handed in reach the ES module hooks' thread (see `takeModulesIn`).
  const hooksChannel = new MessageChannel();
  const postToHooks = hooksChannel.port1.postMessage;
  // String methods, called through `apply`: the snippet may replace the prototype's.
  const uncurry = (method) => (self, a, b) => apply(method, self, [a, b]);
  const startsWith = uncurry(String.prototype.startsWith);
  const endsWith = uncurry(String.prototype.endsWith);
  const indexOf = uncurry(String.prototype.indexOf);
  const slice = uncurry(String.prototype.slice);
  const split = uncurry(String.prototype.split);
  const replace = uncurry(String.prototype.replace);
  const regexpExec = uncurry(RegExp.prototype.exec);
  const escaped = (text) => replace(text, /[.*+?^${}()|[\]\\]/g, '\\$&');
  let lineFinder;
  const setMain = (path) => {
    main = path;
    lineFinder = new RegExp('(?:(?:file://)?' + escaped(main) + '|<call \\d+>):(\\d+):');
  };
  setMain(main);

  const globMatches = (pattern, name) => {
    const parts = split(pattern, '*');
    const count = parts.length;
    if (count === 1) return pattern === name;
    if (!startsWith(name, parts[0]) || !endsWith(name, parts[count - 1])) return false;
    let at = parts[0].length;
    const end = name.length - parts[count - 1].length;
    for (let i = 1; i < count - 1; i++) {
      const middle = parts[i];
      const found = indexOf(name, middle, at);
      if (found < 0 || found + middle.length > end) return false;
      at = found + middle.length;
    }
    return at <= end;
  };
  const bare = (name) => (startsWith(name, 'node:') ? slice(name, 5) : name);
  const ruleForModule = (name) => {
    if (typeof name !== 'string') return null;
    name = bare(name);
    for (let r = 0; r < rules.length; r++) {
      const patterns = rules[r].modules || [];
      for (let p = 0; p < patterns.length; p++) {
        if (globMatches(patterns[p], name) || startsWith(name, patterns[p] + '/')) return rules[r];
      }
    }
    return null;
  };
  const ruleForReference = (name) => {
    for (let r = 0; r < rules.length; r++) {
      const patterns = rules[r].references || [];
      for (let p = 0; p < patterns.length; p++) {
        if (globMatches(patterns[p], name)) return rules[r];
      }
    }
    return null;
  };
  // Modules handed in with the program, by real path, with the SHA-256 of the source
  // the static check read: the server names them in the program's environment, and they
  // are taken out of it before the program's first line.
  const modulesIn = { __proto__: null };
  const takeModulesIn = (env) => {
    if (!env || typeof env !== 'object') return;
    const listed = env.CODE_SANDBOX_MODULES_IN;
    delete env.CODE_SANDBOX_MODULES_IN;
    const map = typeof listed === 'string' ? parseJson(listed) : {};
    const paths = ownNames(map);
    const news = { __proto__: null };
    for (let i = 0; i < paths.length; i++) {
      if (typeof map[paths[i]] === 'string') modulesIn[paths[i]] = news[paths[i]] = map[paths[i]];
    }
    // The hooks' thread takes them before it resolves the program's first import: a
    // message posted is in the port's queue at once, and it reads that queue itself.
    if (paths.length) apply(postToHooks, hooksChannel.port1, [{ ...news }]);
  };
  const sha256 = (text) => {
    const hash = createHash('sha256');
    apply(hashUpdate, hash, [text, 'utf8']);
    return apply(hashDigest, hash, ['hex']);
  };
  // Where the program may write: a file there is the snippet's, not the image's.
  const writable = settings.writable || ['/sandbox', '/tmp', '/dev/shm'];
  // The file a path names once `..`, `//` and links (`/proc/self/cwd`, `/proc/self/fd/N`,
  // a symlink in /tmp) are resolved; as written when it does not exist.
  const realPath = (path) => {
    if (typeof path !== 'string') return null;
    let resolved = pathResolve(path);
    try {
      resolved = realpathSync(resolved);
    } catch {
      // judged as written
    }
    return resolved;
  };
  const isWritten = (path) => {
    const real = realPath(path);
    if (real === null) return false;
    for (let i = 0; i < writable.length; i++) {
      if (real === writable[i] || startsWith(real, writable[i] + '/')) return true;
    }
    return false;
  };
  const codeRule =
    settings.codegen_rule ||
    ruleForReference('eval') ||
    rules.find((rule) => (rule.dynamic || []).includes('string-code')) ||
    rules.find((rule) => (rule.dynamic || []).includes('file-code')) ||
    null;
  // Modules the snippet wrote are code the checker never saw.
  const fileRule = rules.find((rule) => (rule.dynamic || []).includes('file-code')) || codeRule;

  // The snippet's line, for the record only (the stack decides nothing).
  const snippetLine = (stack) => {
    const found = typeof stack === 'string' ? regexpExec(lineFinder, stack) : null;
    return found ? Number(found[1]) : null;
  };

  const block = (rule, layer, attempted, stack) => {
    try {
      let line = null;
      try {
        line = snippetLine(stack === undefined ? new NativeError().stack : stack);
      } catch {
        // no line
      }
      const record = {
        rule: rule.id,
        message: rule.message,
        layer,
        attempted: typeof attempted === 'string' ? slice(attempted, 0, 200) : '<object>',
        line,
      };
      writeSync(3, stringify(record) + '\n');
    } finally {
      reallyExit(126);
    }
  };

  // -- built-in modules -----------------------------------------------------------------
  const reporter = (rule, label) =>
    function refused() {
      block(rule, 'node-guard', label);
    };
  // Exports Node's own machinery uses from the public module (the ES module loader
  // talks to its hooks thread with these): left alone; the dangerous part is `Worker`.
  // Likewise `v8`'s (de)serializers; its dangerous members are the ones that change
  // the engine's flags or write heap snapshots.
  const v8Denied = new Set(['setFlagsFromString', 'writeHeapSnapshot', 'getHeapSnapshot',
    'setHeapSnapshotNearHeapLimit', 'startupSnapshot', 'takeCoverage', 'stopCoverage']);
  const keep = settings.module_hooks
    ? {
        worker_threads: new Set(ownNamesOf('worker_threads').filter((key) => key !== 'Worker')),
        v8: new Set(ownNamesOf('v8').filter((key) => !v8Denied.has(key))),
      }
    : {};
  function ownNamesOf(name) {
    try {
      return ownNames(require(name));
    } catch {
      return [];
    }
  }
  // `require`, `process.getBuiltinModule` and `module` internals all pass through the
  // wrappers below. An `import` does not, so for code that says `import` the denied
  // built-ins are loaded now and their functions made reporters (this costs ~10-30 ms,
  // so code without `import` is spared it: the runtime says which in `module_hooks`).
  const eager = settings.module_hooks ? Module.builtinModules : [];
  for (const name of eager) {
    const rule = ruleForModule(name);
    if (!rule || name === 'module') continue;
    let exports;
    try {
      exports = require(name);
    } catch {
      continue; // refused by the permission model already (inspector, wasi)
    }
    for (const key of ownNames(exports)) {
      let value;
      try {
        value = exports[key];
      } catch {
        continue;
      }
      if (typeof value !== 'function' || (keep[name] && keep[name].has(key))) continue;
      try {
        defineProperty(exports, key, {
          value: reporter(rule, `require('${name}').${key}`),
          writable: false,
          configurable: false,
        });
      } catch {
        // A non-configurable export stays; Module._load below still refuses the module.
      }
    }
  }
  if (eager.length) Module.syncBuiltinESMExports();

  const isBuiltin = Module.isBuiltin;
  const originalLoad = Module._load;
  defineProperty(Module, '_load', {
    value: function _load(request, parent, isMain) {
      if (typeof request !== 'string') throw new TypeError('The "id" argument must be of type string');
      const rule = isBuiltin(request) && ruleForModule(request);
      if (rule) block(rule, 'node-guard', `require('${request}')`);
      return apply(originalLoad, this, arguments);
    },
    writable: false,
    configurable: false,
  });
  // Judged after resolution too: a `package.json` "imports" map (`#x`) can name a
  // built-in the request does not.
  const originalResolve = Module._resolveFilename;
  defineProperty(Module, '_resolveFilename', {
    value: function _resolveFilename(request, parent, isMain, options) {
      const resolved = apply(originalResolve, this, arguments);
      const rule = typeof resolved === 'string' && isBuiltin(resolved) && ruleForModule(resolved);
      if (rule) block(rule, 'node-guard', `require of ${resolved}, resolved from ${typeof request === 'string' ? request : '?'}`);
      return resolved;
    },
    writable: false,
    configurable: false,
  });
  // The loader's other internals, and the `fs` functions it reads modules with, are
  // frozen: a replaced `readFileSync` would hand the loader the snippet's code under a
  // library's name.
  for (const [owner, names] of [
    [Module, ['_findPath', '_nodeModulePaths', 'isBuiltin', 'createRequire', 'Module', '_initPaths']],
    [Module.prototype, ['load', 'require']],
    [fs, ['readFileSync', 'realpathSync', 'statSync', 'lstatSync', 'existsSync']],
    [fs.realpathSync, ['native']],
  ]) {
    for (let i = 0; i < names.length; i++) {
      try {
        defineProperty(owner, names[i], { writable: false, configurable: false });
      } catch {
        // already fixed
      }
    }
  }

  if (typeof process.getBuiltinModule === 'function') {
    const original = process.getBuiltinModule;
    defineProperty(process, 'getBuiltinModule', {
      value: function getBuiltinModule(id) {
        const rule = ruleForModule(id);
        if (rule) block(rule, 'node-guard', `process.getBuiltinModule('${id}')`);
        return original.call(process, id);
      },
      writable: false,
      configurable: false,
    });
  }

  for (const name of ['binding', '_linkedBinding', 'dlopen', 'execve']) {
    const rule = ruleForReference(`process.${name}`);
    if (rule && typeof process[name] === 'function') {
      defineProperty(process, name, {
        value: reporter(rule, `process.${name}`),
        writable: false,
        configurable: false,
      });
    }
  }

  // -- code the snippet wrote, or gave as a string --------------------------------------
  if (codeRule) {
    const written = (filename) => typeof filename === 'string' && filename !== main && isWritten(filename);
    // `_compile` runs for the file the loader is loading, and for nothing else: the
    // `.js` handler names the module and file it is about to compile.
    let loading = null;
    const extensions = Module._extensions;
    const originalJs = extensions['.js'];
    const jsHandler = function (module, filename) {
      loading = { module, filename };
      try {
        return apply(originalJs, this, arguments);
      } finally {
        loading = null;
      }
    };
    defineProperty(extensions, '.js', { value: jsHandler, writable: false, configurable: false });
    freeze(extensions);
    defineProperty(Module, '_extensions', { writable: false, configurable: false });
    const originalWrap = Module.wrap;
    const wrapper = Module.wrapper;
    const wrapperParts = [wrapper[0], wrapper[1]];
    const originalCompile = Module.prototype._compile;
    defineProperty(Module.prototype, '_compile', {
      value: function _compile(content, filename) {
        const expected = loading;
        loading = null;
        if (Module.wrap !== originalWrap || wrapper[0] !== wrapperParts[0] || wrapper[1] !== wrapperParts[1]) {
          block(codeRule, 'node-guard', 'Module.wrap replaced: every module would be compiled from its strings');
        }
        if (written(filename)) {
          // A module handed in compiles when its source is the one checked.
          const expected = modulesIn[realPath(filename)];
          if (expected === undefined || typeof content !== 'string' || sha256(content) !== expected) {
            const what = expected === undefined ? 'require of a file written at run time' : 'require of a module handed in, changed since it was checked';
            block(fileRule, 'node-guard', `${what}: ${realPath(filename)}`);
          }
        }
        if (expected === null || expected.module !== this || expected.filename !== filename) {
          block(codeRule, 'node-guard', 'Module.prototype._compile of a string');
        }
        return apply(originalCompile, this, arguments);
      },
      writable: false,
      configurable: false,
    });

    // The ES module hooks (node_hooks.mjs) refuse string sources and files the snippet
    // wrote, and report through a frozen global the refusing module calls back. (Denied
    // built-ins need no hook: `import` hands out the same exports, already reporters.)
    const report = Symbol.for('code-sandbox-mcp.guard');
    defineProperty(globalThis, report, {
      // The hooks thread wrote the record: this only ends the process.
      value: () => reallyExit(126),
      writable: false,
      configurable: false,
      enumerable: false,
    });
    const builtinNames = Module.builtinModules;
    const deniedBuiltins = [];
    const deniedRules = {};
    for (let i = 0; i < builtinNames.length; i++) {
      const rule = ruleForModule(builtinNames[i]);
      if (rule) {
        deniedBuiltins[deniedBuiltins.length] = builtinNames[i];
        deniedRules[builtinNames[i]] = { id: rule.id, message: rule.message };
      }
    }
    if (settings.module_hooks && typeof Module.register === 'function') {
      const rulesOf = { code: codeRule, file: fileRule, builtins: deniedRules };
      const data = { rules: rulesOf, writable, denied: deniedBuiltins, port: hooksChannel.port2 };
      // The main thread's end only posts: it keeps nothing alive.
      hooksChannel.port1.unref();
      Module.register('file://' + __dirname + '/node_hooks.mjs', { data, transferList: [data.port] });
    }
    const noMoreHooks = reporter(codeRule, 'module.register');
    for (const name of ['register', 'registerHooks']) {
      if (typeof Module[name] === 'function') {
        defineProperty(Module, name, { value: noMoreHooks, writable: false, configurable: false });
      }
    }
  }

  // -- errors thrown by the permission model and the code-generation switch -------------
  const permissionRule = settings.permission_rule || null;
  const codegenRule = settings.codegen_rule || null;
  const reportRefusal = (error) => {
    if (!error || typeof error !== 'object') return;
    if (permissionRule && error.code === 'ERR_ACCESS_DENIED') {
      const what = [error.permission, error.resource].filter(Boolean).join(' ');
      const rule = {
        id: permissionRule.id,
        message:
          "Node's permission model refused this: in this sandbox writes go only to the " +
          'working directory and /tmp, and child processes, workers and native addons are off',
      };
      block(rule, 'node-permission', what || error.message, error.stack);
    }
    const codegen =
      codegenRule &&
      error instanceof EvalError &&
      /Code generation from strings disallowed/.test(String(error.message));
    if (codegen) block(codegenRule, 'node-codegen', error.message, error.stack);
  };
  process.on('uncaughtExceptionMonitor', reportRefusal);

  // -- library functions the policy lets build functions from strings -------------------
  // With code generation from strings off, `Function` fails for everyone: d3's csvParse
  // (a row converter from the column names) and lodash's template among them. The
  // policy names such functions (`evaluators`, as `package.function`); the global
  // `Function` becomes a stand-in that compiles for them alone (with `vm.compileFunction`,
  // which the switch does not cover) and hands everyone else to the real one, which
  // refuses. Who asks is read from V8's own call sites, taken by the stand-in: its
  // callers, as long as they are in one file of a package of the read-only image, must
  // include a named function. The snippet, a file it wrote and code an evaluator built
  // are never such a caller; another function of the library it hands `Function` to
  // (`_.map(['...'], Function)`) meets no named one before the file ends. The code an
  // evaluator builds runs as the program's own: a process, a denied module or a
  // further `Function` in it is refused as the program's would be.
  const evaluators = [];
  for (let r = 0; r < rules.length; r++) {
    const named = rules[r].evaluators || [];
    for (let i = 0; i < named.length; i++) evaluators[evaluators.length] = named[i];
  }
  if (codegenRule && evaluators.length) installEvaluatorFunction();

  function installEvaluatorFunction() {
    const RealFunction = Function;
    const construct = Reflect.construct;
    const isArray = Array.isArray;
    const getPrototypeOf = Object.getPrototypeOf;
    const ownDescriptor = Object.getOwnPropertyDescriptor;
    const captureStackTrace = NativeError.captureStackTrace;
    const identifier = /^[A-Za-z_$][\w$]*$/;
    const trim = uncurry(String.prototype.trim);
    // V8 hands its call sites to `Error.prepareStackTrace` (Node reads it from the
    // global `Error`): the stand-in's own while it captures, the program's otherwise.
    let capturing = false;
    let programPrepare = ownDescriptor(NativeError, 'prepareStackTrace')?.value;
    const sitesOnly = (error, sites) => sites;
    defineProperty(NativeError, 'prepareStackTrace', {
      get: () => (capturing ? sitesOnly : programPrepare),
      set: (value) => void (programPrepare = value),
      enumerable: false,
      configurable: false,
    });
    defineProperty(globalThis, 'Error', { writable: false, configurable: false });
    // The call-site methods, taken now: the program can reach the prototype later.
    const callSites = (skip) => {
      const limit = ownDescriptor(NativeError, 'stackTraceLimit');
      if (!limit || !('value' in limit) || !limit.writable) return null;
      const holder = { __proto__: null };
      capturing = true;
      try {
        NativeError.stackTraceLimit = 24;
        captureStackTrace(holder, skip);
        const sites = holder.stack;
        return isArray(sites) ? sites : null;
      } catch {
        return null;
      } finally {
        capturing = false;
        NativeError.stackTraceLimit = limit.value;
      }
    };
    const probe = callSites(callSites);
    if (!probe || !probe.length) return;
    const siteProto = getPrototypeOf(probe[0]);
    const fileOf = siteProto.getFileName;
    const functionOf = siteProto.getFunctionName;
    // `/usr/share/nodejs/d3-dsv/dist/d3-dsv.js` is package `d3-dsv`.
    const packageOf = (file) => {
      let at = -1;
      const roots = ['/nodejs/', '/node_modules/'];
      for (let r = 0; r < roots.length; r++) {
        const root = roots[r];
        let found = indexOf(file, root, 0);
        while (found >= 0) {
          at = found + root.length;
          found = indexOf(file, root, at);
        }
      }
      if (at < 0) return null;
      const parts = split(slice(file, at), '/');
      if (parts.length < 2) return null;
      return startsWith(parts[0], '@') ? (parts.length > 2 ? parts[0] + '/' + parts[1] : null) : parts[0];
    };
    const askedBy = (standIn) => {
      const sites = callSites(standIn);
      if (sites === null || !sites.length) return null;
      let file = null;
      for (let i = 0; i < sites.length; i++) {
        const here = apply(fileOf, sites[i], []);
        if (typeof here !== 'string' || here[0] !== '/') return null;
        if (file === null) {
          if (isWritten(here)) return null;
          file = here;
        } else if (here !== file) {
          return null;
        }
        const name = apply(functionOf, sites[i], []);
        const owner = packageOf(file);
        if (typeof name !== 'string' || owner === null) continue;
        const qualified = owner + '.' + name;
        for (let e = 0; e < evaluators.length; e++) {
          if (globMatches(evaluators[e], qualified)) return qualified;
        }
      }
      return null;
    };
    // Parameters as `Function` takes them (`'a, b'`, or lodash's array of names), when
    // each is a plain name; anything else goes to the real `Function`.
    const parameters = (args) => {
      const names = [];
      for (let i = 0; i < args.length - 1; i++) {
        const arg = args[i];
        let listed;
        if (typeof arg === 'string') listed = split(arg, ',');
        else if (isArray(arg) && !isProxy(arg)) {
          listed = [];
          for (let k = 0; k < arg.length; k++) {
            const item = ownDescriptor(arg, k);
            if (!item || typeof item.value !== 'string') return null;
            listed[listed.length] = item.value;
          }
        } else return null;
        for (let k = 0; k < listed.length; k++) {
          const name = trim(listed[k]);
          if (regexpExec(identifier, name) === null) return null;
          names[names.length] = name;
        }
      }
      return names;
    };
    const standIn = function Function(...args) {
      const who = askedBy(standIn);
      const body = args.length ? args[args.length - 1] : '';
      const names = who === null || typeof body !== 'string' ? null : parameters(args);
      if (names === null) {
        return new.target ? construct(RealFunction, args) : apply(RealFunction, undefined, args);
      }
      return apply(compileFunction, undefined, [body, names, { __proto__: null, filename: `<built by ${who}>` }]);
    };
    standIn.prototype = RealFunction.prototype;
    defineProperty(standIn, 'length', { value: 1 });
    defineProperty(globalThis, 'Function', { value: standIn, writable: true, configurable: true, enumerable: false });
  }

  // -- the program, from the supervisor ----------------------------------------------------
  if (rules.length) {
    defineProperty(Module, 'runMain', {
      value: reporter(rules[0], 'module.runMain'),
      writable: false,
      configurable: false,
    });
  }
  const channelMode = process.env.CODE_SANDBOX_CHANNEL || 'pipe';
  delete process.env.CODE_SANDBOX_CHANNEL;
  delete process.env.CODE_SANDBOX_FIGURES;
  const closeSync = fs.closeSync;
  const FIRST = 0x7fff0000;
  const READY = FIRST + 256;
  const scratch = Buffer.alloc(1 << 20);
  // The next program, `{ header, code }`; `status`: the call before ended so. With user
  // notification the main thread reads a number no fd has: the kernel hands the call to
  // the supervisor, which answers it with a fresh fd holding the program (its number is
  // the count the read returns); the number read says the call before is done, and with
  // which status. Without it (gVisor) the program comes on fd 4, framed by its length,
  // and a call's end is a line on fd 3.
  const nextProgram = (status) => {
    let data;
    if (channelMode === 'notify') {
      const number = status === undefined ? READY : FIRST + (status & 0xff);
      const fd = readSync(number, scratch, 0, scratch.length, null);
      const chunks = [];
      for (;;) {
        const count = readSync(fd, scratch, 0, scratch.length, null);
        if (count === 0) break;
        chunks.push(Buffer.from(scratch.subarray(0, count)));
      }
      closeSync(fd);
      data = Buffer.concat(chunks);
    } else {
      if (status !== undefined) writeSync(3, '\x1edone ' + status + '\n');
      const size = exactly(4, 4).readUInt32LE(0);
      data = exactly(4, size);
    }
    const newline = data.indexOf(10);
    return {
      header: JSON.parse(data.subarray(0, newline).toString('utf8')),
      code: data.subarray(newline + 1),
    };
  };
  function exactly(fd, size) {
    const chunks = [];
    while (size > 0) {
      const count = readSync(fd, scratch, 0, Math.min(size, scratch.length), null);
      if (count === 0) reallyExit(0); // the supervisor is gone
      chunks.push(Buffer.from(scratch.subarray(0, count)));
      size -= count;
    }
    return Buffer.concat(chunks);
  }
  // What the policy preloads is loaded now, resolved as the snippet would resolve it,
  // so its cost is paid before the call; one that fails is said once, on stderr.
  const preloadRequire = createRequire(mainDir + '[preload]');
  for (const name of settings.preload || []) {
    try {
      preloadRequire(name);
    } catch (error) {
      writeSync(2, `code-sandbox-mcp: pool.preload: cannot load ${name} (${error && error.message})\n`);
    }
  }
  // stdout, stderr and the console's code (run once into a sink) are made ready while
  // the box waits: done on first use, they cost the first `console.log` about 2.5 ms.
  void [process.stdout, process.stderr];
  {
    const { Writable } = require('stream');
    const sink = new Writable({ write: (chunk, encoding, done) => done() });
    const warm = new (require('console').Console)({ stdout: sink, stderr: sink });
    warm.log(1, 'a', { a: [1] });
    warm.error(new NativeError('warm-up'));
  }
  const applyEnv = (env) => {
    for (const key of ownNames(env || {})) process.env[key] = env[key];
  };
  if (settings.session) {
    serveSession();
    return;
  }
  const { header } = nextProgram();
  setMain(header.file);
  takeModulesIn(header.env);
  applyEnv(header.env);
  process.argv[1] = main;
  exitWhenDone();
  // Started from the event loop, so no frame of this file is under the snippet's.
  setImmediate(runMain);

  // Once every 'exit' listener has run (the snippet's too), the process exits at once
  // with the code Node would exit with, instead of tearing down the environment, the
  // isolate and the platform first: milliseconds that change nothing the program can
  // see (stdout and stderr are synchronous here, pipes and files alike). A listener
  // that throws skips this and Node handles it as ever, and so does an uncaught
  // exception (Node emits 'exit' before it prints the error). The supervisor reports
  // the status this exit names to the kernel; nothing here decides it.
  function exitWhenDone() {
    const emit = process.emit;
    let fatal = false;
    process.emit = function (type) {
      const result = apply(emit, this, arguments);
      if (this === process) {
        // No listener took it: Node ends the process with this error, printed after 'exit'.
        if (type === 'uncaughtException' && result === false) fatal = true;
        // Node marks its own exit so: a snippet emitting 'exit' itself only calls listeners.
        if (type === 'exit' && process._exiting === true && !fatal) {
          const code = process.exitCode;
          // Its output and records pipes closed first: the supervisor, told of the
          // `exit_group` by the kernel, then reports the end without waiting for the
          // kernel to tear the process down (about 4 ms for Node).
          for (let fd = 1; fd <= 3; fd++) {
            try {
              closeSync(fd);
            } catch {
              // already closed
            }
          }
          // Primitives only: converting an object of the snippet's would call its code.
          const given = typeof code === 'number' || typeof code === 'string' ? code : arguments[1];
          reallyExit(typeof given === 'number' || typeof given === 'string' ? Number(given) || 0 : 0);
        }
      }
      return result;
    };
  }

  // Calls one after another in this one context, as Node's REPL runs its lines: scripts
  // share the global scope, so top-level `let`, `const`, `class` and functions of one
  // call are there in the next. Asking for the next call says this one is done. As in
  // the REPL, an error thrown by a timer or a callback is reported (on stderr, in the
  // result of the call running, or else the next one) and the session goes on; a
  // refusal still ends it.
  function serveSession() {
    const getActive = process.getActiveResourcesInfo;
    const now = Date.now;
    // How long a call waits for the work it scheduled (timers, I/O, promises) to settle
    // before it is done; what still runs then is said, and its output comes later. The
    // server says it with each call: the policy's `sessions.settle`, and a deadline (ms
    // since the epoch) short of the call's timeout, which would end the session.
    const settleFor = (env) => {
      const value = env && typeof env.CODE_SANDBOX_SETTLE === 'string' ? env.CODE_SANDBOX_SETTLE : '';
      if (env) delete env.CODE_SANDBOX_SETTLE;
      const parts = split(value, '/');
      const wait = Number(parts[0]);
      const limit = Number(parts[1]);
      return {
        wait: parts[0] !== '' && wait >= 0 ? wait : 1000,
        deadline: limit > 0 ? limit : Infinity,
      };
    };
    const uncaught = (error) => {
      reportRefusal(error);
      const text = error && error.stack ? String(error.stack) : String(error);
      writeSync(2, 'Uncaught ' + text + '\n');
    };
    process.on('uncaughtException', uncaught);
    // Timers, sockets, requests under way: compared with their number when the call
    // began, so the session's own (its stdio) and earlier calls' are not waited for.
    const busy = () => apply(getActive, process, []).length;
    const settle = async (before, bounds) => {
      const until = Math.min(now() + bounds.wait, bounds.deadline);
      let left = busy();
      while (left > before && now() < until) {
        await new Promise((resolve) => setTimeout(resolve, 5));
        left = busy();
      }
      return left - before;
    };
    // What Node's REPL gives its lines: `require` (resolving from the working
    // directory, through the same guarded loader), `module` and `exports`.
    const sessionModule = new Module(mainDir + '[session]', null);
    sessionModule.filename = mainDir + '[session]';
    sessionModule.paths = Module._nodeModulePaths(mainDir);
    for (const [name, value] of [
      ['require', createRequire(mainDir + '[session]')],
      ['module', sessionModule],
      ['exports', sessionModule.exports],
    ]) {
      defineProperty(globalThis, name, { value, writable: true, configurable: true, enumerable: false });
    }
    let envSet = false;
    const serve = async (status) => {
      const { header, code } = nextProgram(status);
      const bounds = settleFor(header.env);
      takeModulesIn(header.env);
      if (!envSet) {
        applyEnv(header.env);
        envSet = true;
      }
      let result = 0;
      const before = busy();
      try {
        const value = new Script(code.toString('utf8'), { filename: `<call ${header.call}>` }).runInThisContext();
        if (header.awaits) await value;
      } catch (error) {
        reportRefusal(error);
        const text = error && error.stack ? String(error.stack) : String(error);
        const cut = text.indexOf('\n    at Script.runInThisContext');
        writeSync(2, 'Uncaught ' + (cut < 0 ? text : text.slice(0, cut)) + '\n');
        result = 1;
      }
      // What the call scheduled to run at once (promise callbacks, immediates) runs
      // before the call is done, and what it scheduled for later for a short while.
      await new Promise((resolve) => setImmediate(resolve));
      const running = await settle(before, bounds);
      if (running > 0) {
        writeSync(2, `code-sandbox-mcp: ${running} timer(s) or request(s) this call started still run in the background; what they print comes with a later call\n`);
      }
      setImmediate(() => serve(result));
    };
    setImmediate(() => serve(undefined));
  }
})();
