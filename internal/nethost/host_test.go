package nethost

import (
	"errors"
	"strings"
	"testing"
)

func TestNormalize(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		in   string
		want string // empty: an error wrapping ErrBadHost
	}{
		{"a lower-case name is unchanged", "example.com", "example.com"},
		{"upper case is folded", "Example.COM", "example.com"},
		{"one trailing dot is stripped", "example.com.", "example.com"},
		{"two trailing dots are refused", "example.com..", ""},
		{"an empty label is refused", "a..example.com", ""},
		{"a leading dot is refused", ".example.com", ""},
		{"a lone dot is refused", ".", ""},
		{"an empty host is refused", "", ""},
		{"an IDN becomes punycode", "bücher.example", "xn--bcher-kva.example"},
		{"an upper-case IDN becomes the same punycode", "BÜCHER.example", "xn--bcher-kva.example"},
		{"punycode stays punycode", "XN--BCHER-KVA.example", "xn--bcher-kva.example"},
		{"fullwidth letters map to ASCII", "ｅｘａｍｐｌｅ.com", "example.com"},
		{"an ideographic full stop is a dot", "example。com", "example.com"},
		{"punycode of plain ASCII is refused", "xn--example-.com", ""},
		{"an underscore is refused", "under_score.example", ""},
		{"a space is refused", "exa mple.com", ""},
		{"a percent escape is refused", "exa%6dple.com", ""},
		{"a wildcard is not a host", "*.example.com", ""},
		{"a label may not start with a hyphen", "-lead.example", ""},
		{"a 64-byte label is refused", strings.Repeat("a", 64) + ".example", ""},
		{"a 63-byte label is fine", strings.Repeat("a", 63) + ".example", strings.Repeat("a", 63) + ".example"},
		{"a 254-byte name is refused", strings.Repeat("abcdefghi.", 25) + "abcd", ""},
		{"a 253-byte name is fine", strings.Repeat("abcdefghi.", 25) + "abc", strings.Repeat("abcdefghi.", 25) + "abc"},
		{"a dotted quad is unchanged", "127.0.0.1", "127.0.0.1"},
		{"a dotted quad loses its trailing dot", "127.0.0.1.", "127.0.0.1"},
		{"two parts fill the last three bytes", "127.1", "127.0.0.1"},
		{"three parts fill the last two bytes", "127.0.1", "127.0.0.1"},
		{"a hex first part", "0x7f.0.0.1", "127.0.0.1"},
		{"upper-case hex parts", "0X7F.0X0.0x0.0X1", "127.0.0.1"},
		{"an octal first part", "0177.0.0.1", "127.0.0.1"},
		{"a decimal integer", "2130706433", "127.0.0.1"},
		{"a hex integer", "0x7f000001", "127.0.0.1"},
		{"an octal integer", "017700000001", "127.0.0.1"},
		{"a bare 0x is zero", "0x.0.0.1", "0.0.0.1"},
		{"fullwidth digits map to an address", "１２７.０.０.１", "127.0.0.1"},
		{"metadata as an integer", "2852039166", "169.254.169.254"},
		{"metadata as hex", "0xa9fea9fe", "169.254.169.254"},
		{"metadata as octal quads", "0251.0376.0251.0376", "169.254.169.254"},
		{"metadata with a two-byte last part", "169.254.43518", "169.254.169.254"},
		{"a part above 255 is refused", "256.0.0.1", ""},
		{"a last part too big for its bytes is refused", "1.2.3.256", ""},
		{"a two-part address with an oversized tail is refused", "1.16777216", ""},
		{"five parts are refused", "1.2.3.4.5", ""},
		{"an integer above 32 bits is refused", "4294967296", ""},
		{"a hex integer above 32 bits is refused", "0x100000000", ""},
		{"an invalid octal digit is refused", "08.0.0.1", ""},
		{"a name ending in a number is refused", "example.123", ""},
		{"a name ending in hex is refused", "example.0x1f", ""},
		{"a name ending in a bare 0x is refused", "example.0x", ""},
		{"a name with a number inside is fine", "123.example", "123.example"},
		{"a bracketed IPv6 loopback", "[::1]", "::1"},
		{"a bare IPv6 loopback", "::1", "::1"},
		{"a long IPv6 loopback", "[0:0:0:0:0:0:0:1]", "::1"},
		{"upper-case IPv6", "[FD00:EC2::254]", "fd00:ec2::254"},
		{"IPv4-mapped IPv6 in dotted form is unmapped", "[::ffff:127.0.0.1]", "127.0.0.1"},
		{"IPv4-mapped IPv6 in hex form is unmapped", "[::FFFF:7F00:1]", "127.0.0.1"},
		{"IPv4-compatible IPv6 stays IPv6", "[::127.0.0.1]", "::7f00:1"},
		{"an IPv6 zone is refused", "[fe80::1%eth0]", ""},
		{"an IPv4 address in brackets is refused", "[127.0.0.1]", ""},
		{"an unclosed bracket is refused", "[::1", ""},
		{"a host with a port is refused", "example.com:80", ""},
		{"an over-long input is refused", strings.Repeat("a", maxHostInput+1), ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := Normalize(tt.in)
			if tt.want == "" {
				if !errors.Is(err, ErrBadHost) {
					t.Fatalf("Normalize(%q) = %q, %v; want an error wrapping ErrBadHost", tt.in, got, err)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("Normalize(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
			}
			if again, err := Normalize(got); err != nil || again != got {
				t.Fatalf("Normalize(%q) = %q, %v; want it unchanged", got, again, err)
			}
		})
	}
}

func TestSplitHostPort(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name        string
		in          string
		defaultPort uint16
		wantHost    string // empty: an error wrapping ErrBadHost
		wantPort    uint16
	}{
		{"a name and a port", "Example.com:443", 0, "example.com", 443},
		{"a missing port takes the default", "example.com", 80, "example.com", 80},
		{"an empty port takes the default", "example.com:", 80, "example.com", 80},
		{"a missing port without a default is refused", "example.com", 0, "", 0},
		{"a bracketed IPv6 with a port", "[::1]:8080", 0, "::1", 8080},
		{"a bracketed IPv6 without a port", "[::1]", 80, "::1", 80},
		{"a mapped IPv6 with a port is unmapped", "[::ffff:127.0.0.1]:80", 0, "127.0.0.1", 80},
		{"an inet_aton spelling with a port", "0x7f.1:8080", 0, "127.0.0.1", 8080},
		{"leading zeros in a port are decimal", "example.com:0443", 0, "example.com", 443},
		{"a bare IPv6 with a port is refused", "::1:80", 0, "", 0},
		{"port 0 is refused", "example.com:0", 0, "", 0},
		{"port 65536 is refused", "example.com:65536", 0, "", 0},
		{"a signed port is refused", "example.com:+80", 0, "", 0},
		{"a hex port is refused", "example.com:0x50", 0, "", 0},
		{"text after a bracket is refused", "[::1]x:80", 0, "", 0},
		{"a bad host with a good port is refused", "exa mple.com:80", 0, "", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			host, port, err := SplitHostPort(tt.in, tt.defaultPort)
			if tt.wantHost == "" {
				if !errors.Is(err, ErrBadHost) {
					t.Fatalf("SplitHostPort(%q) = %q, %d, %v; want an error wrapping ErrBadHost", tt.in, host, port, err)
				}
				return
			}
			if err != nil || host != tt.wantHost || port != tt.wantPort {
				t.Fatalf("SplitHostPort(%q) = %q, %d, %v; want %q, %d", tt.in, host, port, err, tt.wantHost, tt.wantPort)
			}
		})
	}
}
