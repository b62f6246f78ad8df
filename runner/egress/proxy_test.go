package egress

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"reflect"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/gatekeeper-ai/gatekeeper/internal/nethost"
	"github.com/gatekeeper-ai/gatekeeper/runner"
)

func TestProxyForwardsAllowlistedRequests(t *testing.T) {
	t.Parallel()
	httpPort := startHTTP(t)
	httpsPort, roots := startHTTPS(t)
	h := startProxy(t, Config{})
	h.register(t, []string{"allowed.test", hp("127.0.0.1", httpPort), hp("127.0.0.1", httpsPort)}, nil)

	tests := []struct {
		name     string
		method   string
		url      string
		body     string
		want     string
		wantHost string
		wantPort uint16
	}{
		{"plain HTTP to an allowlisted name", http.MethodGet, fmt.Sprintf("http://allowed.test:%d/", httpPort), "",
			fmt.Sprintf("upstream ok host=allowed.test:%d", httpPort), "allowed.test", httpPort},
		{"plain HTTP with a request body", http.MethodPost, fmt.Sprintf("http://allowed.test:%d/echo", httpPort), "posted body",
			"posted body", "allowed.test", httpPort},
		{"HTTPS through CONNECT to an allowlisted name", http.MethodGet, fmt.Sprintf("https://allowed.test:%d/", httpsPort), "",
			fmt.Sprintf("upstream ok host=allowed.test:%d", httpsPort), "allowed.test", httpsPort},
		{"HTTPS through CONNECT with a request body", http.MethodPost, fmt.Sprintf("https://allowed.test:%d/echo", httpsPort), "secret body",
			"secret body", "allowed.test", httpsPort},
		{"plain HTTP to the allowlisted address", http.MethodGet, fmt.Sprintf("http://127.0.0.1:%d/", httpPort), "",
			fmt.Sprintf("upstream ok host=127.0.0.1:%d", httpPort), "127.0.0.1", httpPort},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			req, err := http.NewRequestWithContext(t.Context(), tt.method, tt.url, strings.NewReader(tt.body))
			if err != nil {
				t.Fatalf("NewRequest: %v", err)
			}
			c := h.client(t, roots)
			resp, err := c.Do(req)
			if err != nil {
				t.Fatalf("%s %s: %v", tt.method, tt.url, err)
			}
			body, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			c.CloseIdleConnections() // a tunnel is audited when it ends
			if err != nil || resp.StatusCode != http.StatusOK || string(body) != tt.want {
				t.Fatalf("%s %s = %q, %q, %v; want 200 %q", tt.method, tt.url, resp.Status, body, err, tt.want)
			}
			h.audit.await(t, "for "+tt.url, func(ev Event) bool {
				return ev.Decision == Allow && ev.Host == tt.wantHost && ev.Port == tt.wantPort &&
					ev.BytesUp > int64(len(tt.body)) && ev.BytesDown > int64(len(tt.want))
			})
		})
	}
}

func TestProxyRefusesEverySpellingOfAnUnlistedHost(t *testing.T) {
	t.Parallel()
	port := startHTTP(t)
	h := startProxy(t, Config{})
	h.register(t, []string{"allowed.test"}, nil)
	spellings := []string{
		"127.0.0.1", "127.0.0.1.", "127.1", "127.0.1", "0x7f.0.0.1", "0x7F.0x0.0x0.0x1", "0177.0.0.1",
		"2130706433", "0x7f000001", "017700000001", "[::ffff:127.0.0.1]", "[::ffff:7f00:1]", "[::1]",
		"other.test", "OTHER.TEST.", "allowed.test.evil.test",
	}
	for _, s := range spellings {
		hostport := fmt.Sprintf("%s:%d", s, port)
		t.Run("GET "+hostport, func(t *testing.T) {
			t.Parallel()
			resp, body := h.raw(t, http.MethodGet, "http://"+hostport+"/")
			wantRefusal(t, "GET "+hostport, resp, body, http.StatusForbidden, RuleNotAllowlisted)
		})
		t.Run("CONNECT "+hostport, func(t *testing.T) {
			t.Parallel()
			resp, body := h.raw(t, http.MethodConnect, hostport)
			wantRefusal(t, "CONNECT "+hostport, resp, body, http.StatusForbidden, RuleNotAllowlisted)
		})
	}
}

func TestProxyLetsDenyBeatAllow(t *testing.T) {
	t.Parallel()
	port := startHTTP(t)
	h := startProxy(t, Config{})
	h.register(t,
		[]string{"*.example.com", "allowed.test", "other.test", hp("127.0.0.1", port)},
		[]string{"bad.example.com", "0x7f.1", "other.test"})
	tests := []struct {
		name string
		host string
	}{
		{"a denied name", "bad.example.com"},
		{"a denied name in upper case", "BAD.Example.Com."},
		{"an allowed name resolving to a denied address", "good.example.com"},
		{"the denied address", "127.0.0.1"},
		{"the denied address as an integer", "2130706433"},
		{"the denied address as mapped IPv6", "[::ffff:127.0.0.1]"},
		{"a name denied among allowed wildcards", "other.test"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			hostport := fmt.Sprintf("%s:%d", tt.host, port)
			resp, body := h.raw(t, http.MethodGet, "http://"+hostport+"/")
			wantRefusal(t, "GET "+hostport, resp, body, http.StatusForbidden, RuleDenylisted)
			resp, body = h.raw(t, http.MethodConnect, hostport)
			wantRefusal(t, "CONNECT "+hostport, resp, body, http.StatusForbidden, RuleDenylisted)
		})
	}
}

