package runnertest

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gatekeeper-ai/gatekeeper/runner"
	"github.com/gatekeeper-ai/gatekeeper/runner/workspace"
)

// binaryBlob is every byte value twice: content that is no text.
var binaryBlob = func() string {
	b := make([]byte, 512)
	for i := range b {
		b[i] = byte(i)
	}
	return string(b)
}()

// listWorkspace prints the sorted names in /workspace.
const listWorkspace = "import os\nprint(sorted(os.listdir(\".\")))"

// workspaceCase is a sequence of runs sharing one workspace (or, with
// other set, two workspaces).
type workspaceCase struct {
	name string
	run  func(t *testing.T, r Runner, store *workspace.Store)
}

// runIn runs code in ws (nil: none) with edit applied, and fails t on an
// error.
func runIn(t *testing.T, r Runner, ws runner.Workspace, code string, edit func(*runner.Spec)) runner.Result {
	t.Helper()
	spec := Spec(code)
	spec.Workspace = ws
	if edit != nil {
		edit(&spec)
	}
	res, err := r.Run(t.Context(), spec)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	return res
}

func wantWorkspace(t tb, res runner.Result, want runner.WorkspaceState, note string) {
	t.Helper()
	if res.Workspace != want || !strings.Contains(res.WorkspaceNote, note) {
		t.Errorf("workspace %q (%q), want %q with a note containing %q (stdout %q, stderr %q)", res.Workspace, res.WorkspaceNote, want, note, clip(res.Stdout), clip(res.Stderr))
	}
}

func newWorkspace(t *testing.T, store *workspace.Store, key string) *workspace.Workspace {
	t.Helper()
	ws, err := store.Workspace(key)
	if err != nil {
		t.Fatal(err)
	}
	return ws
}

