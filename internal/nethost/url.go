package nethost

import (
	"fmt"
	"strconv"
	"strings"
)

// URL is the part of an http or https URL that says where a request goes,
// as a WHATWG URL parser reads it.
type URL struct {
	// Scheme is "http" or "https", lower-cased.
	Scheme string
	// Host is the host in Normalize's canonical form.
	Host string
	// Port is the port written in the URL, or 0 when none is written or it
	// is the scheme's default (80 for http, 443 for https).
	Port uint16
	// Credentials reports whether the URL has a user-info part (an "@" in
	// its authority), even an empty one.
	Credentials bool
}

// EffectivePort is the port a request to u goes to: Port, or the scheme's
// default.
func (u URL) EffectivePort() uint16 {
	if u.Port != 0 {
		return u.Port
	}
	return defaultPort(u.Scheme)
}

// Upgraded is u with its scheme set to https the way the WHATWG protocol
// setter does it (url.protocol = "https:"), which is how Claude Code's
// WebFetch fetches an http URL: an explicit port is kept unless it is
// https's default, so "http://h/" and "http://h:80/" go to h:443 and
// "http://h:8080/" to h:8080.
func (u URL) Upgraded() URL {
	u.Scheme = "https"
	if u.Port == defaultPort(u.Scheme) {
		u.Port = 0
	}
	return u
}

// ParseURL reads where an http or https URL leads, the way the WHATWG URL
// Standard's basic URL parser does (https://url.spec.whatwg.org/, as
// implemented by Node's new URL, which Claude Code's WebFetch uses), and
// normalizes the host with the same function as every host pattern:
//
//   - leading and trailing C0 controls and spaces are removed, and every
//     tab, CR and LF anywhere ("https://exa\tmple.com" is example.com);
//   - the scheme is case-insensitive; any number of "/" and "\" may follow
//     it, including none ("https:example.com", "https:\\example.com");
//   - the authority ends at the first "/", "\", "?" or "#", and its last "@"
//     ends the user info ("https://a.com\@b.com" is a.com, with no user
//     info; "https://a.com@b.com" is b.com, with user info);
//   - the host is percent-decoded, then UTF-8 decoded, then mapped with
//     UTS 46 ("ex%61mple.com", "ｅｘａｍｐｌｅ.com", "exa\u00admple.com" and
//     "example。com" are all example.com), and a host ending in a number is
//     an IPv4 address in any spelling ("0x7f.1" is 127.0.0.1);
//   - a port is decimal digits only, leading zeros allowed, at most 65535.
//
// Where the Standard would accept a host that Normalize refuses (an
// underscore, "*", an empty label, a label beginning with "-", port 0),
// ParseURL fails: it never returns a host other than the one the Standard
// gives, only fails more often. Errors wrap ErrBadURL; a host that cannot
// be normalized also wraps ErrBadHost.
func ParseURL(raw string) (URL, error) {
	s := strings.TrimFunc(raw, func(r rune) bool { return r <= ' ' })
	s = strings.Map(func(r rune) rune {
		if r == '\t' || r == '\n' || r == '\r' {
			return -1
		}
		return r
	}, s)
	scheme, rest, ok := cutScheme(s)
	if !ok {
		return URL{}, fmt.Errorf("%w: %+q is not an absolute URL", ErrBadURL, clip(raw))
	}
	if scheme != "http" && scheme != "https" {
		return URL{}, fmt.Errorf("%w: %+q is not http or https", ErrBadURL, clip(raw))
	}
	u := URL{Scheme: scheme}
	rest = strings.TrimLeft(rest, `/\`)
	if i := strings.IndexAny(rest, `/\?#`); i >= 0 {
		rest = rest[:i]
	}
	if at := strings.LastIndexByte(rest, '@'); at >= 0 {
		u.Credentials, rest = true, rest[at+1:]
	}
	host, port, hasPort := cutURLPort(rest)
	if host == "" {
		return URL{}, fmt.Errorf("%w: %+q names no host", ErrBadURL, clip(raw))
	}
	if hasPort {
		n, err := parseURLPort(port)
		if err != nil {
			return URL{}, fmt.Errorf("%w: %+q: %w", ErrBadURL, clip(raw), err)
		}
		if n != defaultPort(scheme) {
			u.Port = n
		}
	}
	var err error
	if host[0] == '[' {
		u.Host, err = stable(host, normalizeBracketed)
	} else {
		u.Host, err = stable(strings.ToValidUTF8(percentDecode(host), "\uFFFD"), normalizeName)
	}
	if err != nil {
		return URL{}, fmt.Errorf("%w: %+q: %w", ErrBadURL, clip(raw), err)
	}
	return u, nil
}

// cutScheme splits "scheme:rest", the scheme being an ASCII letter followed
// by letters, digits, "+", "-" or "."; it returns the scheme lower-cased.
func cutScheme(s string) (scheme, rest string, ok bool) {
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z':
		case i > 0 && ('0' <= c && c <= '9' || c == '+' || c == '-' || c == '.'):
		case i > 0 && c == ':':
			return asciiLower(s[:i]), s[i+1:], true
		default:
			return "", "", false
		}
	}
	return "", "", false
}

// cutURLPort splits an authority's host and port at the first ":" outside
// brackets, as the Standard's host state does.
func cutURLPort(hostport string) (host, port string, hasPort bool) {
	inside := false
	for i := 0; i < len(hostport); i++ {
		switch hostport[i] {
		case '[':
			inside = true
		case ']':
			inside = false
		case ':':
			if !inside {
				return hostport[:i], hostport[i+1:], true
			}
		}
	}
	return hostport, "", false
}

// parseURLPort parses the port state's digits: empty is no port (0),
// leading zeros are allowed, more than 65535 fails, and so does port 0,
// which no fetch can use.
func parseURLPort(s string) (uint16, error) {
	if s == "" {
		return 0, nil
	}
	if strings.Trim(s, "0123456789") != "" {
		return 0, fmt.Errorf("port %+q is not a number", clip(s))
	}
	if t := strings.TrimLeft(s, "0"); len(t) <= 5 {
		if n, err := strconv.ParseUint("0"+t, 10, 16); err == nil && n > 0 {
			return uint16(n), nil
		}
	}
	return 0, fmt.Errorf("port %+q is not in 1-65535", clip(s))
}

func defaultPort(scheme string) uint16 {
	if scheme == "http" {
		return 80
	}
	return 443
}

// percentDecode decodes every "%" followed by two hex digits into its byte
// and keeps any other "%" as it is, as the Standard's percent-decode does.
func percentDecode(s string) string {
	if strings.IndexByte(s, '%') < 0 {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); i++ {
		if s[i] == '%' && i+2 < len(s) && isHex(s[i+1]) && isHex(s[i+2]) {
			b.WriteByte(unhex(s[i+1])<<4 | unhex(s[i+2]))
			i += 2
			continue
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

func unhex(c byte) byte {
	switch {
	case c <= '9':
		return c - '0'
	case c <= 'F':
		return c - 'A' + 10
	}
	return c - 'a' + 10
}
