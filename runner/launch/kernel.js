// gatekeeper: the Node kernel of a session (runner/launch, SessionProgram).
//
// The session's supervisor starts `node -e <this> <ctl> <status> <main
// file>` once, at the session's first Node run. For each line "run" on the
// control fifo it runs the main file as a script in this one context
// (vm.runInThisContext), so that its top-level bindings last, as the REPL's
// do; then it writes "done <code>" on the status fifo. As the REPL does: a
// completion value that is a promise is awaited, and one that is not
// undefined is shown with util.inspect. Code that only compiles inside an
// async function (top-level await) runs inside one: its declarations are
// then local to that run and do not last, and its completion value is not
// shown. An uncaught exception prints its stack (code 1); process.exit(n)
// ends the run with n and the kernel lives on; the interrupt at the run's
// timeout ends it with 130; errors of callbacks between runs are printed on
// standard error and do not end the kernel.
'use strict';
(() => {
  const fs = require('fs');
  const net = require('net');
  const path = require('path');
  const util = require('util');
  const vm = require('vm');
  const Module = require('module');

  const [ctlPath, statusPath, main] = process.argv.slice(1);
  const status = fs.openSync(statusPath, 'w'); // O_CLOEXEC, as every fd libuv opens
  const ctl = new net.Socket({ fd: fs.openSync(ctlPath, fs.constants.O_RDONLY | fs.constants.O_NONBLOCK), readable: true, writable: false });
  process.argv = [process.argv[0], main];

  class Exit {
    constructor(code) { this.code = code; }
  }
  let current = null; // the run in progress: { finish(code) }

  const quit = process.reallyExit.bind(process);
  process.exit = (code) => {
    const c = code === undefined ? process.exitCode : code;
    throw new Exit((Number(c) || 0) & 255);
  };

  const print = (e) => {
    try {
      process.stderr.write((e && e.stack ? e.stack : 'Uncaught ' + util.inspect(e)) + '\n');
    } catch (_) { /* nothing to do */ }
  };
  const fail = (e) => {
    if (e instanceof Exit) {
      if (current) current.finish(e.code);
      return;
    }
    print(e);
    if (current) current.finish(1);
  };
  process.on('uncaughtException', fail);
  process.on('unhandledRejection', fail);
  process.on('SIGINT', () => {
    if (current) {
      process.stderr.write('Error: the run\'s timeout interrupted it\n');
      current.finish(130);
    }
  });

  fs.writeSync(status, 'ready\n'); // the supervisor may interrupt from now on

  const dir = path.dirname(main);
  const compile = (code) => {
    try {
      return { script: new vm.Script(code, { filename: main }), wrapped: false };
    } catch (e) {
      if (!(e instanceof SyntaxError) || !/\bawait\b/.test(code)) throw e;
      try {
        // Top-level await: the code runs as an async function's body.
        return { script: new vm.Script('(async () => {' + code + '\n})()', { filename: main }), wrapped: true };
      } catch (_) {
        throw e;
      }
    }
  };

  const runOnce = () => new Promise((resolve) => {
    let ended = false;
    current = {
      finish(code) {
        if (ended) return;
        ended = true;
        current = null;
        resolve(code);
      },
    };
    const m = new Module(main, null);
    m.filename = main;
    m.paths = Module._nodeModulePaths(dir);
    globalThis.module = m;
    globalThis.exports = m.exports;
    globalThis.require = Module.createRequire(main);
    globalThis.__filename = main;
    globalThis.__dirname = dir;
    let value;
    let wrapped = false;
    try {
      const c = compile(fs.readFileSync(main, 'utf8'));
      wrapped = c.wrapped;
      value = c.script.runInThisContext({ breakOnSigint: true, displayErrors: true });
    } catch (e) {
      if (e && e.code === 'ERR_SCRIPT_EXECUTION_INTERRUPTED') {
        process.stderr.write('Error: the run\'s timeout interrupted it\n');
        current.finish(130);
        return;
      }
      fail(e);
      return;
    }
    Promise.resolve(value).then((v) => {
      if (ended) return;
      if (!wrapped && v !== undefined) process.stdout.write(util.inspect(v) + '\n');
      const c = (Number(process.exitCode) || 0) & 255; // as node exits with it
      process.exitCode = undefined;
      current.finish(c);
    }, fail);
  });

  let pending = '';
  let busy = false;
  const next = async () => {
    if (busy) return;
    busy = true;
    while (pending.includes('\n')) {
      pending = pending.slice(pending.indexOf('\n') + 1);
      const code = await runOnce();
      fs.writeSync(status, `done ${code}\n`); // stdout and stderr are pipes: written synchronously
    }
    busy = false;
  };
  ctl.on('data', (b) => {
    pending += b.toString('latin1');
    next();
  });
  ctl.on('end', () => quit(0));
  ctl.on('error', () => quit(0));
})();
