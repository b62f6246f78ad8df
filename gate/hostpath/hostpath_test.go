package hostpath_test

import (
	"errors"
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gatekeeper-ai/gatekeeper/gate/hostpath"
)

// tree is a directory tree with a workspace, a home and an outside, and
// symbolic links from the workspace into itself and out of it.
type tree struct {
	root string // the tree's directory, its own links resolved
	ws   string // the workspace, the default Cwd
	home string // the default Home
	out  string // a directory outside the workspace
}

// makeTree builds a tree under dir:
//
//	outside/secret.txt, outside/dir/
//	home/.ssh/id_rsa
//	ws/src/main.go, ws/file.txt, ws/sub/
//	ws/link-in   -> src
//	ws/link-out  -> ../outside
//	ws/abs-out   -> <root>/outside
//	ws/chain1    -> chain2 -> chain3 -> ../outside/secret.txt
//	ws/sub/up    -> ../../outside
//	ws/dotdot    -> ..
//	ws/dangling  -> ../outside/new-dir/new.txt
//	ws/trick     -> missing/../link-out
//	ws/loop-a    -> loop-b -> loop-a
//	ws/self      -> self
//	ws/n1 -> src, ws/nK -> n(K-1) up to n41
func makeTree(tb testing.TB, dir string) tree {
	tb.Helper()
	root, err := filepath.EvalSymlinks(dir)
	if err != nil {
		tb.Fatalf("resolve temp dir: %v", err)
	}
	tr := tree{
		root: root,
		ws:   filepath.Join(root, "ws"),
		home: filepath.Join(root, "home"),
		out:  filepath.Join(root, "outside"),
	}
	for _, d := range []string{"outside/dir", "home/.ssh", "ws/src", "ws/sub"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			tb.Fatalf("mkdir: %v", err)
		}
	}
	for _, f := range []string{"outside/secret.txt", "home/.ssh/id_rsa", "ws/src/main.go", "ws/file.txt"} {
		if err := os.WriteFile(filepath.Join(root, f), []byte("x"), 0o644); err != nil {
			tb.Fatalf("write file: %v", err)
		}
	}
	links := [][2]string{
		{"ws/link-in", "src"},
		{"ws/link-out", "../outside"},
		{"ws/abs-out", tr.out},
		{"ws/chain1", "chain2"},
		{"ws/chain2", "chain3"},
		{"ws/chain3", "../outside/secret.txt"},
		{"ws/sub/up", "../../outside"},
		{"ws/dotdot", ".."},
		{"ws/dangling", "../outside/new-dir/new.txt"},
		{"ws/trick", "missing/../link-out"},
		{"ws/loop-a", "loop-b"},
		{"ws/loop-b", "loop-a"},
		{"ws/self", "self"},
		{"ws/n1", "src"},
	}
	for k := 2; k <= hostpath.MaxLinks+1; k++ {
		links = append(links, [2]string{fmt.Sprintf("ws/n%d", k), fmt.Sprintf("n%d", k-1)})
	}
	for _, l := range links {
		if err := os.Symlink(l[1], filepath.Join(root, l[0])); err != nil {
			tb.Fatalf("symlink: %v", err)
		}
	}
	return tr
}

// longPath returns an absolute path of exactly n bytes under a top
// directory that does not exist, with components of at most 200 bytes.
func longPath(n int) string {
	var b strings.Builder
	b.WriteString("/gatekeeper-no-such-dir")
	for rem := n - b.Len(); rem > 0; rem = n - b.Len() {
		name := min(200, rem-1)
		if rem-name-1 == 1 {
			name-- // leave room for "/a", not a bare "/"
		}
		b.WriteString("/")
		b.WriteString(strings.Repeat("a", name))
	}
	return b.String()
}

