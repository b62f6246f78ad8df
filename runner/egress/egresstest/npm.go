package egresstest

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha1"
	"crypto/sha512"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"sync/atomic"
	"testing"
	"time"
)

// NPM is an npm registry holding one package at one version, its tarball
// built in memory, behind Auth (npm sends a .npmrc's
// "//<host>/:_authToken=<token>" as "Authorization: Bearer <token>" to
// that host, tarballs included). Serve it with TLSServer. Its routes:
//
//	/<Package>                      the packument (every version's metadata)
//	/<Package>/-/<Package>-<Version>.tgz   the tarball
//
// The packument's tarball URL names the host the request was sent to.
// Installed, require("<Package>")() returns Output, and node
// node_modules/<Package> prints it.
type NPM struct {
	Package, Version string
	// Tarball is the gzipped tar (package/package.json, package/index.js).
	Tarball []byte
	// Integrity is its "sha512-<base64>" and Shasum its hex SHA-1, as the
	// packument gives them.
	Integrity, Shasum string
	// Output is what the package's main function returns.
	Output string
	// Refused counts requests without the credential.
	Refused atomic.Int64

	h http.Handler
}

// NewNPM builds the tarball of pkg (lower-case letters and digits) at
// version and returns its registry behind auth.
func NewNPM(t testing.TB, auth Auth, pkg, version string) *NPM {
	t.Helper()
	if !projectName.MatchString(pkg) {
		t.Fatalf("egresstest: package name %q: want lower-case letters and digits", pkg)
	}
	n := &NPM{Package: pkg, Version: version, Output: fmt.Sprintf("%s %s from the egresstest registry", pkg, version)}
	manifest, err := json.Marshal(map[string]any{"name": pkg, "version": version, "main": "index.js", "license": "MIT"})
	if err != nil {
		t.Fatal(err)
	}
	index := fmt.Sprintf("const out = %q;\nmodule.exports = () => out;\nif (require.main === module) console.log(out);\n", n.Output)
	n.Tarball = BuildTarball(t, map[string]string{"package/package.json": string(manifest), "package/index.js": index})
	s512 := sha512.Sum512(n.Tarball)
	n.Integrity = "sha512-" + base64.StdEncoding.EncodeToString(s512[:])
	s1 := sha1.Sum(n.Tarball)
	n.Shasum = hex.EncodeToString(s1[:])

	file := fmt.Sprintf("%s-%s.tgz", pkg, version)
	mux := http.NewServeMux()
	mux.HandleFunc("GET /"+pkg, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{
			"name":      pkg,
			"dist-tags": map[string]string{"latest": version},
			"versions": map[string]any{version: map[string]any{
				"name": pkg, "version": version, "main": "index.js", "license": "MIT",
				"dist": map[string]string{
					"tarball":   fmt.Sprintf("https://%s/%s/-/%s", r.Host, pkg, file),
					"integrity": n.Integrity,
					"shasum":    n.Shasum,
				},
			}},
		})
	})
	mux.HandleFunc("GET /"+pkg+"/-/"+file, func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Write(n.Tarball)
	})
	n.h = auth.Wrap(mux, &n.Refused)
	return n
}

// ServeHTTP serves the registry.
func (n *NPM) ServeHTTP(w http.ResponseWriter, r *http.Request) { n.h.ServeHTTP(w, r) }

// BuildTarball returns a gzipped tar of files (path → content), regular
// files of mode 0644, in path order.
func BuildTarball(t testing.TB, files map[string]string) []byte {
	t.Helper()
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	for _, name := range sortedKeys(files) {
		body := files[name]
		hdr := &tar.Header{Name: name, Mode: 0o644, Size: int64(len(body)), ModTime: time.Unix(1700000000, 0), Typeflag: tar.TypeReg}
		if err := tw.WriteHeader(hdr); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write([]byte(body)); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := gz.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