func TestProxyRefusesMetadataAndVendorHostsEvenWhenAllowlisted(t *testing.T) {
	t.Parallel()
	h := startProxy(t, Config{})
	h.register(t, []string{
		"169.254.169.254", "100.100.100.200", "fd00:ec2::254", "metadata.google.internal", "metadata",
		"api.anthropic.com", "api.openai.com", "*.openai.azure.com", "*.amazonaws.com", "generativelanguage.googleapis.com",
		"openrouter.ai", "api.x.ai",
	}, nil)
	tests := []struct {
		name, hostport, rule string
	}{
		{"the metadata address", "169.254.169.254:80", RuleMetadata},
		{"the metadata address as hex", "0xa9fea9fe:80", RuleMetadata},
		{"the metadata address as an integer", "2852039166:80", RuleMetadata},
		{"the metadata address in octal", "0251.0376.0251.0376:80", RuleMetadata},
		{"the metadata address in two parts", "169.254.43518:80", RuleMetadata},
		{"the metadata address as mapped IPv6", "[::ffff:169.254.169.254]:80", RuleMetadata},
		{"the metadata address as mapped hex IPv6", "[::ffff:a9fe:a9fe]:80", RuleMetadata},
		{"the IPv6 metadata address", "[fd00:ec2::254]:80", RuleMetadata},
		{"the Alibaba metadata address", "100.100.100.200:80", RuleMetadata},
		{"the GCP metadata name", "metadata.google.internal:80", RuleMetadata},
		{"the GCP metadata name in upper case with a dot", "METADATA.GOOGLE.INTERNAL.:80", RuleMetadata},
		{"the bare metadata name", "metadata:80", RuleMetadata},
		{"the Anthropic API", "api.anthropic.com:443", RuleModelVendor},
		{"the OpenAI API in upper case with a dot", "API.OPENAI.COM.:443", RuleModelVendor},
		{"an Azure OpenAI resource", "mine.openai.azure.com:443", RuleModelVendor},
		{"a Bedrock runtime region", "bedrock-runtime.us-east-1.amazonaws.com:443", RuleModelVendor},
		{"the Gemini API", "generativelanguage.googleapis.com:443", RuleModelVendor},
		{"OpenRouter", "openrouter.ai:443", RuleModelVendor},
		{"xAI", "api.x.ai:443", RuleModelVendor},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			resp, body := h.raw(t, http.MethodGet, "http://"+tt.hostport+"/")
			wantRefusal(t, "GET "+tt.hostport, resp, body, http.StatusForbidden, tt.rule)
			resp, body = h.raw(t, http.MethodConnect, tt.hostport)
			wantRefusal(t, "CONNECT "+tt.hostport, resp, body, http.StatusForbidden, tt.rule)
		})
	}
	t.Run("a fullwidth spelling of a vendor API", func(t *testing.T) {
		t.Parallel()
		resp, body := h.raw(t, http.MethodConnect, "ａｐｉ.openai.com:443")
		wantRefusal(t, "CONNECT fullwidth", resp, body, http.StatusForbidden, RuleModelVendor)
	})
}

func TestProxyMatchesWildcardsBySubdomainOnly(t *testing.T) {
	t.Parallel()
	port := startHTTP(t)
	h := startProxy(t, Config{})
	h.register(t, []string{"*.example.com", hp("127.0.0.1", port)}, nil)
	tests := []struct {
		name   string
		host   string
		status int
	}{
		{"a subdomain is allowed", "a.example.com", http.StatusOK},
		{"a deeper subdomain is allowed", "a.b.example.com", http.StatusOK},
		{"the bare domain is refused", "example.com", http.StatusForbidden},
		{"a longer name is refused", "notexample.com", http.StatusForbidden},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			hostport := fmt.Sprintf("%s:%d", tt.host, port)
			resp, body := h.raw(t, http.MethodGet, "http://"+hostport+"/")
			if tt.status == http.StatusOK {
				if resp.StatusCode != http.StatusOK || body != "upstream ok host="+hostport {
					t.Fatalf("GET %s = %q %q; want 200 from upstream", hostport, resp.Status, body)
				}
				return
			}
			wantRefusal(t, "GET "+hostport, resp, body, tt.status, RuleNotAllowlisted)
		})
	}
}

