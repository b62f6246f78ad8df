package hostpath_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gatekeeper-ai/gatekeeper/gate/hostpath"
)

// TestNormalizeRefusesProcessRelativePaths: a path the kernel resolves
// relative to the process that opens it means the sidecar's process when
// the sidecar resolves it, and the agent's when the tool opens it. Seen
// with the real Claude Code: /proc/self/cwd/secret.txt was judged inside
// the workspace (the sidecar's cwd) and read a file outside it.
func TestNormalizeRefusesProcessRelativePaths(t *testing.T) {
	t.Parallel()
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ws := filepath.Join(root, "ws")
	if err := os.MkdirAll(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, target := range map[string]string{
		"to-proc-self-cwd": "/proc/self/cwd",
		"to-dev-stdin":     "/dev/stdin",
		"to-proc":          "/proc",
		"to-dev":           "/dev",
		"to-pid":           "/proc/1/root",
		"up-to-proc":       strings.Repeat("../", strings.Count(ws, "/")) + "proc/self",
	} {
		if err := os.Symlink(target, filepath.Join(ws, name)); err != nil {
			t.Fatal(err)
		}
	}
	opts := hostpath.Options{Home: root, Cwd: ws}
	tests := []struct{ name, raw, where string }{
		{"the sidecar's cwd through /proc/self", "/proc/self/cwd/secret.txt", "/proc/self"},
		{"/proc/self itself", "/proc/self", "/proc/self"},
		{"the sidecar's root through /proc/self", "/proc/self/root/etc/passwd", "/proc/self"},
		{"the calling thread through /proc/thread-self", "/proc/thread-self/cwd/x", "/proc/thread-self"},
		{"another process's cwd through its pid", "/proc/1/cwd/x", "/proc/1"},
		{"a thread of a process", "/proc/1/task/1/cwd/x", "/proc/1"},
		{"an open file through /proc/<pid>/fd", "/proc/4242/fd/3", "/proc/4242"},
		{"the /proc/net link to self", "/proc/net/tcp", "/proc/net"},
		{"the /proc/mounts link to self", "/proc/mounts", "/proc/mounts"},
		{"a file descriptor through /dev/fd", "/dev/fd/3", "/dev/fd"},
		{"standard input", "/dev/stdin", "/dev/stdin"},
		{"standard output", "/dev/stdout", "/dev/stdout"},
		{"standard error", "/dev/stderr", "/dev/stderr"},
		{"dot-dot spelled into /proc/self", "/srv/../proc/./self//cwd", "/proc/self"},
		{"a relative path climbing into /proc/self", strings.Repeat("../", 40) + "proc/self/cwd/x", "/proc/self"},
		{"a workspace link to /proc/self/cwd", "to-proc-self-cwd/secret.txt", "/proc/self"},
		{"a workspace link to /dev/stdin", "to-dev-stdin", "/dev/stdin"},
		{"a workspace link to /proc, then self", "to-proc/self/cwd/x", "/proc/self"},
		{"a workspace link to /dev, then fd", "to-dev/fd/3", "/dev/fd"},
		{"a workspace link to another process's root", "to-pid/etc/passwd", "/proc/1"},
		{"a relative workspace link climbing into /proc", "up-to-proc/cwd/x", "/proc/self"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := hostpath.Normalize(tc.raw, opts)
			if !errors.Is(err, hostpath.ErrProcessRelative) {
				t.Fatalf("Normalize(%q) = %+v, %v; want ErrProcessRelative", tc.raw, got, err)
			}
			if !strings.Contains(err.Error(), tc.where) || !strings.Contains(err.Error(), "in the agent's") {
				t.Errorf("error %q does not name %s and say why", err, tc.where)
			}
		})
	}
	// Other paths under /proc and /dev mean the same in every process: they
	// are judged as paths (and are outside any workspace).
	for _, raw := range []string{"/proc/cpuinfo", "/proc/sys/kernel/hostname", "/dev/null", "/dev/tcp/127.0.0.1/80", "/proc/selfish", "/proc/12a/x", "/devfd/3"} {
		if _, err := hostpath.Normalize(raw, opts); errors.Is(err, hostpath.ErrProcessRelative) {
			t.Errorf("Normalize(%q) = %v; it is not process-relative", raw, err)
		}
	}
}

func TestProcessRelative(t *testing.T) {
	t.Parallel()
	for p, want := range map[string]string{
		"/proc/self": "/proc/self", "/proc/self/fd/1": "/proc/self", "/proc/123": "/proc/123", "/proc/123/task/9/cwd": "/proc/123",
		"/dev/fd": "/dev/fd", "/dev/stderr": "/dev/stderr", "/proc": "", "/proc/": "", "/proc/sys": "", "/proc/1x": "", "/dev/fdx": "", "/": "",
	} {
		got, ok := hostpath.ProcessRelative(p)
		if got != want || ok != (want != "") {
			t.Errorf("ProcessRelative(%q) = %q, %v; want %q", p, got, ok, want)
		}
	}
}
