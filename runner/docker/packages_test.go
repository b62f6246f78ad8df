package docker

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/gatekeeper-ai/gatekeeper/runner"
	"github.com/gatekeeper-ai/gatekeeper/runner/egress"
	"github.com/gatekeeper-ai/gatekeeper/runner/egress/egresstest"
	"github.com/gatekeeper-ai/gatekeeper/runner/runnertest"
	"github.com/gatekeeper-ai/gatekeeper/runner/workspace"
)

// These tests install packages inside the sandbox through the egress
// proxy, into the query's workspace, and use them in the next run: npm
// from the registry this machine's npm uses (the one registry the machine
// reaches), pip from an index the test serves on this host. Neither host
// is written in gatekeeper's code: the policy names them.

// packageRunner is a Runner with an egress proxy resolving names with the
// host's own resolver (the registry is a real name).
func packageRunner(t *testing.T) *Runner {
	t.Helper()
	p, err := egress.New(egress.Config{Auditor: &egresstest.Recorder{}})
	if err != nil {
		t.Fatal(err)
	}
	r := newTestRunner(t)
	r.pf.cfg.Egress = p
	return r
}

// inWorkspace runs spec's code in ws under image with network policy net,
// and fails t on an error.
func inWorkspace(t *testing.T, r *Runner, ws runner.Workspace, image string, lang runner.Language, net runner.Network, code string, files map[string]string) runner.Result {
	t.Helper()
	spec := runnertest.Spec(code)
	spec.Language = lang
	spec.Sandbox.Image = image
	spec.Sandbox.Network = net
	spec.Sandbox.MemoryBytes = 512 << 20
	spec.Sandbox.WorkspaceBytes = 64 << 20
	spec.Timeout = 120 * time.Second
	spec.Workspace = ws
	spec.Files = files
	res, err := r.Run(t.Context(), spec)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// npmRegistry is the registry this machine's npm uses, the patterns that
// allow it (its host, and each address it resolves to, since a proxying
// mirror may resolve to a reserved address the proxy refuses unless it is
// listed), and the CA file npm trusts when the machine's egress intercepts
// TLS ("" when npm sets none).
func npmRegistry(t *testing.T) (host string, allow []string, caFile string) {
	t.Helper()
	out, err := exec.CommandContext(t.Context(), "npm", "config", "get", "registry").Output()
	if err != nil {
		t.Fatalf("npm config get registry (npm is part of make test's toolchain): %v", err)
	}
	u, err := url.Parse(strings.TrimSpace(string(out)))
	if err != nil || u.Hostname() == "" {
		t.Fatalf("npm's registry %q is not a URL: %v", out, err)
	}
	host = u.Hostname()
	port := u.Port()
	if port == "" {
		port = "443"
	}
	allow = []string{net.JoinHostPort(host, port)}
	addrs, err := net.DefaultResolver.LookupNetIP(t.Context(), "ip4", host)
	if err != nil {
		t.Fatalf("resolve npm's registry %s: %v", host, err)
	}
	for _, a := range addrs {
		allow = append(allow, net.JoinHostPort(a.String(), port))
	}
	if out, err := exec.CommandContext(t.Context(), "npm", "config", "get", "cafile").Output(); err == nil {
		if f := strings.TrimSpace(string(out)); f != "" && f != "null" && f != "undefined" {
			caFile = f
		}
	}
	return host, allow, caFile
}

func TestNpmInstallThroughTheAllowlist(t *testing.T) {
	t.Parallel()
	requireRuntime(t, runner.Runc)
	image := profileImages["node"]
	host, allow, caFile := npmRegistry(t)
	files := map[string]string{}
	cafile := ""
	if caFile != "" {
		ca, err := os.ReadFile(caFile)
		if err != nil {
			t.Fatal(err)
		}
		files["ca.pem"] = string(ca)
		cafile = " --cafile=/workspace/ca.pem"
	}
	install := "npm install --no-audit --no-fund" + cafile + " left-pad@1.3.0"
	r := packageRunner(t)
	store, err := workspace.OpenStore(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}

	t.Run("with the registry allowed, npm installs into the workspace and the next run requires it", func(t *testing.T) {
		ws, _ := store.Workspace("allowed")
		res := inWorkspace(t, r, ws, image, runner.Shell, runner.Network{Enabled: true, Allow: allow}, install, files)
		if res.ExitCode != 0 || res.Workspace != runner.WorkspaceSaved {
			t.Fatalf("npm install: exit %d, workspace %q %s\nstdout %s\nstderr %s", res.ExitCode, res.Workspace, res.WorkspaceNote, res.Stdout, res.Stderr)
		}
		res = inWorkspace(t, r, ws, image, runner.Node, runner.Network{}, `console.log(require("left-pad")("7", 3, "0"))`, nil)
		if res.ExitCode != 0 || res.Stdout != "007\n" {
			t.Errorf("require in the next run (no network): exit %d stdout %q stderr %q", res.ExitCode, res.Stdout, res.Stderr)
		}
	})
	t.Run("without the registry in net.allow, npm fails with the proxy's rule", func(t *testing.T) {
		ws, _ := store.Workspace("refused")
		res := inWorkspace(t, r, ws, image, runner.Shell, runner.Network{Enabled: true, Allow: []string{"example.org"}}, install, files)
		if res.Reason != runner.Exited || res.ExitCode == 0 || !strings.Contains(res.Stderr, "egress.not_allowlisted") || !strings.Contains(res.Stderr, host) {
			t.Errorf("npm install without the registry: %s %d, stderr %q; want a prompt failure naming %s and egress.not_allowlisted", res.Reason, res.ExitCode, res.Stderr, host)
		}
	})
}

// testIndex serves a PEP 503 simple index over HTTPS on 0.0.0.0 (the
// sandbox reaches it only through the proxy, at 127.0.0.1), holding one
// pure-Python wheel, gkdemo 1.0, that the test builds. It returns the
// index's port and the PEM of its self-signed certificate.
func testIndex(t *testing.T) (port int, caPEM string) {
	t.Helper()
	wheel := egresstest.BuildWheel(t, "gkdemo", "1.0", map[string]string{"__init__.py": "VALUE = 'from the test index'\n"})
	sum := sha256.Sum256(wheel)
	name := "gkdemo-1.0-py3-none-any.whl"
	mux := http.NewServeMux()
	mux.HandleFunc("/simple/gkdemo/", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintf(w, `<!DOCTYPE html><html><body><a href="../../files/%s#sha256=%s">%s</a></body></html>`, name, hex.EncodeToString(sum[:]), name)
	})
	mux.HandleFunc("/files/"+name, func(w http.ResponseWriter, _ *http.Request) { w.Write(wheel) })
	cert, caPEM := ipCert(t)
	ln, err := net.Listen("tcp4", "0.0.0.0:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second, TLSConfig: &tls.Config{Certificates: []tls.Certificate{cert}}}
	go srv.ServeTLS(ln, "", "")
	t.Cleanup(func() { srv.Close() })
	return ln.Addr().(*net.TCPAddr).Port, caPEM
}

// ipCert is a self-signed certificate for 127.0.0.1.
func ipCert(t *testing.T) (tls.Certificate, string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "gatekeeper test index"},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		NotBefore:   time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true, IsCA: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
}

