package egresstest_test

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"compress/gzip"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha512"
	"crypto/tls"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gatekeeper-ai/gatekeeper/runner/egress/egresstest"
)

// get sends a request with c and returns the status and body; auth, if
// not empty, is the Authorization header.
func get(t *testing.T, c *http.Client, method, url, auth string, body io.Reader) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, url, body)
	if err != nil {
		t.Fatal(err)
	}
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, b
}

func basic(user, pass string) string {
	return "Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"+pass))
}

func TestTLSServerEchoesWhatItReceived(t *testing.T) {
	t.Parallel()
	echo := &egresstest.Echo{}
	srv := egresstest.TLSServer(t, echo, "echo.test")
	url := fmt.Sprintf("https://echo.test:%d/a/b%%2Fc?x=1&y=two", srv.Port)

	t.Run("a client trusting the test CA talks HTTP/2 and reads its request back", func(t *testing.T) {
		resp, b := get(t, egresstest.TestCA().Client(), "POST", url, "Bearer abc", strings.NewReader("the body"))
		if resp.StatusCode != 200 || resp.Proto != "HTTP/2.0" {
			t.Fatalf("status %d proto %s: %s", resp.StatusCode, resp.Proto, b)
		}
		var got egresstest.EchoRequest
		if err := json.Unmarshal(b, &got); err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256([]byte("the body"))
		if got.Method != "POST" || got.Path != "/a/b%2Fc" || got.Query != "x=1&y=two" || got.Host != fmt.Sprintf("echo.test:%d", srv.Port) ||
			got.Headers["Authorization"][0] != "Bearer abc" || got.Body != "the body" || got.BodyBytes != 8 || got.BodySHA256 != hex.EncodeToString(sum[:]) {
			t.Errorf("echo %+v", got)
		}
		seen := echo.Requests()
		if len(seen) != 1 || seen[0].Headers["Authorization"][0] != "Bearer abc" {
			t.Errorf("the echo recorded %+v, want the one request", seen)
		}
	})
	t.Run("a body past EchoBodyMax is echoed cut, with its whole size and digest", func(t *testing.T) {
		big := bytes.Repeat([]byte("0123456789abcdef"), (egresstest.EchoBodyMax+4096)/16)
		_, b := get(t, egresstest.TestCA().Client(), "PUT", url, "", bytes.NewReader(big))
		var got egresstest.EchoRequest
		if err := json.Unmarshal(b, &got); err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(big)
		if len(got.Body) != egresstest.EchoBodyMax || got.BodyBytes != int64(len(big)) || got.BodySHA256 != hex.EncodeToString(sum[:]) {
			t.Errorf("echo of %d bytes: body %d bytes, body_bytes %d, sha %s", len(big), len(got.Body), got.BodyBytes, got.BodySHA256)
		}
	})
	t.Run("a client trusting another CA refuses the server", func(t *testing.T) {
		forged := egresstest.NewCA(t, "not the test CA")
		_, err := forged.Client().Get(url)
		if err == nil || !strings.Contains(err.Error(), "certificate signed by unknown authority") {
			t.Errorf("GET with another CA's pool: %v, want an unknown authority", err)
		}
	})
	t.Run("a server of another CA is not trusted through the test CA", func(t *testing.T) {
		forged := egresstest.NewCA(t, "forger")
		fsrv := forged.Serve(t, echo, "echo.test")
		_, err := egresstest.TestCA().Client().Get(fmt.Sprintf("https://echo.test:%d/", fsrv.Port))
		if err == nil || !strings.Contains(err.Error(), "certificate signed by unknown authority") {
			t.Errorf("GET of a forged server: %v, want an unknown authority", err)
		}
	})
	t.Run("a leaf for an IP literal verifies by address, and only for its names", func(t *testing.T) {
		ipsrv := egresstest.TLSServer(t, echo, "127.0.0.1")
		if resp, b := get(t, egresstest.TestCA().Client(), "GET", "https://"+ipsrv.Addr()+"/", "", nil); resp.StatusCode != 200 {
			t.Errorf("GET by address: %d %s", resp.StatusCode, b)
		}
		_, err := egresstest.TestCA().Client().Get(fmt.Sprintf("https://other.test:%d/", srv.Port))
		if err == nil || !strings.Contains(err.Error(), "not echo.test") && !strings.Contains(err.Error(), "valid for echo.test") {
			t.Errorf("GET under another name: %v, want a name mismatch", err)
		}
	})
}

