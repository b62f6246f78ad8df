package launch

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

const testCA = "-----BEGIN CERTIFICATE-----\nMIIBfake\n-----END CERTIFICATE-----\n"

// runEgressWrite runs the launcher's egressWrite with dir standing in for
// EgressDir and sys for the image's trust store.
func runEgressWrite(t *testing.T, dir, sys string, e *Egress) (stderr string, err error) {
	t.Helper()
	opts := e.options()
	cmd := exec.CommandContext(t.Context(), "/bin/sh", "-c", `edir=$1 esys=$2 eca=$3 efiles=$4
`+egressWrite, "test", dir, sys, opts[1], opts[2])
	var b strings.Builder
	cmd.Stderr = &b
	err = cmd.Run()
	return b.String(), err
}

// TestEgressWriteWritesTheCAAndTheSentinelFiles: the CA alone, the bundle
// (the image's store, then the CA), and each sentinel file with mode
// 0400, its directories made, a path with a space kept whole; a file
// written once before (mode 0400 already) is replaced.
func TestEgressWriteWritesTheCAAndTheSentinelFiles(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	sys := filepath.Join(root, "system.crt")
	if err := os.WriteFile(sys, []byte("SYSTEM STORE"), 0o644); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(root, ".gatekeeper")
	a, b := filepath.Join(root, "tmp", "deep", "token"), filepath.Join(root, "ws", "with space")
	e := &Egress{CA: []byte(testCA), Files: map[string]string{a: "gksentinel_aaa", b: "gksentinel_bbb"}}
	for round := range 2 {
		if stderr, err := runEgressWrite(t, dir, sys, e); err != nil {
			t.Fatalf("round %d: %v (stderr %q)", round, err, stderr)
		}
		want := map[string]string{
			filepath.Join(dir, "ca.pem"):        testCA,
			filepath.Join(dir, "ca-bundle.pem"): "SYSTEM STORE\n" + testCA,
			a:                                   e.Files[a],
			b:                                   "gksentinel_bbb",
		}
		for f, w := range want {
			got, err := os.ReadFile(f)
			if err != nil {
				t.Fatalf("round %d: %v", round, err)
			}
			if string(got) != w {
				t.Errorf("round %d: %s holds %q, want %q", round, f, got, w)
			}
		}
		for _, f := range []string{a, b} {
			st, err := os.Stat(f)
			if err != nil {
				t.Fatal(err)
			}
			if st.Mode().Perm() != 0o400 {
				t.Errorf("round %d: %s has mode %v, want 0400", round, f, st.Mode().Perm())
			}
		}
		e.Files[a] = "gksentinel_ccc"
	}
}

// TestEgressWriteWithoutASystemStoreBundlesTheCAAlone: an image without
// a trust store gets a bundle of the CA only.
func TestEgressWriteWithoutASystemStoreBundlesTheCAAlone(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), ".gatekeeper")
	if stderr, err := runEgressWrite(t, dir, "/nonexistent/ca.crt", &Egress{CA: []byte(testCA)}); err != nil {
		t.Fatalf("%v (stderr %q)", err, stderr)
	}
	got, err := os.ReadFile(filepath.Join(dir, "ca-bundle.pem"))
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != testCA {
		t.Errorf("bundle %q, want the CA alone", got)
	}
}

// TestEgressWriteFailsClosed: a sentinel file that cannot be written (its
// parent is a file) ends the launcher with 125 before any program, with a
// line that names no sentinel.
func TestEgressWriteFailsClosed(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	blocker := filepath.Join(root, "file")
	if err := os.WriteFile(blocker, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	stderr, err := runEgressWrite(t, filepath.Join(root, ".gatekeeper"), "/nonexistent", &Egress{CA: []byte(testCA), Files: map[string]string{blocker + "/token": "gksentinel_x"}})
	var ee *exec.ExitError
	if err == nil || !errors.As(err, &ee) || ee.ExitCode() != 125 {
		t.Fatalf("err %v, want exit status 125", err)
	}
	if !strings.Contains(stderr, "gatekeeper: cannot write the egress proxy's files") || strings.Contains(stderr, "gksentinel_x") {
		t.Errorf("stderr %q", stderr)
	}
}

// TestEgressOptionsFollowTheSessionsAndPrecedeTheProgram: the launcher
// parses --session, then --egress and its two operands, then the
// program's env -i; a command without Egress has no --egress.
func TestEgressOptionsFollowTheSessionsAndPrecedeTheProgram(t *testing.T) {
	t.Parallel()
	env := []string{"PATH=/bin"}
	e := &Egress{CA: []byte(testCA), Files: map[string]string{"/tmp/b": "s2", "/tmp/a": "s1"}}
	egressOpts := []string{"--egress", testCA, "/tmp/a\ns1\n/tmp/b\ns2\n"}
	cases := []struct {
		name string
		argv []string
		opts []string
	}{
		{"a one-run sandbox", EgressCommand(time.Minute, time.Second, env, e), egressOpts},
		{"a session", SessionCommand(time.Minute, time.Second, time.Second, env, e), append([]string{"--session", SessionProgram()}, egressOpts...)},
		{"a session without egress", SessionCommand(time.Minute, time.Second, time.Second, env, nil), []string{"--session", SessionProgram()}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			i := slices.Index(tc.argv, "gatekeeper-launcher")
			j := slices.Index(tc.argv[i:], "/usr/bin/env")
			if i < 0 || j < 0 {
				t.Fatalf("no launcher in %q", tc.argv)
			}
			if got := tc.argv[i+1 : i+j]; !slices.Equal(got, tc.opts) {
				t.Errorf("launcher options %q, want %q", got, tc.opts)
			}
		})
	}
	if slices.Contains(Command(time.Minute, time.Second, env), "--egress") {
		t.Error("Command has --egress")
	}
}

// TestEgressEnvNamesTheFilesTheLauncherWrites pins the variables to the
// files egressWrite makes below EgressDir.
func TestEgressEnvNamesTheFilesTheLauncherWrites(t *testing.T) {
	t.Parallel()
	if CAFile != EgressDir+"/ca.pem" || CABundleFile != EgressDir+"/ca-bundle.pem" {
		t.Errorf("CAFile %s, CABundleFile %s: egressWrite writes $edir/ca.pem and $edir/ca-bundle.pem", CAFile, CABundleFile)
	}
	want := map[string]string{"SSL_CERT_FILE": CABundleFile, "REQUESTS_CA_BUNDLE": CABundleFile, "CURL_CA_BUNDLE": CABundleFile,
		"PIP_CERT": CABundleFile, "GIT_SSL_CAINFO": CABundleFile, "npm_config_cafile": CABundleFile, "NODE_EXTRA_CA_CERTS": CAFile}
	got := map[string]string{}
	for _, kv := range (&Egress{}).Env() {
		k, v, _ := strings.Cut(kv, "=")
		got[k] = v
	}
	if len(got) != len(want) {
		t.Errorf("env %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s=%q, want %q", k, got[k], v)
		}
	}
}