func TestNormalize(t *testing.T) {
	t.Parallel()
	tr := makeTree(t, t.TempDir())
	opts := hostpath.Options{Home: tr.home, Cwd: tr.ws}
	ws := func(p string) string { return filepath.Join(tr.ws, p) }
	out := func(p string) string { return filepath.Join(tr.out, p) }
	type testCase struct {
		name         string
		raw          string
		opts         *hostpath.Options // nil means opts
		wantAbs      string
		wantResolved string
		wantErr      error
	}
	tests := []testCase{
		{name: "an absolute path inside the workspace stays as it is", raw: ws("src/main.go"), wantAbs: ws("src/main.go"), wantResolved: ws("src/main.go")},
		{name: "a relative path is put under cwd", raw: "src/main.go", wantAbs: ws("src/main.go"), wantResolved: ws("src/main.go")},
		{name: "dot components, double slashes and a trailing slash are cleaned", raw: ".//src/./main.go/", wantAbs: ws("src/main.go"), wantResolved: ws("src/main.go")},
		{name: "dot-dot climbing out of the workspace is cleaned lexically", raw: "src/../../outside/secret.txt", wantAbs: out("secret.txt"), wantResolved: out("secret.txt")},
		{name: "dot-dot above the root stays at the root", raw: "/../../.." + tr.ws, wantAbs: tr.ws, wantResolved: tr.ws},
		{name: "the root is itself", raw: "/", wantAbs: "/", wantResolved: "/"},
		{name: "a link that stays inside resolves inside", raw: "link-in/main.go", wantAbs: ws("link-in/main.go"), wantResolved: ws("src/main.go")},
		{name: "a relative link pointing outside resolves outside", raw: "link-out/secret.txt", wantAbs: ws("link-out/secret.txt"), wantResolved: out("secret.txt")},
		{name: "an absolute link pointing outside resolves outside", raw: "abs-out/secret.txt", wantAbs: ws("abs-out/secret.txt"), wantResolved: out("secret.txt")},
		{name: "a chain of links resolves to its end", raw: "chain1", wantAbs: ws("chain1"), wantResolved: out("secret.txt")},
		{name: "a link in a subdirectory climbing out resolves outside", raw: "sub/up/secret.txt", wantAbs: ws("sub/up/secret.txt"), wantResolved: out("secret.txt")},
		{name: "a link to its parent is followed before the next name", raw: "dotdot/outside/secret.txt", wantAbs: ws("dotdot/outside/secret.txt"), wantResolved: out("secret.txt")},
		{name: "a new file under a linked directory resolves where it would be created", raw: "link-out/new.txt", wantAbs: ws("link-out/new.txt"), wantResolved: out("new.txt")},
		{name: "a new file deep under a linked directory keeps its missing directories", raw: "link-out/a/b/c.txt", wantAbs: ws("link-out/a/b/c.txt"), wantResolved: out("a/b/c.txt")},
		{name: "a dangling link resolves to the file a write would create", raw: "dangling", wantAbs: ws("dangling"), wantResolved: out("new-dir/new.txt")},
		{name: "a link target climbing back out of a missing directory follows the next link", raw: "trick/secret.txt", wantAbs: ws("trick/secret.txt"), wantResolved: out("secret.txt")},
		{name: "a path below a regular file stays as it is", raw: "file.txt/x", wantAbs: ws("file.txt/x"), wantResolved: ws("file.txt/x")},
		{name: "a missing path stays as it is", raw: "nope/x.txt", wantAbs: ws("nope/x.txt"), wantResolved: ws("nope/x.txt")},
		{name: "a chain of exactly the most links resolves", raw: fmt.Sprintf("n%d/main.go", hostpath.MaxLinks), wantAbs: ws(fmt.Sprintf("n%d/main.go", hostpath.MaxLinks)), wantResolved: ws("src/main.go")},
		{name: "a chain of one link too many is refused", raw: fmt.Sprintf("n%d/main.go", hostpath.MaxLinks+1), wantErr: hostpath.ErrSymlinkLoop},
		{name: "a loop of two links is refused", raw: "loop-a", wantErr: hostpath.ErrSymlinkLoop},
		{name: "a link to itself is refused", raw: "self/x", wantErr: hostpath.ErrSymlinkLoop},
		{name: "a tilde alone is home", raw: "~", wantAbs: tr.home, wantResolved: tr.home},
		{name: "a tilde path is under home", raw: "~/.ssh/id_rsa", wantAbs: filepath.Join(tr.home, ".ssh/id_rsa"), wantResolved: filepath.Join(tr.home, ".ssh/id_rsa")},
		{name: "a tilde path climbing out of home is cleaned", raw: "~/../ws/link-out", wantAbs: ws("link-out"), wantResolved: tr.out},
		{name: "a tilde inside a path is a plain name", raw: "src/~/x", wantAbs: ws("src/~/x"), wantResolved: ws("src/~/x")},
		{name: "a tilde path without home is refused", raw: "~/.ssh", opts: &hostpath.Options{Cwd: tr.ws}, wantErr: hostpath.ErrNotAbsolute},
		{name: "a relative path without cwd is refused", raw: "src", opts: &hostpath.Options{Home: tr.home}, wantErr: hostpath.ErrNotAbsolute},
		{name: "a relative home is refused", raw: tr.ws, opts: &hostpath.Options{Home: "home", Cwd: tr.ws}, wantErr: hostpath.ErrNotAbsolute},
		{name: "a relative cwd is refused", raw: tr.ws, opts: &hostpath.Options{Home: tr.home, Cwd: "ws"}, wantErr: hostpath.ErrNotAbsolute},
		{name: "an unknown user is refused", raw: "~gatekeeper-no-such-user/.ssh", wantErr: hostpath.ErrUnknownUser},
		{name: "an empty path is refused", raw: "", wantErr: hostpath.ErrEmpty},
		{name: "a NUL byte is refused", raw: "src/main.go\x00.txt", wantErr: hostpath.ErrNUL},
		{name: "a NUL byte in cwd is refused", raw: "src", opts: &hostpath.Options{Cwd: tr.ws + "\x00"}, wantErr: hostpath.ErrNUL},
		{name: "a path of the longest length is accepted", raw: longPath(hostpath.MaxPathBytes), wantAbs: longPath(hostpath.MaxPathBytes), wantResolved: longPath(hostpath.MaxPathBytes)},
		{name: "a path one byte too long is refused", raw: longPath(hostpath.MaxPathBytes + 1), wantErr: hostpath.ErrTooLong},
		{name: "a very long path is refused", raw: strings.Repeat("/", 1<<20), wantErr: hostpath.ErrTooLong},
		{name: "a relative path too long once under cwd is refused", raw: longPath(hostpath.MaxPathBytes - 10)[1:], wantErr: hostpath.ErrTooLong},
		{name: "a component of the longest length is accepted", raw: "/" + strings.Repeat("n", hostpath.MaxNameBytes), wantAbs: "/" + strings.Repeat("n", hostpath.MaxNameBytes), wantResolved: "/" + strings.Repeat("n", hostpath.MaxNameBytes)},
		{name: "a component one byte too long is refused", raw: "/" + strings.Repeat("n", hostpath.MaxNameBytes+1), wantErr: hostpath.ErrTooLong},
		{name: "a too long component is refused even if dot-dot removes it", raw: strings.Repeat("n", hostpath.MaxNameBytes+1) + "/../src", wantErr: hostpath.ErrTooLong},
	}
	if u, err := user.Current(); err == nil && filepath.IsAbs(u.HomeDir) && !strings.Contains(u.Username, "/") {
		home := filepath.Clean(u.HomeDir)
		if resolved, err := filepath.EvalSymlinks(home); err == nil {
			tests = append(tests, testCase{
				name:         "a tilde-user path is under that user's home",
				raw:          "~" + u.Username + "/gatekeeper-no-such-file",
				wantAbs:      filepath.Join(home, "gatekeeper-no-such-file"),
				wantResolved: filepath.Join(resolved, "gatekeeper-no-such-file"),
			})
		}
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			o := opts
			if tc.opts != nil {
				o = *tc.opts
			}
			got, err := hostpath.Normalize(tc.raw, o)
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("Normalize error = %v, want one wrapping %v", err, tc.wantErr)
				}
				if got != (hostpath.Path{}) {
					t.Errorf("Normalize returned %+v with its error, want the zero Path", got)
				}
				return
			}
			if err != nil {
				t.Fatalf("Normalize error = %v", err)
			}
			want := hostpath.Path{Raw: tc.raw, Abs: tc.wantAbs, Resolved: tc.wantResolved}
			if got != want {
				t.Errorf("Normalize = %+v, want %+v", got, want)
			}
			// Where the path exists, the standard library agrees.
			if _, err := os.Stat(got.Abs); err == nil {
				if eval, err := filepath.EvalSymlinks(got.Abs); err != nil || eval != got.Resolved {
					t.Errorf("EvalSymlinks(%s) = %s, %v; Normalize resolved %s", got.Abs, eval, err, got.Resolved)
				}
			}
		})
	}
}