func TestProxyRefusesNamesResolvingToPrivateAddresses(t *testing.T) {
	t.Parallel()
	port := startHTTP(t)
	tests := []struct {
		name   string
		allow  []string
		host   string
		status int
		rule   string
	}{
		{"a name resolving to loopback is refused without the literal", []string{"loopback.test"},
			"loopback.test", http.StatusForbidden, RulePrivateAddress},
		{"a name resolving to loopback is allowed with the literal and port", []string{"loopback.test", hp("127.0.0.1", port)},
			"loopback.test", http.StatusOK, RuleAllowlisted},
		{"a name resolving to loopback is allowed with the literal on any port", []string{"loopback.test", "127.0.0.1"},
			"loopback.test", http.StatusOK, RuleAllowlisted},
		{"the literal on another port does not allow it", []string{"loopback.test", "127.0.0.1:1"},
			"loopback.test", http.StatusForbidden, RulePrivateAddress},
		{"a name resolving to RFC 1918 is refused and never dialed", []string{"rebind.test"},
			"rebind.test", http.StatusForbidden, RulePrivateAddress},
		{"one private address among allowed ones refuses the name", []string{"mixed.test", hp("127.0.0.1", port)},
			"mixed.test", http.StatusForbidden, RulePrivateAddress},
		{"an allowlisted loopback literal is reached", []string{"127.0.0.1"},
			"127.0.0.1", http.StatusOK, RuleAllowlisted},
		{"an allowlisted name does not allow its address as a literal", []string{"loopback.test"},
			"127.0.0.1", http.StatusForbidden, RuleNotAllowlisted},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h := startProxy(t, Config{})
			h.register(t, tt.allow, nil)
			hostport := fmt.Sprintf("%s:%d", tt.host, port)
			for _, method := range []string{http.MethodGet, http.MethodConnect} {
				target := hostport
				if method == http.MethodGet {
					target = "http://" + hostport + "/"
				}
				if tt.status == http.StatusOK && method == http.MethodConnect {
					c, _ := h.tunnel(t, hostport)
					c.Close()
					continue
				}
				resp, body := h.raw(t, method, target)
				if tt.status == http.StatusOK {
					if resp.StatusCode != http.StatusOK || !strings.HasPrefix(body, "upstream ok") {
						t.Fatalf("%s %s = %q %q; want 200 from upstream", method, target, resp.Status, body)
					}
					continue
				}
				wantRefusal(t, method+" "+target, resp, body, tt.status, tt.rule)
				if tt.rule == RulePrivateAddress && tt.host == "loopback.test" && !strings.Contains(body, hp("127.0.0.1", port)) {
					t.Errorf("%s %s: body %q does not say which literal to allow", method, target, body)
				}
			}
			if tt.status != http.StatusOK {
				if got := h.dialer.addresses(); len(got) != 0 {
					t.Errorf("a refused request dialed %v", got)
				}
			}
		})
	}
}

// TestProxyThroughTheSystemResolverRefusesLoopback takes the proxy's
// default path, the system's resolver (every other test stubs it): a name
// the host resolves to loopback ("localhost", from its hosts file) is
// refused without the literal and never dialed, and reached once the
// literal of every address it resolves to is allowed. Traffic goes to
// loopback only.
func TestProxyThroughTheSystemResolverRefusesLoopback(t *testing.T) {
	t.Parallel()
	port := startHTTP(t)
	addrs, err := net.DefaultResolver.LookupNetIP(t.Context(), "ip", "localhost")
	if err != nil || len(addrs) == 0 {
		t.Fatalf("the system resolves localhost to %v, %v; want loopback addresses", addrs, err)
	}
	literals := []string{"localhost"}
	for _, a := range addrs {
		if !a.IsLoopback() {
			t.Fatalf("the system resolves localhost to %v, which is not loopback", addrs)
		}
		literals = append(literals, hp(a.Unmap().String(), port))
	}
	target := fmt.Sprintf("http://localhost:%d/", port)

	h := startProxyResolving(t, Config{}, nil)
	h.register(t, []string{"localhost"}, nil)
	for _, method := range []string{http.MethodGet, http.MethodConnect} {
		tgt := target
		if method == http.MethodConnect {
			tgt = fmt.Sprintf("localhost:%d", port)
		}
		resp, body := h.raw(t, method, tgt)
		wantRefusal(t, method+" "+tgt, resp, body, http.StatusForbidden, RulePrivateAddress)
	}
	if got := h.dialer.addresses(); len(got) != 0 {
		t.Errorf("a refused request dialed %v", got)
	}

	h = startProxyResolving(t, Config{}, nil)
	h.register(t, literals, nil)
	resp, body := h.raw(t, http.MethodGet, target)
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(body, "upstream ok") {
		t.Fatalf("GET %s with %v allowed = %q %q; want 200 from upstream", target, literals, resp.Status, body)
	}
}

func TestProxyDialsTheAddressItCheckedWithoutResolvingAgain(t *testing.T) {
	t.Parallel()
	port := startHTTP(t)
	h := startProxy(t, Config{})
	h.register(t, []string{"flip.test", hp("127.0.0.1", port)}, nil)
	h.res.rebindAfterFirst("flip.test", "10.0.0.1")
	resp, body := h.raw(t, http.MethodGet, fmt.Sprintf("http://flip.test:%d/", port))
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET flip.test = %q %q; want 200", resp.Status, body)
	}
	if n := h.res.lookups("flip.test"); n != 1 {
		t.Errorf("flip.test was resolved %d times for one request; want 1", n)
	}
	if got, want := h.dialer.addresses(), []string{hp("127.0.0.1", port)}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("dialed %v; want %v", got, want)
	}
	// The next request resolves afresh and is checked afresh.
	resp, body = h.raw(t, http.MethodGet, fmt.Sprintf("http://flip.test:%d/", port))
	wantRefusal(t, "GET flip.test after the rebind", resp, body, http.StatusForbidden, RulePrivateAddress)
}

