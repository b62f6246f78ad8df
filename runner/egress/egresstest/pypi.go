package egresstest

import (
	"archive/zip"
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"html"
	"net/http"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
)

// PyPI is a PEP 503 "simple" package index holding one pure-Python wheel
// built in memory, behind Auth. Serve it with TLSServer and point pip at
// https://<name>/simple/ (pip sends a URL's user and password as Basic
// auth). Its routes:
//
//	/simple/                  the project list
//	/simple/<Package>/        a link to the wheel, with its sha256
//	/files/<WheelName>        the wheel
//
// Installed, the package imports, and "python -m <Package>" prints Output.
type PyPI struct {
	Package, Version string
	// WheelName is the wheel's file name, Wheel its bytes and SHA256 their
	// hex digest.
	WheelName string
	Wheel     []byte
	SHA256    string
	// Output is the line "python -m <Package>" prints (without newline);
	// the module's VALUE holds it too.
	Output string
	// Refused counts requests without the credential.
	Refused atomic.Int64

	h http.Handler
}

var projectName = regexp.MustCompile(`^[a-z][a-z0-9]*$`)

// NewPyPI builds the wheel of pkg (lower-case letters and digits) at
// version and returns its index behind auth.
func NewPyPI(t testing.TB, auth Auth, pkg, version string) *PyPI {
	t.Helper()
	if !projectName.MatchString(pkg) {
		t.Fatalf("egresstest: package name %q: want lower-case letters and digits", pkg)
	}
	p := &PyPI{Package: pkg, Version: version, Output: fmt.Sprintf("%s %s from the egresstest index", pkg, version)}
	p.WheelName = fmt.Sprintf("%s-%s-py3-none-any.whl", pkg, version)
	p.Wheel = BuildWheel(t, pkg, version, map[string]string{
		"__init__.py": fmt.Sprintf("VALUE = %q\n", p.Output),
		"__main__.py": fmt.Sprintf("from %s import VALUE\nprint(VALUE)\n", pkg),
	})
	sum := sha256.Sum256(p.Wheel)
	p.SHA256 = hex.EncodeToString(sum[:])

	mux := http.NewServeMux()
	mux.HandleFunc("GET /simple/{$}", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprintf(w, "<!DOCTYPE html><html><body><a href=\"%s/\">%s</a></body></html>\n", pkg, pkg)
	})
	mux.HandleFunc("GET /simple/"+pkg+"/{$}", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprintf(w, "<!DOCTYPE html><html><body><a href=\"../../files/%s#sha256=%s\">%s</a></body></html>\n",
			html.EscapeString(p.WheelName), p.SHA256, html.EscapeString(p.WheelName))
	})
	mux.HandleFunc("GET /files/"+p.WheelName, func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Write(p.Wheel)
	})
	p.h = auth.Wrap(mux, &p.Refused)
	return p
}

// ServeHTTP serves the index.
func (p *PyPI) ServeHTTP(w http.ResponseWriter, r *http.Request) { p.h.ServeHTTP(w, r) }

// BuildWheel makes a pure-Python wheel (PEP 427) of package pkg at version
// whose modules are files (a name below the package → its source), as
// setuptools would: the modules, then the dist-info's METADATA, WHEEL and
// RECORD (every file's sha256 and size).
func BuildWheel(t testing.TB, pkg, version string, files map[string]string) []byte {
	t.Helper()
	info := pkg + "-" + version + ".dist-info/"
	type file struct{ path, body string }
	var all []file
	for _, name := range sortedKeys(files) {
		all = append(all, file{pkg + "/" + name, files[name]})
	}
	all = append(all,
		file{info + "METADATA", "Metadata-Version: 2.1\nName: " + pkg + "\nVersion: " + version + "\n"},
		file{info + "WHEEL", "Wheel-Version: 1.0\nGenerator: gatekeeper-egresstest\nRoot-Is-Purelib: true\nTag: py3-none-any\n"},
	)
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	var record strings.Builder
	for _, f := range all {
		w, err := zw.Create(f.path)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Write([]byte(f.body)); err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256([]byte(f.body))
		fmt.Fprintf(&record, "%s,sha256=%s,%d\n", f.path, base64.RawURLEncoding.EncodeToString(sum[:]), len(f.body))
	}
	record.WriteString(info + "RECORD,,\n")
	w, err := zw.Create(info + "RECORD")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write([]byte(record.String())); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}