func TestNormalizeErrorsAreShort(t *testing.T) {
	t.Parallel()
	_, err := hostpath.Normalize(strings.Repeat("a", 1<<20), hostpath.Options{Cwd: "/"})
	if err == nil {
		t.Fatalf("Normalize of a 1 MiB path succeeded, want an error")
	}
	if len(err.Error()) > 512 {
		t.Errorf("Normalize error is %d bytes long, want at most 512", len(err.Error()))
	}
}

func TestWithin(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		path, root string
		want       bool
	}{
		{name: "the root itself is within", path: "/srv/app", root: "/srv/app", want: true},
		{name: "a child is within", path: "/srv/app/main.go", root: "/srv/app", want: true},
		{name: "a deep child is within", path: "/srv/app/a/b/c", root: "/srv/app", want: true},
		{name: "a sibling sharing a prefix is not within", path: "/srv/app2", root: "/srv/app", want: false},
		{name: "a sibling file sharing a prefix is not within", path: "/srv/app.bak/x", root: "/srv/app", want: false},
		{name: "the parent is not within", path: "/srv", root: "/srv/app", want: false},
		{name: "a trailing slash on the root does not matter", path: "/srv/app/x", root: "/srv/app/", want: true},
		{name: "a trailing slash on the path does not matter", path: "/srv/app/", root: "/srv/app", want: true},
		{name: "dot-dot in the path is cleaned first", path: "/srv/app/../app2/x", root: "/srv/app", want: false},
		{name: "dot-dot that comes back is within", path: "/srv/app/x/../y", root: "/srv/app", want: true},
		{name: "everything absolute is within the file system root", path: "/etc/passwd", root: "/", want: true},
		{name: "the file system root is within itself", path: "/", root: "//", want: true},
		{name: "a relative path is not within an absolute root", path: "srv/app/x", root: "/srv/app", want: false},
		{name: "an absolute path is not within a relative root", path: "/srv/app/x", root: "srv/app", want: false},
		{name: "a relative child is within a relative root", path: "src/x.go", root: "src", want: true},
		{name: "a relative path is within dot", path: "src/x.go", root: ".", want: true},
		{name: "a climbing path is not within dot", path: "../x", root: ".", want: false},
		{name: "dot-dot is not within dot", path: "..", root: ".", want: false},
		{name: "a path climbing further is not within a climbing root", path: "../../x", root: "..", want: false},
		{name: "a child of a climbing root is within it", path: "../x", root: "..", want: true},
		{name: "an empty path is within nothing", path: "", root: "/", want: false},
		{name: "nothing is within an empty root", path: "/srv", root: "", want: false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if got := hostpath.Within(tc.path, tc.root); got != tc.want {
				t.Errorf("Within(%q, %q) = %v, want %v", tc.path, tc.root, got, tc.want)
			}
		})
	}
}