func TestProxyRefusesUnregisteredSources(t *testing.T) {
	t.Parallel()
	port := startHTTP(t)
	h := startProxy(t, Config{})
	allow := []string{"allowed.test", hp("127.0.0.1", port)}
	target := fmt.Sprintf("allowed.test:%d", port)
	refused := func(what string) {
		t.Helper()
		resp, body := h.raw(t, http.MethodGet, "http://"+target+"/")
		wantRefusal(t, what+": GET", resp, body, http.StatusForbidden, RuleUnknownSource)
		resp, body = h.raw(t, http.MethodConnect, target)
		wantRefusal(t, what+": CONNECT", resp, body, http.StatusForbidden, RuleUnknownSource)
	}
	refused("before any registration")

	other := netip.MustParseAddr("127.0.0.2")
	if err := h.p.Register(other, Registration{Run: RunIdentity{RunID: "run-2"}, Network: runner.Network{Enabled: true, Allow: allow}}); err != nil {
		t.Fatalf("Register: %v", err)
	}
	refused("with only another address registered")

	h.register(t, allow, nil)
	if resp, body := h.raw(t, http.MethodGet, "http://"+target+"/"); resp.StatusCode != http.StatusOK {
		t.Fatalf("GET once registered = %q %q; want 200", resp.Status, body)
	}
	h.p.Unregister(netip.MustParseAddr("127.0.0.1"))
	refused("after Unregister")

	ev := h.audit.await(t, "for the unknown source", func(ev Event) bool { return ev.Rule == RuleUnknownSource })
	if ev.Source != netip.MustParseAddr("127.0.0.1") || ev.RunID != "" || ev.Decision != Deny {
		t.Errorf("unknown-source event %+v; want source 127.0.0.1, no run, deny", ev)
	}
}