func TestPyPIServesItsWheelToItsCredentialOnly(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name      string
		auth      egresstest.Auth
		good, bad string
		challenge string
	}{
		{"basic auth", egresstest.Auth{User: "ci", Password: "s3cret"}, basic("ci", "s3cret"), basic("ci", "wrong"), "Basic"},
		{"a bearer token", egresstest.Auth{Bearer: "tok"}, "Bearer tok", "Bearer other", "Bearer"},
	} {
		t.Run("with "+tt.name, func(t *testing.T) {
			t.Parallel()
			idx := egresstest.NewPyPI(t, tt.auth, "gkdemo", "1.0")
			srv := egresstest.TLSServer(t, idx, "pypi.test")
			c := egresstest.TestCA().Client()
			base := fmt.Sprintf("https://pypi.test:%d", srv.Port)
			for _, auth := range []string{"", tt.bad} {
				resp, _ := get(t, c, "GET", base+"/simple/gkdemo/", auth, nil)
				if resp.StatusCode != 401 || !strings.HasPrefix(resp.Header.Get("WWW-Authenticate"), tt.challenge) {
					t.Errorf("credential %q: %d %q, want 401 with a %s challenge", auth, resp.StatusCode, resp.Header.Get("WWW-Authenticate"), tt.challenge)
				}
			}
			if n := idx.Refused.Load(); n != 2 {
				t.Errorf("Refused = %d, want 2", n)
			}
			resp, page := get(t, c, "GET", base+"/simple/gkdemo/", tt.good, nil)
			link := fmt.Sprintf(`href="../../files/%s#sha256=%s"`, idx.WheelName, idx.SHA256)
			if resp.StatusCode != 200 || !strings.Contains(string(page), link) {
				t.Fatalf("project page: %d %s, want a link %s", resp.StatusCode, page, link)
			}
			if _, root := get(t, c, "GET", base+"/simple/", tt.good, nil); !strings.Contains(string(root), `href="gkdemo/"`) {
				t.Errorf("root page %s lists no gkdemo", root)
			}
			resp, wheel := get(t, c, "GET", base+"/files/"+idx.WheelName, tt.good, nil)
			sum := sha256.Sum256(wheel)
			if resp.StatusCode != 200 || hex.EncodeToString(sum[:]) != idx.SHA256 {
				t.Fatalf("wheel: %d, sha256 %x, want %s", resp.StatusCode, sum, idx.SHA256)
			}
			checkWheel(t, wheel, idx)
		})
	}
}

// checkWheel opens the wheel and checks its files and RECORD.
func checkWheel(t *testing.T, wheel []byte, idx *egresstest.PyPI) {
	t.Helper()
	zr, err := zip.NewReader(bytes.NewReader(wheel), int64(len(wheel)))
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]string{}
	for _, f := range zr.File {
		rc, err := f.Open()
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(rc)
		rc.Close()
		files[f.Name] = string(b)
	}
	info := "gkdemo-1.0.dist-info/"
	if !strings.Contains(files["gkdemo/__init__.py"], idx.Output) || !strings.Contains(files["gkdemo/__main__.py"], "print(VALUE)") ||
		!strings.Contains(files[info+"METADATA"], "Name: gkdemo\nVersion: 1.0\n") || !strings.Contains(files[info+"WHEEL"], "Tag: py3-none-any") {
		t.Errorf("wheel files %v", files)
	}
	for line := range strings.Lines(files[info+"RECORD"]) {
		parts := strings.Split(strings.TrimSpace(line), ",")
		if parts[0] == info+"RECORD" {
			continue
		}
		sum := sha256.Sum256([]byte(files[parts[0]]))
		if want := "sha256=" + base64.RawURLEncoding.EncodeToString(sum[:]); parts[1] != want || parts[2] != fmt.Sprint(len(files[parts[0]])) {
			t.Errorf("RECORD line %q, want %s,%d", line, want, len(files[parts[0]]))
		}
	}
	if n := len(strings.Split(strings.TrimSpace(files[info+"RECORD"]), "\n")); n != len(files) {
		t.Errorf("RECORD has %d lines for %d files", n, len(files))
	}
}

func TestNPMServesItsPackageToItsTokenOnly(t *testing.T) {
	t.Parallel()
	reg := egresstest.NewNPM(t, egresstest.Auth{Bearer: "npm-token"}, "gkdemo", "1.2.3")
	srv := egresstest.TLSServer(t, reg, "npm.test")
	c := egresstest.TestCA().Client()
	base := fmt.Sprintf("https://npm.test:%d", srv.Port)
	for _, auth := range []string{"", "Bearer wrong", basic("npm-token", "")} {
		if resp, _ := get(t, c, "GET", base+"/gkdemo", auth, nil); resp.StatusCode != 401 {
			t.Errorf("credential %q: %d, want 401", auth, resp.StatusCode)
		}
	}
	resp, b := get(t, c, "GET", base+"/gkdemo", "Bearer npm-token", nil)
	var doc struct {
		Name     string            `json:"name"`
		DistTags map[string]string `json:"dist-tags"`
		Versions map[string]struct {
			Dist struct{ Tarball, Integrity, Shasum string }
		}
	}
	if err := json.Unmarshal(b, &doc); err != nil || resp.StatusCode != 200 {
		t.Fatalf("packument: %d %s (%v)", resp.StatusCode, b, err)
	}
	v := doc.Versions["1.2.3"].Dist
	if doc.Name != "gkdemo" || doc.DistTags["latest"] != "1.2.3" || v.Tarball != base+"/gkdemo/-/gkdemo-1.2.3.tgz" {
		t.Fatalf("packument %s", b)
	}
	resp, tgz := get(t, c, "GET", v.Tarball, "Bearer npm-token", nil)
	s512, s1 := sha512.Sum512(tgz), sha1.Sum(tgz)
	if resp.StatusCode != 200 || v.Integrity != "sha512-"+base64.StdEncoding.EncodeToString(s512[:]) || v.Shasum != hex.EncodeToString(s1[:]) {
		t.Fatalf("tarball: %d, integrity %s shasum %s do not match it", resp.StatusCode, v.Integrity, v.Shasum)
	}
	gz, err := gzip.NewReader(bytes.NewReader(tgz))
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(gz)
	files := map[string]string{}
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(tr)
		files[h.Name] = string(b)
	}
	var manifest map[string]string
	if err := json.Unmarshal([]byte(files["package/package.json"]), &manifest); err != nil || manifest["name"] != "gkdemo" || manifest["version"] != "1.2.3" || manifest["main"] != "index.js" {
		t.Errorf("package.json %q (%v)", files["package/package.json"], err)
	}
	if !strings.Contains(files["package/index.js"], fmt.Sprintf("%q", reg.Output)) || len(files) != 2 {
		t.Errorf("tarball files %v", files)
	}
	if n := reg.Refused.Load(); n != 3 {
		t.Errorf("Refused = %d, want 3", n)
	}
}

