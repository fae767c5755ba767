// The ES module hooks of a Node sandbox (`module.register`), on Node's hooks thread:
// registered by node_guard.cjs before the program arrives, with the rules, the folders
// the program may write and the denied built-ins as `initialize`'s data, and a port on
// which the guard posts the modules handed in with each program.
//
// What they refuse:
// - `data:` and `blob:` sources (code that is a string), judged as the WHATWG URL
//   parser reads them (tabs and newlines in `d\tata:` are gone);
// - a denied built-in imported by the program (by name, or through a package.json
//   "imports" map that resolves to it);
// - a file the program could have written, unless it is data (JSON) or a module handed
//   in whose bytes, as the loader read them for compiling, are the ones the static
//   check read. A CommonJS file comes without source here: the CommonJS loader reads
//   and compiles it, and the guard's `_compile` makes the same comparison.
// A refusal writes its record on fd 3 here (a static import of a refused module fails
// to link before any module of the program could report it), and the module put in
// its place ends the process when it runs.
import { writeSync, realpathSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { receiveMessageOnPort } from 'node:worker_threads';
import { createHash } from 'node:crypto';

// Set once, by `initialize`.
let rules = { code: null, file: null, builtins: {} };
let writable = [];
let denied = [];
let port = null;

export function initialize(data) {
  rules = data.rules;
  writable = data.writable;
  denied = data.denied;
  port = data.port || null;
}

// The hooks start before the program arrives, so the main module is the first one
// resolved with no parent (the program cannot start another: runMain is a reporter).
let mainUrl = null;
// What a refused module is replaced with: it ends the process when it runs.
const refusing = 'globalThis[Symbol.for("code-sandbox-mcp.guard")]();';
const reported = new Set();

const refuse = (what, module, kind) => {
  const rule = module ? rules.builtins[module] : kind === 'file' ? rules.file : rules.code;
  // A static import is resolved more than once: one record for it.
  if (!reported.has(what)) {
    try {
      reported.add(what);
      const record = { rule: rule.id, message: rule.message, layer: 'node-guard', attempted: String(what).slice(0, 200), line: null };
      writeSync(3, JSON.stringify(record) + '\n');
    } catch {
      // the process ends all the same
    }
  }
  return { shortCircuit: true, url: 'data:text/javascript,' + encodeURIComponent(refusing) };
};

// Modules handed in with the program (real path -> SHA-256 of the source the static
// check read). A message the guard posted is in the port's queue at once, so it is
// here before the program's first import is resolved.
const modulesIn = new Map();
const handedIn = (path) => {
  for (let message = port && receiveMessageOnPort(port); message; message = receiveMessageOnPort(port)) {
    for (const [file, digest] of Object.entries(message.message)) modulesIn.set(file, digest);
  }
  return modulesIn.get(path);
};

const isWritten = (path) => writable.some((dir) => path === dir || path.startsWith(dir + '/'));
const realPathOf = (url) => {
  let path = fileURLToPath(url);
  try {
    path = realpathSync(path);
  } catch {
    // judged as written
  }
  return path;
};
const snippetUrl = (url) => {
  if (typeof url !== 'string' || !url.startsWith('file:')) return url === undefined;
  return url === mainUrl || isWritten(realPathOf(url));
};

export async function resolve(specifier, context, next) {
  let early = null;
  try {
    early = new URL(specifier).protocol;
  } catch {
    // a relative specifier or a package name
  }
  if (early === 'data:' || early === 'blob:') return refuse('import of ' + String(specifier).slice(0, 60));
  const resolved = await next(specifier, context);
  const url = resolved.url;
  if (mainUrl === null && context.parentURL === undefined) {
    mainUrl = url;
    return resolved;
  }
  let protocol = null;
  try {
    protocol = new URL(url).protocol;
  } catch {
    // a bare built-in name
  }
  if (protocol === 'data:' || protocol === 'blob:') return refuse('import of ' + url.slice(0, 60));
  if (protocol === 'node:' || !url.includes(':')) {
    const name = url.startsWith('node:') ? url.slice(5) : url;
    const key = denied.includes(name) ? name : name.split('/')[0];
    if (denied.includes(key) && snippetUrl(context.parentURL)) {
      return refuse('import of ' + url + ' (from ' + specifier + ')', key);
    }
  }
  return resolved;
}

export async function load(url, context, next) {
  const loaded = await next(url, context);
  if (typeof url !== 'string' || !url.startsWith('file:') || url === mainUrl) return loaded;
  const path = realPathOf(url);
  if (!isWritten(path) || loaded.format === 'json' || loaded.source === null || loaded.source === undefined) {
    return loaded;
  }
  const expected = handedIn(path);
  const source = loaded.source;
  const bytes = typeof source === 'string' ? source : new Uint8Array(source.buffer || source, source.byteOffset || 0, source.byteLength);
  const digest = createHash('sha256').update(bytes).digest('hex');
  if (expected === undefined || digest !== expected) {
    const what = expected === undefined ? 'import of a file written at run time: ' : 'import of a module handed in, changed since it was checked: ';
    refuse(what + path, null, 'file');
    return { format: 'module', source: refusing, shortCircuit: true };
  }
  return loaded;
}
