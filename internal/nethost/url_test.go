package nethost

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/netip"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
)

// nodeURL is one line of testdata/whatwg/node.golden.json: what Node's
// new URL made of a URL (see node.mjs there).
type nodeURL struct {
	URL      string `json:"url"`
	OK       bool   `json:"ok"`
	Protocol string `json:"protocol"`
	Hostname string `json:"hostname"`
	Port     string `json:"port"`
	Username string `json:"username"`
	Password string `json:"password"`
	Fetch    *struct {
		Protocol string `json:"protocol"`
		Hostname string `json:"hostname"`
		Port     string `json:"port"`
	} `json:"fetch"`
}

// urlCase is one line of testdata/whatwg/urls.json. Stricter says why
// ParseURL refuses a URL that Node accepts; every other URL Node accepts
// must give Node's host and port.
type urlCase struct {
	URL      string `json:"url"`
	Stricter string `json:"stricter"`
}

func readJSON(t *testing.T, path string, v any) []byte {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return data
}

// nodeHost turns Node's hostname into Normalize's spelling of the same
// host: no brackets around IPv6, IPv4-mapped IPv6 as IPv4, no trailing dot.
// These change how a host is written, never which host it is.
func nodeHost(h string) string {
	if strings.HasPrefix(h, "[") {
		return netip.MustParseAddr(h[1 : len(h)-1]).Unmap().String()
	}
	return strings.TrimSuffix(h, ".")
}

// TestParseURLAgreesWithNode pins ParseURL to what Node's WHATWG URL parser
// (the one Claude Code's WebFetch uses) actually prints, for every URL in
// testdata/whatwg/urls.json: look-alike hosts, percent-encoding, IPv4 and
// IPv6 spellings, backslashes, user info, white space, ports, schemes.
// Where Node fails, ParseURL fails; where Node succeeds, ParseURL gives the
// same host and port, or fails for the reason the case states. node.mjs
// wrote the golden file; when node is installed the test runs it again and
// requires the same output (under CI=true node must be installed).
func TestParseURLAgreesWithNode(t *testing.T) {
	t.Parallel()
	var cases []urlCase
	readJSON(t, "testdata/whatwg/urls.json", &cases)
	var golden []nodeURL
	goldenData := readJSON(t, "testdata/whatwg/node.golden.json", &golden)
	if len(golden) != len(cases) {
		t.Fatalf("node.golden.json has %d cases, urls.json %d: regenerate it (see node.mjs)", len(golden), len(cases))
	}
	t.Run("the golden file is what node prints now", func(t *testing.T) {
		t.Parallel()
		node, err := exec.LookPath("node")
		if err != nil {
			if os.Getenv("CI") == "true" {
				t.Fatalf("node is not installed: %v", err)
			}
			t.Skipf("node is not installed (%v); CI=true makes this a failure", err)
		}
		out, err := exec.CommandContext(t.Context(), node, "testdata/whatwg/node.mjs").Output()
		if err != nil {
			t.Fatalf("node testdata/whatwg/node.mjs: %v", err)
		}
		if !bytes.Equal(out, goldenData) {
			t.Fatalf("node prints something else than testdata/whatwg/node.golden.json; regenerate it (see node.mjs) and review the difference")
		}
	})
	for i, c := range cases {
		n := golden[i]
		if n.URL != c.URL {
			t.Fatalf("case %d: golden URL %q, urls.json %q: regenerate the golden file", i, n.URL, c.URL)
		}
		t.Run(strconv.Quote(c.URL), func(t *testing.T) {
			t.Parallel()
			got, err := ParseURL(c.URL)
			web := n.OK && (n.Protocol == "http:" || n.Protocol == "https:")
			switch {
			case !web || c.Stricter != "":
				if err == nil {
					t.Fatalf("ParseURL = %+v; want an error (node: %+v; stricter: %q)", got, n, c.Stricter)
				}
				if !errors.Is(err, ErrBadURL) {
					t.Fatalf("ParseURL: %v does not wrap ErrBadURL", err)
				}
				if web == (c.Stricter == "") {
					t.Fatalf("node accepts it: %v; want a reason in \"stricter\" (or node refuses it and \"stricter\" is %q)", web, c.Stricter)
				}
				return
			case err != nil:
				t.Fatalf("ParseURL: %v; node reads host %q port %q", err, n.Hostname, n.Port)
			}
			if want := nodeHost(n.Hostname); got.Host != want {
				t.Errorf("host %q; node %q (%q)", got.Host, n.Hostname, want)
			}
			if want := strings.TrimSuffix(n.Protocol, ":"); got.Scheme != want {
				t.Errorf("scheme %q; node %q", got.Scheme, n.Protocol)
			}
			if got.Port != portOf(t, n.Port) {
				t.Errorf("port %d; node %q", got.Port, n.Port)
			}
			if (n.Username != "" || n.Password != "") && !got.Credentials {
				t.Errorf("no credentials; node reads user %q password %q", n.Username, n.Password)
			}
			f := got.Upgraded()
			if f.Scheme+":" != n.Fetch.Protocol || f.Host != nodeHost(n.Fetch.Hostname) || f.Port != portOf(t, n.Fetch.Port) {
				t.Errorf("upgraded to %+v; node fetches %+v", f, *n.Fetch)
			}
		})
	}
}

func portOf(t *testing.T, s string) uint16 {
	t.Helper()
	if s == "" {
		return 0
	}
	n, err := strconv.ParseUint(s, 10, 16)
	if err != nil {
		t.Fatalf("node port %q: %v", s, err)
	}
	return uint16(n)
}

func TestParseURLCredentials(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, url, host string
		credentials     bool
	}{
		{"no user info", "https://example.com/", "example.com", false},
		{"a user", "https://user@example.com/", "example.com", true},
		{"an empty user info", "https://@example.com/", "example.com", true},
		{"the last @ ends the user info", "https://allowed.com@evil.com/", "evil.com", true},
		{"an @ after a backslash is in the path", `https://allowed.com\@evil.com/`, "allowed.com", false},
		{"an @ after ? is in the query", "https://allowed.com?@evil.com/", "allowed.com", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			u, err := ParseURL(tt.url)
			if err != nil || u.Host != tt.host || u.Credentials != tt.credentials {
				t.Fatalf("ParseURL(%q) = %+v, %v; want host %q, credentials %v", tt.url, u, err, tt.host, tt.credentials)
			}
		})
	}
}

func TestEffectivePort(t *testing.T) {
	t.Parallel()
	tests := []struct {
		url  string
		want uint16
	}{
		{"https://example.com/", 443},
		{"http://example.com/", 80},
		{"https://example.com:8443/", 8443},
		{"http://example.com:443/", 443},
	}
	for _, tt := range tests {
		u, err := ParseURL(tt.url)
		if err != nil || u.EffectivePort() != tt.want {
			t.Errorf("ParseURL(%q).EffectivePort() = %d, %v; want %d", tt.url, u.EffectivePort(), err, tt.want)
		}
	}
}