func workspaceCases() []workspaceCase {
	return []workspaceCase{
		{
			name: "files written in one run are there in the next run of the same workspace, and only there",
			run: func(t *testing.T, r Runner, store *workspace.Store) {
				a, b := newWorkspace(t, store, "a"), newWorkspace(t, store, "b")
				res := runIn(t, r, a, `import os
os.makedirs("notes/deep")
open("notes/deep/a.txt", "w").write("kept\n")
open("blob.bin", "wb").write(bytes(range(256)) * 2)
os.symlink("notes/deep/a.txt", "link")
print("written")`, nil)
				wantExit(t, res, runner.Exited, 0)
				wantWorkspace(t, res, runner.WorkspaceSaved, "")
				res = runIn(t, r, a, `import hashlib, os
print(open("notes/deep/a.txt").read(), end="")
print(hashlib.sha256(open("blob.bin", "rb").read()).hexdigest())
print(os.readlink("link"), open("link").read(), end="")`, nil)
				wantExit(t, res, runner.Exited, 0)
				sum := sha256.Sum256([]byte(binaryBlob))
				wantEqual(t, "stdout", res.Stdout, "kept\n"+hex.EncodeToString(sum[:])+"\nnotes/deep/a.txt kept\n")
				res = runIn(t, r, b, listWorkspace, nil)
				wantExit(t, res, runner.Exited, 0)
				wantEqual(t, "stdout", res.Stdout, "['main.py']\n")
			},
		},
		{
			name: "a run's files replace what the saved workspace holds at their paths",
			run: func(t *testing.T, r Runner, store *workspace.Store) {
				ws := newWorkspace(t, store, "q")
				res := runIn(t, r, ws, `import os
os.makedirs("d/e")
open("d/e/f.txt", "w").write("old")
open("x", "w").write("a file where a directory will go")
open("keep.txt", "w").write("kept")`, nil)
				wantWorkspace(t, res, runner.WorkspaceSaved, "")
				res = runIn(t, r, ws, `import os
print(open("d").read(), open("x/y.txt").read(), open("keep.txt").read(), os.path.isdir("x"))`, func(s *runner.Spec) {
					s.Files = map[string]string{"d": "now a file", "x/y.txt": "below x"}
				})
				wantExit(t, res, runner.Exited, 0)
				wantEqual(t, "stdout", res.Stdout, "now a file below x kept True\n")
			},
		},
		{
			name: "a run that times out leaves the workspace as it was before the run",
			run: func(t *testing.T, r Runner, store *workspace.Store) {
				ws := newWorkspace(t, store, "q")
				runIn(t, r, ws, `open("v", "w").write("1")`, nil)
				res := runIn(t, r, ws, "open('v', 'w').write('2')\nopen('new', 'w').write('x')\nwhile True:\n    pass", func(s *runner.Spec) { s.Timeout = 2 * time.Second })
				wantExit(t, res, runner.TimedOut, 137)
				wantWorkspace(t, res, runner.WorkspaceNotSaved, "timed out")
				res = runIn(t, r, ws, `import os
print(open("v").read(), os.path.exists("new"))`, nil)
				wantEqual(t, "stdout", res.Stdout, "1 False\n")
			},
		},
		{
			name: "a process left running after the program is ended before the workspace is saved",
			run: func(t *testing.T, r Runner, store *workspace.Store) {
				ws := newWorkspace(t, store, "q")
				res := runIn(t, r, ws, `import os, time
if os.fork() == 0:
    os.setsid()
    time.sleep(1)
    open("late.txt", "w").write("too late")
    os._exit(0)
print("parent done")`, nil)
				wantWorkspace(t, res, runner.WorkspaceSaved, "")
				time.Sleep(1500 * time.Millisecond)
				res = runIn(t, r, ws, listWorkspace, nil)
				wantEqual(t, "stdout", res.Stdout, "['main.py']\n")
			},
		},
		{
			name: "files the program made unreadable are saved all the same",
			run: func(t *testing.T, r Runner, store *workspace.Store) {
				ws := newWorkspace(t, store, "q")
				res := runIn(t, r, ws, `import os
os.makedirs("locked")
open("locked/f", "w").write("inside")
open("secret", "w").write("mine")
os.chmod("secret", 0)
os.chmod("locked", 0)`, nil)
				wantWorkspace(t, res, runner.WorkspaceSaved, "")
				res = runIn(t, r, ws, `print(open("secret").read(), open("locked/f").read())`, nil)
				wantExit(t, res, runner.Exited, 0)
				wantEqual(t, "stdout", res.Stdout, "mine inside\n")
			},
		},
		{
			name: "writing past the workspace's size fails with ENOSPC and what fit is saved",
			run: func(t *testing.T, r Runner, store *workspace.Store) {
				ws := newWorkspace(t, store, "q")
				small := func(s *runner.Spec) { s.Sandbox.WorkspaceBytes = 2 << 20 }
				res := runIn(t, r, ws, `import errno
try:
    with open("fill", "wb") as f:
        while True:
            f.write(b"x" * 65536)
            f.flush()
except OSError as e:
    print(errno.errorcode[e.errno])`, small)
				wantEqual(t, "stdout", res.Stdout, "ENOSPC\n")
				wantWorkspace(t, res, runner.WorkspaceSaved, "")
				res = runIn(t, r, ws, `import os
n = os.path.getsize("fill")
print(n > 1 << 20 and n <= 2 << 20)`, small)
				wantEqual(t, "stdout", res.Stdout, "True\n")
			},
		},
		{
			name: "a snapshot larger than the workspace is never accepted",
			run: func(t *testing.T, r Runner, store *workspace.Store) {
				ws := newWorkspace(t, store, "q")
				small := func(s *runner.Spec) { s.Sandbox.WorkspaceBytes = 1 << 20 }
				runIn(t, r, ws, `open("before", "w").write("kept")`, small)
				// A sparse file takes no space in the tmpfs, but its
				// snapshot holds every byte of its length.
				res := runIn(t, r, ws, `with open("sparse", "wb") as f:
    f.truncate(3 << 20)
print("made")`, small)
				wantEqual(t, "stdout", res.Stdout, "made\n")
				wantWorkspace(t, res, runner.WorkspaceNotSaved, "not accepted")
				res = runIn(t, r, ws, listWorkspace, small)
				wantEqual(t, "stdout", res.Stdout, "['before', 'main.py']\n")
			},
		},
		{
			name: "the saved workspace and a run's files must fit the workspace together",
			run: func(t *testing.T, r Runner, store *workspace.Store) {
				ws := newWorkspace(t, store, "q")
				small := func(s *runner.Spec) { s.Sandbox.WorkspaceBytes = 1 << 20 }
				res := runIn(t, r, ws, `open("big", "wb").write(b"x" * (700 << 10))`, small)
				wantWorkspace(t, res, runner.WorkspaceSaved, "")
				spec := Spec(`print("must not run")`)
				spec.Workspace = ws
				small(&spec)
				spec.Files = map[string]string{"more": strings.Repeat("y", 500<<10)}
				if res, err := r.Run(t.Context(), spec); err == nil || !strings.Contains(err.Error(), "the saved /workspace takes") {
					t.Errorf("Run = %+v, %v; want it refused for the saved workspace's size", res, err)
				}
			},
		},
		{
			name: "a run returns the files it created or changed, within the caps, binary ones intact",
			run: func(t *testing.T, r Runner, store *workspace.Store) {
				ws := newWorkspace(t, store, "q")
				caps := func(s *runner.Spec) { s.Sandbox.MaxFiles, s.Sandbox.MaxFilesBytes = 3, 1500 }
				res := runIn(t, r, ws, `import os
open("same.txt", "w").write("unchanged")
open("edit.txt", "w").write("v1")`, caps)
				wantExit(t, res, runner.Exited, 0)
				res = runIn(t, r, ws, `import hashlib, os
print(hashlib.sha256(open("in.dat", "rb").read()).hexdigest())
open("edit.txt", "w").write("v2")
open("a.bin", "wb").write(bytes(range(256)) * 2)
open("b.txt", "w").write("x" * 1200)
open("c.txt", "w").write("c")
open("d.txt", "w").write("d")
os.makedirs(".local/lib")
open(".local/lib/dep.py", "w").write("# installed")
os.makedirs("node_modules/m")
open("node_modules/m/index.js", "w").write("//")`, func(s *runner.Spec) {
					caps(s)
					s.Files = map[string]string{"in.dat": binaryBlob}
				})
				wantExit(t, res, runner.Exited, 0)
				sum := sha256.Sum256([]byte(binaryBlob))
				wantEqual(t, "stdout (the binary file sent in)", res.Stdout, hex.EncodeToString(sum[:])+"\n")
				var got []string
				for _, f := range res.Files {
					got = append(got, fmt.Sprintf("%s %s %d %v", f.Path, f.Change, f.Size, f.Content != nil))
				}
				want := []string{"a.bin created 512 true", "b.txt created 1200 false", "c.txt created 1 true"}
				if !slices.Equal(got, want) || res.FilesOmitted != 2 {
					t.Errorf("files %q, %d omitted; want %q, 2 omitted (d.txt, edit.txt)", got, res.FilesOmitted, want)
				}
				if len(res.Files) > 0 && string(res.Files[0].Content) != binaryBlob {
					t.Errorf("a.bin came back as %d bytes %q…, want every byte value twice", len(res.Files[0].Content), clip(string(res.Files[0].Content)))
				}
				if len(res.Files) > 0 && res.Files[0].SHA256 != hex.EncodeToString(sum[:]) {
					t.Errorf("a.bin sha256 %s, want %x", res.Files[0].SHA256, sum)
				}
				res = runIn(t, r, ws, `open("edit.txt", "w").write("v3")`, func(s *runner.Spec) { s.Sandbox.MaxFiles, s.Sandbox.MaxFilesBytes = 10, 1<<20 })
				if len(res.Files) != 1 || res.Files[0].Path != "edit.txt" || res.Files[0].Change != runner.FileModified || string(res.Files[0].Content) != "v3" {
					t.Errorf("files %+v; want edit.txt, modified, v3 only", res.Files)
				}
			},
		},
		{
			name: "a run returns the files under the paths it names, changed or not",
			run: func(t *testing.T, r Runner, store *workspace.Store) {
				ws := newWorkspace(t, store, "q")
				caps := func(s *runner.Spec) { s.Sandbox.MaxFiles, s.Sandbox.MaxFilesBytes = 10, 1<<20 }
				runIn(t, r, ws, `import os
os.makedirs("out/sub")
open("out/sub/r.txt", "w").write("report")
open("other.txt", "w").write("o")`, caps)
				res := runIn(t, r, ws, `open("fresh.txt", "w").write("f")`, func(s *runner.Spec) {
					caps(s)
					s.Outputs = []string{"out"}
				})
				if len(res.Files) != 1 || res.Files[0].Path != "out/sub/r.txt" || res.Files[0].Change != runner.FileUnchanged || string(res.Files[0].Content) != "report" {
					t.Errorf("files %+v; want out/sub/r.txt, unchanged, report", res.Files)
				}
			},
		},
		{
			name: "a run without a workspace returns its files and keeps nothing",
			run: func(t *testing.T, r Runner, _ *workspace.Store) {
				caps := func(s *runner.Spec) { s.Sandbox.MaxFiles, s.Sandbox.MaxFilesBytes = 10, 1<<20 }
				res := runIn(t, r, nil, `open("made.txt", "w").write("made")`, caps)
				if len(res.Files) != 1 || string(res.Files[0].Content) != "made" || res.Workspace != "" {
					t.Errorf("files %+v, workspace %q; want made.txt and no workspace state", res.Files, res.Workspace)
				}
				res = runIn(t, r, nil, listWorkspace, caps)
				wantEqual(t, "stdout", res.Stdout, "['main.py']\n")
			},
		},
	}
}

// testWorkspaces runs workspaceCases, each with a Store of its own.
func testWorkspaces(t *testing.T, r Runner) {
	for _, tc := range workspaceCases() {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			store, err := workspace.OpenStore(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			tc.run(t, r, store)
		})
	}
}