func TestProxyLimitsConnectionsPerSandbox(t *testing.T) {
	t.Parallel()
	echo := startTCP(t, func(c net.Conn) { io.Copy(c, c) })
	h := startProxy(t, Config{MaxConnsPerSandbox: 2})
	h.register(t, []string{"allowed.test", hp("127.0.0.1", echo)}, nil)
	target := fmt.Sprintf("allowed.test:%d", echo)

	first, _ := h.tunnel(t, target)
	second, _ := h.tunnel(t, target)
	defer second.Close()
	resp, body := h.raw(t, http.MethodConnect, target)
	wantRefusal(t, "a third CONNECT", resp, body, http.StatusTooManyRequests, RuleConnLimit)
	resp, body = h.raw(t, http.MethodGet, "http://"+target+"/")
	wantRefusal(t, "a GET on a third connection", resp, body, http.StatusTooManyRequests, RuleConnLimit)

	// Another sandbox has its own budget.
	if err := h.p.Register(netip.MustParseAddr("127.0.0.2"), Registration{Run: RunIdentity{RunID: "run-2"}, Network: runner.Network{Enabled: true, Allow: []string{"allowed.test", hp("127.0.0.1", echo)}}}); err != nil {
		t.Fatalf("Register: %v", err)
	}
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.2")}}
	c, err := d.DialContext(t.Context(), "tcp", h.addr)
	if err != nil {
		t.Fatalf("dial from 127.0.0.2: %v", err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(waitFor))
	fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\n\r\n", target)
	if line, err := readLine(c); err != nil || !strings.HasPrefix(line, "HTTP/1.1 200") {
		t.Fatalf("CONNECT from another sandbox = %q, %v; want 200", line, err)
	}

	// Closing a tunnel frees its slot. Until the proxy has noticed, an
	// attempt is refused (429), or closed unanswered while refused
	// connections still linger.
	first.Close()
	deadline := time.Now().Add(waitFor)
	for {
		c, _, resp, err := h.connect(target)
		if err == nil {
			c.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("a slot was never freed: %v, %v", resp, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// readLine reads one CRLF-terminated line byte by byte, leaving the rest of
// the stream unread.
func readLine(c net.Conn) (string, error) {
	var b []byte
	one := make([]byte, 1)
	for !bytes.HasSuffix(b, []byte("\r\n")) {
		if _, err := c.Read(one); err != nil {
			return string(b), err
		}
		b = append(b, one[0])
	}
	return strings.TrimSuffix(string(b), "\r\n"), nil
}

func TestProxyCutsAConnectionAtTheByteLimit(t *testing.T) {
	t.Parallel()
	const limit = 1000
	port := startHTTP(t)
	flood := startTCP(t, func(c net.Conn) {
		c.Write(bytes.Repeat([]byte("d"), 64<<10))
		io.Copy(io.Discard, c)
	})
	received := make(chan int64, 1)
	sink := startTCP(t, func(c net.Conn) {
		n, _ := io.Copy(io.Discard, c)
		received <- n
	})
	h := startProxy(t, Config{MaxBytesPerConn: limit})
	h.register(t, []string{"allowed.test", hp("127.0.0.1", port), hp("127.0.0.1", flood), hp("127.0.0.1", sink)}, nil)

	t.Run("downstream through a tunnel", func(t *testing.T) {
		t.Parallel()
		c, br := h.tunnel(t, fmt.Sprintf("allowed.test:%d", flood))
		n, _ := io.Copy(io.Discard, br)
		if n != limit {
			t.Errorf("read %d bytes through the tunnel; want exactly %d", n, limit)
		}
		c.Close()
		ev := h.audit.await(t, "for the flood", func(ev Event) bool { return ev.Port == flood })
		if ev.BytesDown != limit || !strings.Contains(ev.Error, "byte limit") {
			t.Errorf("event %+v; want %d bytes down and a byte-limit error", ev, limit)
		}
	})
	t.Run("upstream through a tunnel", func(t *testing.T) {
		t.Parallel()
		c, _ := h.tunnel(t, fmt.Sprintf("allowed.test:%d", sink))
		c.Write(bytes.Repeat([]byte("u"), 64<<10)) // fails part way; that is the point
		c.Close()
		select {
		case n := <-received:
			if n != limit {
				t.Errorf("upstream received %d bytes; want exactly %d", n, limit)
			}
		case <-time.After(waitFor):
			t.Fatal("upstream connection never ended")
		}
	})
	t.Run("a forwarded response body", func(t *testing.T) {
		t.Parallel()
		c := h.client(t, nil)
		resp, err := c.Get(fmt.Sprintf("http://allowed.test:%d/big?n=100000", port))
		if err != nil {
			t.Fatalf("GET /big: %v", err)
		}
		n, err := io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if err == nil || n >= limit {
			t.Errorf("read %d body bytes, error %v; want a cut short of %d bytes", n, err, limit)
		}
		h.audit.await(t, "for /big", func(ev Event) bool {
			return ev.Port == port && strings.Contains(ev.Error, "byte limit") && ev.BytesDown == limit
		})
	})
}

func TestProxyClosesIdleTunnels(t *testing.T) {
	t.Parallel()
	t.Run("a tunnel with no traffic is closed", func(t *testing.T) {
		t.Parallel()
		const idle = 300 * time.Millisecond
		silent := startTCP(t, func(c net.Conn) { io.Copy(io.Discard, c) })
		h := startProxy(t, Config{IdleTimeout: idle})
		h.register(t, []string{"allowed.test", hp("127.0.0.1", silent)}, nil)
		start := time.Now()
		c, br := h.tunnel(t, fmt.Sprintf("allowed.test:%d", silent))
		defer c.Close()
		_, err := br.ReadByte()
		if err == nil || errorsIsTimeout(err) {
			t.Fatalf("read from an idle tunnel: %v; want the proxy to close it", err)
		}
		if d := time.Since(start); d < idle {
			t.Errorf("the tunnel closed after %s; want at least %s", d, idle)
		}
		ev := h.audit.await(t, "for the idle tunnel", func(ev Event) bool { return ev.Port == silent })
		if !strings.Contains(ev.Error, "idle timeout") {
			t.Errorf("event error %q; want an idle timeout", ev.Error)
		}
	})
	t.Run("traffic in one direction keeps a tunnel open", func(t *testing.T) {
		t.Parallel()
		// Gaps well under the idle time (even on a loaded machine), a
		// total well over it.
		const idle, gap, n = time.Second, 100 * time.Millisecond, 25
		trickle := startTCP(t, func(c net.Conn) {
			for range n {
				time.Sleep(gap)
				if _, err := c.Write([]byte("t")); err != nil {
					return
				}
			}
		})
		h := startProxy(t, Config{IdleTimeout: idle})
		h.register(t, []string{"allowed.test", hp("127.0.0.1", trickle)}, nil)
		start := time.Now()
		c, br := h.tunnel(t, fmt.Sprintf("allowed.test:%d", trickle))
		defer c.Close()
		got, err := io.ReadAll(br)
		if err != nil || string(got) != strings.Repeat("t", n) {
			t.Fatalf("read %q, %v; want all %d bytes and a clean end; events %+v", got, err, n, h.audit.all())
		}
		if d := time.Since(start); d <= idle {
			t.Fatalf("the trickle took %s, not longer than the idle time %s: the test proves nothing", d, idle)
		}
		c.Close()
		ev := h.audit.await(t, "for the trickle", func(ev Event) bool { return ev.Port == trickle })
		if ev.Error != "" || ev.BytesDown != n {
			t.Errorf("event %+v; want a clean end after %d bytes", ev, n)
		}
	})
}

func TestProxyStripsHopByHopHeadersAndUsesTheTargetHost(t *testing.T) {
	t.Parallel()
	port := startHTTP(t)
	h := startProxy(t, Config{})
	h.register(t, []string{"allowed.test", hp("127.0.0.1", port)}, nil)
	resp, body := h.raw(t, http.MethodGet, fmt.Sprintf("http://allowed.test:%d/headers", port),
		"Proxy-Authorization: Basic c2VjcmV0",
		"Proxy-Connection: keep-alive",
		"Connection: X-Hop",
		"X-Hop: dropped",
		"Keep-Alive: timeout=5",
		"Te: trailers",
		"X-Kept: yes")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /headers = %q %q", resp.Status, body)
	}
	upstreamSaw := strings.ToLower(body)
	for _, gone := range []string{"proxy-authorization", "proxy-connection", "x-hop", "keep-alive", "te:"} {
		if strings.Contains(upstreamSaw, gone) {
			t.Errorf("upstream saw %q in %q", gone, body)
		}
	}
	if !strings.Contains(body, "X-Kept: yes") {
		t.Errorf("upstream did not see X-Kept in %q", body)
	}
	if strings.Contains(body, "Go-http-client") {
		t.Errorf("the proxy added a User-Agent: %q", body)
	}
	_, body = h.raw(t, http.MethodGet, fmt.Sprintf("http://allowed.test:%d/", port))
	if want := fmt.Sprintf("upstream ok host=allowed.test:%d", port); body != want {
		t.Errorf("upstream body %q; want %q (the Host header must not override the target)", body, want)
	}
}

func TestProxyAuditsAllowedAndDeniedRequests(t *testing.T) {
	t.Parallel()
	port := startHTTP(t)
	httpsPort, roots := startHTTPS(t)
	h := startProxy(t, Config{})
	h.register(t, []string{"allowed.test", hp("127.0.0.1", port), hp("127.0.0.1", httpsPort)}, nil)

	resp, body := h.raw(t, http.MethodGet, fmt.Sprintf("http://other.test:%d/", port))
	// A denial is audited before the reply is sent, so it is there already.
	var denied *Event
	for _, ev := range h.audit.all() {
		if ev.Host == "other.test" {
			denied = &ev
		}
	}
	if denied == nil {
		t.Fatalf("no audit event for the denied request once its %q reply arrived", resp.Status)
	}
	want := Event{
		Time: denied.Time, RunID: "run-1", QueryID: "query-1", Source: netip.MustParseAddr("127.0.0.1"),
		Method: http.MethodGet, Host: "other.test", Port: port, Decision: Deny, Rule: RuleNotAllowlisted,
		Reason: strings.TrimSuffix(strings.TrimPrefix(body, "gatekeeper egress denied: "), " (rule egress.not_allowlisted)\n"),
	}
	if !reflect.DeepEqual(*denied, want) {
		t.Errorf("denied event\n %+v\nwant\n %+v", *denied, want)
	}

	c := h.client(t, roots)
	for _, u := range []string{fmt.Sprintf("http://allowed.test:%d/big?n=5000", port), fmt.Sprintf("https://allowed.test:%d/big?n=5000", httpsPort)} {
		resp, err := c.Get(u)
		if err != nil {
			t.Fatalf("GET %s: %v", u, err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	c.CloseIdleConnections() // ends the CONNECT tunnel, which audits it
	for _, tt := range []struct {
		method string
		port   uint16
	}{{http.MethodGet, port}, {http.MethodConnect, httpsPort}} {
		ev := h.audit.await(t, tt.method+" allowed", func(ev Event) bool { return ev.Method == tt.method && ev.Decision == Allow })
		switch {
		case ev.RunID != "run-1" || ev.QueryID != "query-1" || ev.Host != "allowed.test" || ev.Port != tt.port:
			t.Errorf("%s event %+v: wrong identity or target", tt.method, ev)
		case ev.Rule != RuleAllowlisted || !strings.Contains(ev.Reason, "sandbox.net.allow pattern \"allowed.test\""):
			t.Errorf("%s event %+v: wrong rule or reason", tt.method, ev)
		case ev.Addr != netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), tt.port):
			t.Errorf("%s event %+v: wrong upstream address", tt.method, ev)
		case ev.BytesDown < 5000 || ev.BytesUp == 0:
			t.Errorf("%s event %+v: want at least 5000 bytes down and some up", tt.method, ev)
		case ev.Error != "" || ev.Duration <= 0:
			t.Errorf("%s event %+v: want a clean end with a duration", tt.method, ev)
		}
	}
}

func TestProxyRefusesMalformedRequests(t *testing.T) {
	t.Parallel()
	h := startProxy(t, Config{})
	h.register(t, []string{"allowed.test"}, nil)
	tests := []struct {
		name, method, target string
		status               int
		rule                 string
	}{
		{"an origin-form request", http.MethodGet, "/relative", http.StatusBadRequest, RuleBadRequest},
		{"an https URI without CONNECT", http.MethodGet, "https://allowed.test/", http.StatusBadRequest, RuleBadRequest},
		{"an ftp URI", http.MethodGet, "ftp://allowed.test/", http.StatusBadRequest, RuleBadRequest},
		{"a CONNECT without a port", http.MethodConnect, "allowed.test", http.StatusForbidden, RuleBadHost},
		{"a CONNECT to port 0", http.MethodConnect, "allowed.test:0", http.StatusForbidden, RuleBadHost},
		{"a CONNECT to a host with an underscore", http.MethodConnect, "bad_host.test:443", http.StatusForbidden, RuleBadHost},
		{"a GET to a host ending in a bad number", http.MethodGet, "http://host.300/", http.StatusForbidden, RuleBadHost},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			resp, body := h.raw(t, tt.method, tt.target)
			wantRefusal(t, tt.method+" "+tt.target, resp, body, tt.status, tt.rule)
		})
	}
}

func TestAFailedConnectTellsGoClientsTheRule(t *testing.T) {
	t.Parallel()
	_, roots := startHTTPS(t)
	h := startProxy(t, Config{})
	h.register(t, []string{"allowed.test"}, nil)
	_, err := h.client(t, roots).Get("https://other.test/")
	if err == nil || !strings.Contains(err.Error(), RuleNotAllowlisted) || !strings.Contains(err.Error(), "other.test:443") {
		t.Fatalf("GET through a refused CONNECT: %v; want an error naming the host and %s", err, RuleNotAllowlisted)
	}
}

func TestProxyReportsAnUnreachableUpstream(t *testing.T) {
	t.Parallel()
	h := startProxy(t, Config{})
	h.register(t, []string{"allowed.test", "127.0.0.1:1"}, nil)
	resp, body := h.raw(t, http.MethodGet, "http://allowed.test:1/")
	if resp.StatusCode != http.StatusBadGateway || !strings.Contains(body, "connect to \"allowed.test:1\"") {
		t.Errorf("GET to a closed port = %q %q; want 502 naming the target", resp.Status, body)
	}
	ev := h.audit.await(t, "for the closed port", func(ev Event) bool { return ev.Port == 1 })
	if ev.Decision != Allow || ev.Error == "" {
		t.Errorf("event %+v; want an allowed request with an error", ev)
	}
}

func TestUnregisterClosesTheRunsTunnels(t *testing.T) {
	t.Parallel()
	echo := startTCP(t, func(c net.Conn) { io.Copy(c, c) })
	h := startProxy(t, Config{})
	h.register(t, []string{"allowed.test", hp("127.0.0.1", echo)}, nil)
	c, br := h.tunnel(t, fmt.Sprintf("allowed.test:%d", echo))
	defer c.Close()
	if _, err := c.Write([]byte("x")); err != nil {
		t.Fatalf("write: %v", err)
	}
	if b, err := br.ReadByte(); err != nil || b != 'x' {
		t.Fatalf("echo = %q, %v", b, err)
	}
	h.p.Unregister(netip.MustParseAddr("127.0.0.1"))
	if _, err := br.ReadByte(); err == nil || errorsIsTimeout(err) {
		t.Fatalf("read after Unregister: %v; want the tunnel closed", err)
	}
	ev := h.audit.await(t, "for the tunnel", func(ev Event) bool { return ev.Port == echo })
	if !strings.Contains(ev.Error, "closed by the proxy") || ev.BytesUp != 1 || ev.BytesDown != 1 {
		t.Errorf("event %+v; want one byte each way and a proxy close", ev)
	}
}

func TestATunnelEndsCleanlyWhenTheClientResetsIt(t *testing.T) {
	t.Parallel()
	echo := startTCP(t, func(c net.Conn) { io.Copy(c, c) })
	h := startProxy(t, Config{})
	h.register(t, []string{"allowed.test", hp("127.0.0.1", echo)}, nil)
	c, br := h.tunnel(t, fmt.Sprintf("allowed.test:%d", echo))
	if _, err := c.Write([]byte("x")); err != nil {
		t.Fatalf("write: %v", err)
	}
	if _, err := br.ReadByte(); err != nil {
		t.Fatalf("read: %v", err)
	}
	c.(*net.TCPConn).SetLinger(0) // Close sends a reset
	c.Close()
	ev := h.audit.await(t, "for the tunnel", func(ev Event) bool { return ev.Port == echo })
	if ev.Error != "" {
		t.Errorf("event error %q; want a clean end", ev.Error)
	}
}

func TestNew(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		cfg     Config
		wantErr string
	}{
		{"an auditor alone is enough", Config{Auditor: &recorder{}}, ""},
		{"no auditor is refused", Config{}, "auditor is required"},
		{"a negative connection limit is refused", Config{Auditor: &recorder{}, MaxConnsPerSandbox: -1}, "max conns per sandbox is negative"},
		{"a negative idle timeout is refused", Config{Auditor: &recorder{}, IdleTimeout: -time.Second}, "idle timeout is negative"},
		{"a negative byte limit is refused", Config{Auditor: &recorder{}, MaxBytesPerConn: -1}, "max bytes per conn is negative"},
		{"a bad extra vendor host is refused", Config{Auditor: &recorder{}, ExtraVendorHosts: []string{"ok.example", "bad host"}}, "extra vendor hosts[1]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p, err := New(tt.cfg)
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("New: %v", err)
				}
				if p.cfg.MaxConnsPerSandbox != DefaultMaxConnsPerSandbox || p.cfg.IdleTimeout != DefaultIdleTimeout ||
					p.cfg.MaxBytesPerConn != DefaultMaxBytesPerConn || p.cfg.HeaderTimeout != DefaultHeaderTimeout ||
					p.cfg.DialTimeout != DefaultDialTimeout {
					t.Fatalf("New did not fill in the defaults: %+v", p.cfg)
				}
				return
			}
			if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("New: %v; want an ErrInvalidConfig error mentioning %q", err, tt.wantErr)
			}
		})
	}
}