func TestPipInstallThroughTheAllowlist(t *testing.T) {
	t.Parallel()
	requireRuntime(t, runner.Runc)
	image := profileImages["python"]
	port, caPEM := testIndex(t)
	index := fmt.Sprintf("https://127.0.0.1:%d/simple/", port)
	install := "pip install --index-url " + index + " --cert /workspace/ca.pem gkdemo"
	files := map[string]string{"ca.pem": caPEM}
	r := packageRunner(t)
	store, err := workspace.OpenStore(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}

	t.Run("with the index allowed by address, pip installs into the workspace and the next run imports it", func(t *testing.T) {
		ws, _ := store.Workspace("allowed")
		// A loopback address is reached only when the literal is listed.
		res := inWorkspace(t, r, ws, image, runner.Shell, runner.Network{Enabled: true, Allow: []string{fmt.Sprintf("127.0.0.1:%d", port)}}, install, files)
		if res.ExitCode != 0 || res.Workspace != runner.WorkspaceSaved || !strings.Contains(res.Stdout, "Successfully installed gkdemo-1.0") {
			t.Fatalf("pip install: exit %d, workspace %q %s\nstdout %s\nstderr %s", res.ExitCode, res.Workspace, res.WorkspaceNote, res.Stdout, res.Stderr)
		}
		res = inWorkspace(t, r, ws, image, runner.Python, runner.Network{}, "import gkdemo\nprint(gkdemo.VALUE, gkdemo.__file__)", nil)
		if want := "from the test index /workspace/.local/lib/"; res.ExitCode != 0 || !strings.HasPrefix(res.Stdout, want) {
			t.Errorf("import in the next run (no network): exit %d stdout %q stderr %q; want it from the user site in the workspace (%s…)", res.ExitCode, res.Stdout, res.Stderr, want)
		}
	})
	t.Run("without the index in net.allow, pip fails with the proxy's rule", func(t *testing.T) {
		ws, _ := store.Workspace("refused")
		res := inWorkspace(t, r, ws, image, runner.Shell, runner.Network{Enabled: true, Allow: []string{"example.org"}}, install, files)
		if res.Reason != runner.Exited || res.ExitCode == 0 || !strings.Contains(res.Stderr, "egress.not_allowlisted") {
			t.Errorf("pip install without the index: %s %d, stderr %q; want a failure naming egress.not_allowlisted", res.Reason, res.ExitCode, res.Stderr)
		}
	})
}
