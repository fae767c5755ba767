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
// - ES module sources that are strings or files the snippet wrote (`data:` and `blob:`
//   URLs, modules under /sandbox or /tmp), through a module resolve hook;
// - CommonJS files the snippet wrote and then `require`s, and `Module.prototype._compile`
//   called by the snippet itself;
// - `process.binding`, `process._linkedBinding`, `process.dlopen`, `process.execve` when a
//   rule's references name them.
// An uncaught permission-model or code-generation error is reported the same way.
//
// It explains; it does not hold the line: the kernel refuses a new process or program and
// writes outside the sandbox's folders whatever happens here, and the supervisor alone
// reports how the run ended. A refusal writes one record on fd 3 (rule, layer, what was
// attempted, the snippet's line), which the supervisor passes on, and ends the process at
// once with status 126. Everything used for that is captured here, before the snippet can
// replace globals.
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
  const runMain = Module.runMain;
  const createRequire = Module.createRequire;
  const readSync = fs.readSync;
  const writeSync = fs.writeSync;
  const reallyExit = process.reallyExit.bind(process);
  const stringify = JSON.stringify;
  const NativeError = Error;
  const defineProperty = Object.defineProperty;
  const ownNames = Object.getOwnPropertyNames;
  const startsWith = Function.prototype.call.bind(String.prototype.startsWith);
  const escaped = (text) => text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
  let lineFinder;
  const setMain = (path) => {
    main = path;
    lineFinder = new RegExp('(?:(?:file://)?' + escaped(main) + '|<call \\d+>):(\\d+):');
  };
  setMain(main);

  const globMatches = (pattern, name) => {
    const parts = pattern.split('*');
    if (parts.length === 1) return pattern === name;
    if (!name.startsWith(parts[0]) || !name.endsWith(parts[parts.length - 1])) return false;
    let at = parts[0].length;
    const end = name.length - parts[parts.length - 1].length;
    for (const middle of parts.slice(1, -1)) {
      const found = name.indexOf(middle, at);
      if (found < 0 || found + middle.length > end) return false;
      at = found + middle.length;
    }
    return at <= end;
  };
  const bare = (name) => (startsWith(name, 'node:') ? name.slice(5) : name);
  const ruleForModule = (name) => {
    name = bare(String(name));
    for (const rule of rules) {
      for (const pattern of rule.modules || []) {
        if (globMatches(pattern, name) || startsWith(name, pattern + '/')) return rule;
      }
    }
    return null;
  };
  const ruleForReference = (name) => {
    for (const rule of rules) {
      for (const pattern of rule.references || []) {
        if (globMatches(pattern, name)) return rule;
      }
    }
    return null;
  };
  const codeRule =
    settings.codegen_rule ||
    ruleForReference('eval') ||
    rules.find((rule) => (rule.dynamic || []).includes('string-code')) ||
    rules.find((rule) => (rule.dynamic || []).includes('file-code')) ||
    null;
  // Modules the snippet wrote are code the checker never saw.
  const fileRule = rules.find((rule) => (rule.dynamic || []).includes('file-code')) || codeRule;

  const snippetLine = (stack) => {
    const found = lineFinder.exec(String(stack || ''));
    return found ? Number(found[1]) : null;
  };

  const block = (rule, layer, attempted, stack) => {
    const record = {
      rule: rule.id,
      message: rule.message,
      layer,
      attempted: String(attempted).slice(0, 200),
      line: snippetLine(stack === undefined ? new NativeError().stack : stack),
    };
    try {
      writeSync(3, stringify(record) + '\n');
    } finally {
      reallyExit(126);
    }
  };

  // True when the code calling right now is the snippet's own (or a file it wrote),
  // read from the stack: frame 0 is this guard, frame 1 its wrapper's caller.
  const calledBySnippet = (stack) => {
    const frames = String(stack).split('\n').slice(2, 4).join('\n');
    return frames.includes(mainDir) || frames.includes('/tmp/') || frames.includes('<anonymous>') ||
      frames.includes('<call ');
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

  const originalLoad = Module._load;
  defineProperty(Module, '_load', {
    value: function _load(request, parent, isMain) {
      const rule = typeof request === 'string' && Module.isBuiltin(request) && ruleForModule(request);
      if (rule) block(rule, 'node-guard', `require('${request}')`);
      return originalLoad.apply(this, arguments);
    },
    writable: false,
    configurable: false,
  });

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
    const written = (filename) =>
      typeof filename === 'string' &&
      filename !== main &&
      (startsWith(filename, mainDir) || startsWith(filename, '/tmp/') || startsWith(filename, '/dev/shm/'));
    const originalCompile = Module.prototype._compile;
    defineProperty(Module.prototype, '_compile', {
      value: function _compile(content, filename) {
        const stack = new NativeError().stack;
        if (written(filename)) block(fileRule, 'node-guard', `require of a file written at run time: ${filename}`);
        if (calledBySnippet(stack)) block(codeRule, 'node-guard', 'Module.prototype._compile', stack);
        return originalCompile.apply(this, arguments);
      },
      writable: false,
      configurable: false,
    });

    // The ES module resolve hook refuses string sources and files the snippet wrote,
    // and reports through a frozen global the refusing module calls back. (Denied
    // built-ins need no hook: `import` hands out the same exports, already reporters.)
    const report = Symbol.for('code-sandbox-mcp.guard');
    defineProperty(globalThis, report, {
      value: (what, module) => block((module && ruleForModule(module)) || codeRule, 'node-guard', what),
      writable: false,
      configurable: false,
      enumerable: false,
    });
    const hooks = `
      // Started before the program arrives, so the main module is the first one
      // resolved with no parent (the snippet itself cannot start another: runMain is
      // a reporter to it).
      let mainUrl = null;
      const refuse = (what, module) => ({
        shortCircuit: true,
        url: 'data:text/javascript,' + encodeURIComponent(
          'globalThis[Symbol.for("code-sandbox-mcp.guard")](' + JSON.stringify(what) + ',' +
          JSON.stringify(module || null) + ');'),
      });
      export async function resolve(specifier, context, next) {
        if (/^\\s*(data|blob):/i.test(specifier)) return refuse('import of ' + specifier.slice(0, 60));
        const resolved = await next(specifier, context);
        const url = resolved.url;
        if (mainUrl === null && context.parentURL === undefined) {
          mainUrl = url;
          return resolved;
        }
        const written = url !== mainUrl && (url.startsWith('file:///tmp/') ||
          url.startsWith('file:///dev/shm/') || url.startsWith(${stringify('file://' + mainDir)}));
        if (written) return refuse('import of a file written at run time: ' + url);
        return resolved;
      }
    `;
    if (settings.module_hooks && typeof Module.register === 'function') {
      Module.register('data:text/javascript,' + encodeURIComponent(hooks));
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
  const applyEnv = (env) => {
    for (const key of ownNames(env || {})) process.env[key] = env[key];
  };
  if (settings.session) {
    serveSession();
    return;
  }
  const { header } = nextProgram();
  setMain(header.file);
  applyEnv(header.env);
  process.argv[1] = main;
  // Started from the event loop, so no frame of this file is under the snippet's.
  setImmediate(runMain);

  // Calls one after another in this one context, as Node's REPL runs its lines: scripts
  // share the global scope, so top-level `let`, `const`, `class` and functions of one
  // call are there in the next. Asking for the next call says this one is done. An
  // uncaught error outside a call (a timer's) ends the session, as it would end a
  // program.
  function serveSession() {
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
      if (!envSet) {
        applyEnv(header.env);
        envSet = true;
      }
      let result = 0;
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
      // before the call is done.
      await new Promise((resolve) => setImmediate(resolve));
      setImmediate(() => serve(result));
    };
    setImmediate(() => serve(undefined));
  }
})();