func TestGlobBase(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		pattern string
		want    string
	}{
		{name: "an absolute pattern keeps its literal directories", pattern: "/etc/**/*.conf", want: "/etc"},
		{name: "a relative pattern keeps its literal directories", pattern: "src/*.go", want: "src"},
		{name: "a pattern starting with a wildcard is based at dot", pattern: "**/*.go", want: "."},
		{name: "a climbing pattern keeps its climb", pattern: "../../x*", want: "../.."},
		{name: "a wildcard right under the root is based at the root", pattern: "/*", want: "/"},
		{name: "a question mark is a metacharacter", pattern: "/etc/pass?d", want: "/etc"},
		{name: "a character class is a metacharacter", pattern: "/e[t]c/passwd", want: "/"},
		{name: "a brace is a metacharacter", pattern: "/srv/{app,etc}/x", want: "/srv"},
		{name: "a backslash is a metacharacter", pattern: `/srv/a\*b/x`, want: "/srv"},
		{name: "a pattern without metacharacters is itself", pattern: "/etc/passwd", want: "/etc/passwd"},
		{name: "the literal part is cleaned", pattern: "/srv//app/./x/../y/*.go", want: "/srv/app/y"},
		{name: "a literal climb out of the base is cleaned", pattern: "a/../../b/*", want: "../b"},
		{name: "dot-dot after a wildcard climbs the base", pattern: "x*/../../etc/*", want: "../.."},
		{name: "dot-dot after a wildcard cannot climb above the root", pattern: "/etc/*/../../../x", want: "/"},
		{name: "a tilde is kept for Normalize", pattern: "~/.ssh/*", want: "~/.ssh"},
		{name: "an empty pattern is dot", pattern: "", want: "."},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if got := hostpath.GlobBase(tc.pattern); got != tc.want {
				t.Errorf("GlobBase(%q) = %q, want %q", tc.pattern, got, tc.want)
			}
		})
	}
}

func TestExpandHome(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		glob, home string
		want       string
	}{
		{name: "a tilde-slash glob is put under home", glob: "~/.ssh/**", home: "/home/dev", want: "/home/dev/.ssh/**"},
		{name: "a trailing slash on home is not doubled", glob: "~/.aws/*", home: "/home/dev/", want: "/home/dev/.aws/*"},
		{name: "a tilde alone is home", glob: "~", home: "/home/dev", want: "/home/dev"},
		{name: "a home at the root gives a root glob", glob: "~/.ssh/**", home: "/", want: "/.ssh/**"},
		{name: "a tilde alone with home at the root is the root", glob: "~", home: "/", want: "/"},
		{name: "a tilde-user glob is unchanged", glob: "~root/.ssh/**", home: "/home/dev", want: "~root/.ssh/**"},
		{name: "an absolute glob is unchanged", glob: "/etc/**", home: "/home/dev", want: "/etc/**"},
		{name: "a tilde later in the glob is unchanged", glob: "/srv/~/x", home: "/home/dev", want: "/srv/~/x"},
		{name: "the rest of the glob is kept byte for byte", glob: "~//a/../b/**", home: "/home/dev", want: "/home/dev//a/../b/**"},
		{name: "an empty home leaves the glob unchanged", glob: "~/.ssh/**", home: "", want: "~/.ssh/**"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if got := hostpath.ExpandHome(tc.glob, tc.home); got != tc.want {
				t.Errorf("ExpandHome(%q, %q) = %q, want %q", tc.glob, tc.home, got, tc.want)
			}
		})
	}
}
