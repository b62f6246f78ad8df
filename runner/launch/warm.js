// gatekeeper: the warm Node.js interpreter's hook (runner/launch, Warm).
//
// The launcher of a warm sandbox starts `node main.js` before the run
// arrives, with NODE_OPTIONS=--require=<this file>, next to the fifo "go".
// Node loads it before it resolves main.js. It undoes what brought it here
// (the variable, the directory, its entry in require.cache), writes the
// ready mark and waits for the launcher's go, which comes once the run's
// workspace is unpacked. Then it returns and Node goes on as `node main.js`
// does from there. Nothing of the run passes through here: the go line is
// a constant, and the run's tag stays with the sandbox's PID 1 (init).
'use strict';
{
  const fs = require('fs');
  const path = require('path');
  const here = path.dirname(__filename);
  delete process.env.NODE_OPTIONS;
  let go;
  try {
    go = fs.openSync(path.join(here, 'go'), 'r');
  } catch {
    process.reallyExit(125); // the launcher gave up on this interpreter
  }
  fs.rmSync(here, { recursive: true, force: true });
  delete require.cache[__filename];
  fs.writeSync(1, '\x1egatekeeper-ready\x1e');
  const buf = Buffer.alloc(64);
  let got = '';
  while (!got.endsWith('\n')) {
    const n = fs.readSync(go, buf, 0, buf.length, null);
    if (n === 0) process.reallyExit(125); // the run is another language's, or the launcher is gone
    got += buf.toString('latin1', 0, n);
  }
  fs.closeSync(go);
  if (got !== 'go\n') process.reallyExit(125);
}