func TestRegister(t *testing.T) {
	t.Parallel()
	good := runner.Network{Enabled: true, Allow: []string{"example.com"}}
	tests := []struct {
		name    string
		first   string // registered first, if not empty
		addr    string
		net     runner.Network
		wantErr error
	}{
		{"a new address is registered", "", "10.1.0.2", good, nil},
		{"a bad pattern is refused", "", "10.1.0.2", runner.Network{Enabled: true, Allow: []string{"*"}}, nethost.ErrBadPattern},
		{"an allow pattern over a public suffix is refused", "", "10.1.0.2", runner.Network{Enabled: true, Allow: []string{"*.co.uk"}}, nethost.ErrTooBroad},
		{"a registered address is refused", "10.1.0.2", "10.1.0.2", good, ErrAlreadyRegistered},
		{"a mapped spelling of a registered address is refused", "10.1.0.2", "::ffff:10.1.0.2", good, ErrAlreadyRegistered},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p, err := New(Config{Auditor: &recorder{}})
			if err != nil {
				t.Fatalf("New: %v", err)
			}
			if tt.first != "" {
				if err := p.Register(netip.MustParseAddr(tt.first), Registration{Run: RunIdentity{RunID: "first"}, Network: good}); err != nil {
					t.Fatalf("Register first: %v", err)
				}
			}
			err = p.Register(netip.MustParseAddr(tt.addr), Registration{Run: RunIdentity{RunID: "second"}, Network: tt.net})
			if !errors.Is(err, tt.wantErr) || (tt.wantErr == nil) != (err == nil) {
				t.Fatalf("Register: %v; want %v", err, tt.wantErr)
			}
		})
	}
	t.Run("an address is free again after Unregister", func(t *testing.T) {
		t.Parallel()
		p, err := New(Config{Auditor: &recorder{}})
		if err != nil {
			t.Fatalf("New: %v", err)
		}
		a := netip.MustParseAddr("10.1.0.3")
		if err := p.Register(a, Registration{Run: RunIdentity{RunID: "a"}, Network: good}); err != nil {
			t.Fatalf("Register: %v", err)
		}
		p.Unregister(a)
		p.Unregister(a) // a second time does nothing
		if err := p.Register(a, Registration{Run: RunIdentity{RunID: "b"}, Network: good}); err != nil {
			t.Fatalf("Register after Unregister: %v", err)
		}
		if err := p.Register(netip.Addr{}, Registration{Run: RunIdentity{}, Network: good}); err == nil {
			t.Fatal("Register of the zero address succeeded")
		}
	})
}