func TestGitRepoClonesWithItsCredentialOnly(t *testing.T) {
	t.Parallel()
	files := map[string]string{"README": "hello from the egresstest repository\n", "src/main.py": "print('cloned')\n"}
	repo := egresstest.NewGitRepo(t, egresstest.Auth{User: "x-access-token", Password: "git-token"}, "demo", files)
	srv := egresstest.TLSServer(t, repo, "127.0.0.1")
	c := egresstest.TestCA().Client()
	refs := "https://" + srv.Addr() + "/demo.git/info/refs?service=git-upload-pack"

	t.Run("the smart HTTP advertisement names the commit, with the credential only", func(t *testing.T) {
		if resp, _ := get(t, c, "GET", refs, "", nil); resp.StatusCode != 401 || resp.Header.Get("WWW-Authenticate") != `Basic realm="egresstest"` {
			t.Errorf("without credentials: %d %q, want 401 with a Basic challenge", resp.StatusCode, resp.Header.Get("WWW-Authenticate"))
		}
		resp, b := get(t, c, "GET", refs, basic("x-access-token", "git-token"), nil)
		if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/x-git-upload-pack-advertisement" || !strings.Contains(string(b), repo.Commit+" refs/heads/main") {
			t.Errorf("advertisement: %d %q %q, want commit %s on main", resp.StatusCode, resp.Header.Get("Content-Type"), b, repo.Commit)
		}
	})
	t.Run("git clones it over HTTPS with the token in the URL, and not without", func(t *testing.T) {
		dir := t.TempDir()
		ca := filepath.Join(dir, "ca.pem")
		if err := os.WriteFile(ca, egresstest.TestCA().PEM, 0o600); err != nil {
			t.Fatal(err)
		}
		clone := func(url, into string) ([]byte, error) {
			cmd := exec.CommandContext(t.Context(), "git", "clone", "-q", url, into)
			cmd.Env = append(os.Environ(), "GIT_SSL_CAINFO="+ca, "GIT_TERMINAL_PROMPT=0", "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null", "HOME="+dir)
			return cmd.CombinedOutput()
		}
		if out, err := clone("https://x-access-token:git-token@"+srv.Addr()+"/demo.git", filepath.Join(dir, "ok")); err != nil {
			t.Fatalf("git clone: %v\n%s", err, out)
		}
		for p, want := range files {
			if b, err := os.ReadFile(filepath.Join(dir, "ok", p)); err != nil || string(b) != want {
				t.Errorf("cloned %s = %q, %v; want %q", p, b, err, want)
			}
		}
		out, err := clone("https://x-access-token:wrong@"+srv.Addr()+"/demo.git", filepath.Join(dir, "bad"))
		if err == nil || !strings.Contains(string(out), "Authentication failed") {
			t.Errorf("git clone with a wrong token: %v\n%s; want an authentication failure", err, out)
		}
	})
}

// TestTLSServerSpeaksHTTP1 pins that a client offering only http/1.1 is
// served too (curl --http1.1, Python's http.client).
func TestTLSServerSpeaksHTTP1(t *testing.T) {
	t.Parallel()
	srv := egresstest.TLSServer(t, &egresstest.Echo{}, "echo.test")
	conn, err := tls.Dial("tcp", srv.Addr(), &tls.Config{RootCAs: egresstest.TestCA().Pool(), ServerName: "echo.test", NextProtos: []string{"http/1.1"}})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "GET /one HTTP/1.1\r\nHost: echo.test\r\nConnection: close\r\n\r\n")
	b, _ := io.ReadAll(conn)
	if !strings.HasPrefix(string(b), "HTTP/1.1 200 ") || !strings.Contains(string(b), `"path":"/one"`) || !strings.Contains(string(b), `"proto":"HTTP/1.1"`) {
		t.Errorf("HTTP/1.1 reply %q", b)
	}
}
