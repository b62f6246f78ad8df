package launch

import (
	"strings"
	"testing"
	"time"

	"github.com/gatekeeper-ai/gatekeeper/runner"
)

// sessionCases run on this host and in the images alike.
func sessionCases() []sessionCase {
	py, node, sh := runner.Python, runner.Node, runner.Shell
	big := strings.Repeat("x", 1023) // a line of 1 KiB with its newline
	return []sessionCase{
		{"python globals and imports persist across runs", []sessionStep{
			{lang: py, code: "import json\nx = 41\nf = open('data.txt', 'w')\n", status: "0 k\n", stdout: ""},
			{lang: py, code: "x += 1\nf.write('hi')\nf.close()\nprint(json.dumps(x), __name__)\n", status: "0 k\n", stdout: "42 __main__\n"},
		}},
		{"python shows a last bare expression as a notebook does", []sessionStep{
			{lang: py, code: "a = [1, 'b']\na\n", status: "0 k\n", stdout: "[1, 'b']\n"},
			{lang: py, code: "print(_)\nNone\n", status: "0 k\n", stdout: "[1, 'b']\n"},
		}},
		{"python SystemExit ends the run with its code and keeps the interpreter", []sessionStep{
			{lang: py, code: "import sys\ny = 7\nsys.exit(3)\n", status: "3 k\n", stdout: ""},
			{lang: py, code: "print(y)\nraise SystemExit\n", status: "0 k\n", stdout: "7\n"},
		}},
		{"python an exception prints its traceback naming the main file and keeps the interpreter", []sessionStep{
			{lang: py, code: "z = 5\ndef f():\n    1/0\nf()\n", status: "1 k\n", stderrHas: []string{"main.py\", line 4", "ZeroDivisionError"}, stderrLacks: []string{"<string>"}},
			{lang: py, code: "print(z)\n", status: "0 k\n", stdout: "5\n"},
			{lang: py, code: "print(z\n", status: "1 k\n", stderrHas: []string{"main.py\", line 1", "SyntaxError"}},
		}},
		{"python top-level await runs", []sessionStep{
			{lang: py, code: "import asyncio\nawait asyncio.sleep(0)\nprint('awaited')\n", status: "0 k\n", stdout: "awaited\n"},
		}},
		{"python the timeout interrupts a busy loop and keeps the globals", []sessionStep{
			{lang: py, code: "g = 'kept'\n", status: "0 k\n"}, // set in a run of its own: a 1 s timeout may pass before a cold kernel's first statement
			{lang: py, code: "g2 = 'also'\nwhile True: pass\n", soft: 1, status: "130 i\n", stderrHas: []string{"KeyboardInterrupt"}},
			{lang: py, code: "print(g)\n", status: "0 k\n", stdout: "kept\n"},
		}},
		{"python code that ignores the interrupt is killed and its state lost", []sessionStep{
			{lang: py, code: "import signal\n_ = signal.signal(signal.SIGINT, signal.SIG_IGN)\n", status: "0 k\n"}, // before the timed run: its 1 s may pass before a cold kernel's first statement
			{lang: py, code: "while True: pass\n", soft: 1, status: "137 t\n"},
		}},
		{"python exiting the interpreter loses the state", []sessionStep{
			{lang: py, code: "import os\nprint('bye', flush=True)\nos._exit(4)\n", status: "4 l\n", stdout: "bye\n"},
		}},
		{"an interpreter that ended between runs is reported at the next run", []sessionStep{
			{lang: py, code: "import os, threading, time\nthreading.Thread(target=lambda: (time.sleep(0.5), os._exit(9)), daemon=True).start()\n", status: "0 k\n"},
			{lang: node, code: "1", status: "125 l\n", stderrHas: []string{"python interpreter exited with status 9 between runs"},
				setup: func(*testing.T, *hostSession) { time.Sleep(1500 * time.Millisecond) }},
		}},
		{"node top-level bindings persist across runs", []sessionStep{
			{lang: node, code: "let n = 40; var v = 'var'; const path = require('path');\n", status: "0 k\n", stdout: ""},
			{lang: node, code: "n += 2; console.log(n, v, path.basename(__filename))\n", status: "0 k\n", stdout: "42 var main.js\n"},
		}},
		{"node shows a completion value and awaits a promise", []sessionStep{
			{lang: node, code: "({a: 1})", status: "0 k\n", stdout: "{ a: 1 }\n"},
			{lang: node, code: "Promise.resolve([2])", status: "0 k\n", stdout: "[ 2 ]\n"},
			{lang: node, code: "const r = await new Promise((ok) => setTimeout(() => ok('late'), 50)); console.log(r)", status: "0 k\n", stdout: "late\n"},
		}},
		{"node an exception prints its stack and keeps the kernel; process.exit sets the code", []sessionStep{
			{lang: node, code: "globalThis.k = 'kept'; throw new Error('boom')", status: "1 k\n", stderrHas: []string{"Error: boom", "main.js:1"}},
			{lang: node, code: "console.log(k); process.exit(5)", status: "5 k\n", stdout: "kept\n"},
			{lang: node, code: "process.exitCode = 4", status: "4 k\n", stdout: "4\n"},
			// A callback of an ended run throws while no Node run is current:
			// it waits for a file that the shell run between makes, so the
			// throw lands between Node runs whatever the machine's load.
			// Its error is kept and shown with the next run.
			{lang: node, code: "globalThis.t = setInterval(() => { const fs = require('fs'); if (!fs.existsSync('go')) return; clearInterval(t); fs.writeFileSync('fired', ''); throw new Error('later') }, 20); 'sync done'", status: "0 k\n", stdout: "'sync done'\n", stderrLacks: []string{"Error: later"}},
			{lang: sh, code: "touch go\nfor i in $(seq 400); do [ -e fired ] && break; sleep 0.05; done\n", status: "0 k\n", stdout: "", stderrLacks: []string{"Error: later"}},
			{lang: node, code: "console.log(k)", status: "0 k\n", stdout: "kept\n", stderrHas: []string{"Error: later"}},
		}},
		{"node the timeout interrupts a busy loop and keeps the bindings", []sessionStep{
			{lang: node, code: "var w = 'kept'", status: "0 k\n"}, // in a run of its own, as the Python case does
			{lang: node, code: "for (;;) {}", soft: 1, status: "130 i\n", stderrHas: []string{"interrupted"}},
			{lang: node, code: "console.log(w)", status: "0 k\n", stdout: "kept\n"},
		}},
		{"shell cwd, environment, functions and a background server persist", []sessionStep{
			{lang: sh, code: "mkdir -p srv && cd srv && echo hello > index.html\nexport GK_X=1\nhi() { echo \"hi $1\"; }\npython3 -u -m http.server 0 --bind 127.0.0.1 >../srv.log 2>&1 &\n", status: "0 k\n", stdout: ""},
			{lang: sh, code: "sleep 30\n", soft: 1, status: "130 i\n"},
			{lang: sh, code: "pwd | sed 's,.*/,,'\necho \"$GK_X\"\nhi there\nfor i in 1 2 3 4 5 6 7 8 9 10; do port=$(sed -n 's/.* port \\([0-9]*\\).*/\\1/p' ../srv.log); [ -n \"$port\" ] && python3 -c \"import urllib.request as u; print(u.urlopen('http://127.0.0.1:$port/index.html').read().decode(), end='')\" && break; sleep 0.5; done\n", status: "0 k\n", stdout: "srv\n1\nhi there\nhello\n"},
		}},
		{"shell return ends a run early, a syntax error gives 2 without running", []sessionStep{
			{lang: sh, code: "v=1\nreturn 6\nv=2\n", status: "6 k\n"},
			{lang: sh, code: "echo $v\nif\n", status: "2 k\n", stderrHas: []string{"Syntax error"}},
			{lang: sh, code: "echo $v\n", status: "0 k\n", stdout: "1\n"},
		}},
		{"shell the timeout interrupts the running command and keeps the shell", []sessionStep{
			{lang: sh, code: "s=kept\nsleep 30\necho not reached\n", soft: 1, status: "130 i\n"},
			{lang: sh, code: "t=also\nwhile :; do :; done\n", soft: 1, status: "130 i\n"},
			{lang: sh, code: "echo $s $t\n", status: "0 k\n", stdout: "kept also\n"},
		}},
		{"shell exit ends the shell and loses the state", []sessionStep{
			{lang: sh, code: "exit 3\n", status: "3 l\n"},
		}},
		{"background output between runs is delivered with the next run and bounded", []sessionStep{
			{lang: sh, code: "(sleep 0.3; echo between; echo err-between >&2) &\n", status: "0 k\n", stdout: ""},
			{lang: sh, code: "echo now\n", status: "0 k\n", stdout: "between\nnow\n", stderrHas: []string{"err-between"}, stderrLacks: []string{"dropped", "more"},
				setup: func(*testing.T, *hostSession) { time.Sleep(time.Second) }},
			{lang: py, code: "import subprocess\np = subprocess.Popen(['sh', '-c', 'sleep 0.3; i=0; while [ $i -lt 100 ]; do echo " + big + "; i=$((i+1)); done'])\n", status: "0 k\n"},
			{lang: py, code: "print('now')\n", status: "0 k\n", stdoutHas: []string{"now\n"}, stderrHas: []string{"wrote 36864 bytes more on standard output", "the last 65536 follow"},
				setup: func(*testing.T, *hostSession) { time.Sleep(2 * time.Second) }},
		}},
	}
}