// TestServeStopsWhenItsContextEndsAndLeavesNoGoroutines is not parallel:
// it counts the goroutines of the whole process.
func TestServeStopsWhenItsContextEndsAndLeavesNoGoroutines(t *testing.T) {
	echo := startTCP(t, func(c net.Conn) { io.Copy(c, c) })
	port := startHTTP(t)
	before := runtime.NumGoroutine()

	p, err := New(Config{Auditor: &recorder{}, Resolver: newResolver(testNames), Dialer: &loopbackDialer{}})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	if err := p.Register(netip.MustParseAddr("127.0.0.1"), Registration{Run: RunIdentity{RunID: "run-1"}, Network: runner.Network{Enabled: true, Allow: []string{"allowed.test", "127.0.0.1"}}}); err != nil {
		t.Fatalf("Register: %v", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	h := &harness{p: p, addr: ln.Addr().String()}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- p.Serve(ctx, ln) }()

	// A live tunnel, an idle keep-alive connection and a silent connection.
	tun, br := h.tunnel(t, fmt.Sprintf("allowed.test:%d", echo))
	tun.Write([]byte("x"))
	if b, err := br.ReadByte(); err != nil || b != 'x' {
		t.Fatalf("echo = %q, %v", b, err)
	}
	c := h.client(t, nil)
	resp, err := c.Get(fmt.Sprintf("http://allowed.test:%d/", port))
	if err != nil {
		t.Fatalf("GET: %v", err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	silent, err := net.Dial("tcp", h.addr)
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	defer silent.Close()

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Serve = %v; want nil after its context ended", err)
		}
	case <-time.After(waitFor):
		t.Fatal("Serve did not return after its context ended")
	}
	if _, err := br.ReadByte(); err == nil || errorsIsTimeout(err) {
		t.Errorf("read from a tunnel after Serve returned: %v; want it closed", err)
	}
	tun.Close()
	silent.Close()
	c.CloseIdleConnections()

	deadline := time.Now().Add(waitFor)
	for runtime.NumGoroutine() > before {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			t.Fatalf("%d goroutines before, %d after:\n%s", before, runtime.NumGoroutine(), buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(10 * time.Millisecond)
	}
}
