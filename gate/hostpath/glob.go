package hostpath

import (
	"path/filepath"
	"strings"
)

// globMeta are the characters that make a path component a pattern. A
// backslash counts: it escapes in some glob dialects, and cutting the base
// early only makes it wider.
const globMeta = `*?[{\`

// Within reports whether path is root or lies beneath it, comparing whole
// components after cleaning both lexically: "/srv/app/x" is within
// "/srv/app", "/srv/app2" is not, and everything absolute is within "/". An
// absolute path is never within a relative root or the other way round, and
// the empty string is within nothing. Within does not touch the file
// system: pass it Resolved paths to judge where a path really leads.
func Within(path, root string) bool {
	if path == "" || root == "" {
		return false
	}
	p, r := filepath.Clean(path), filepath.Clean(root)
	if filepath.IsAbs(p) != filepath.IsAbs(r) {
		return false
	}
	if p == r {
		return true
	}
	var rest string
	switch r {
	case "/":
		rest = p[1:]
	case ".":
		rest = p
	default:
		if !strings.HasPrefix(p, r+"/") {
			return false
		}
		rest = p[len(r)+1:]
	}
	// A relative root may start with "..": "../../x" is not within "..".
	return rest != ".." && !strings.HasPrefix(rest, "../")
}

// GlobBase returns the directory a glob pattern cannot match outside of: its
// leading components up to the first one holding a glob metacharacter
// (* ? [ { or \), cleaned. "/etc/**/*.conf" gives "/etc", "src/*.go" gives
// "src", "**/*.go" gives ".", "../../x*" gives "../..", and a pattern
// without metacharacters gives itself, cleaned. Each ".." after the first
// pattern component climbs one more level ("x*/../../etc/*" gives "../.."),
// as a pattern component may match no directory at all. The result is a
// path to pass to Normalize (it may start with ~).
func GlobBase(pattern string) string {
	parts := strings.Split(pattern, "/")
	cut := len(parts)
	for i, part := range parts {
		if strings.ContainsAny(part, globMeta) {
			cut = i
			break
		}
	}
	base := strings.Join(parts[:cut], "/")
	switch {
	case base == "" && strings.HasPrefix(pattern, "/"):
		base = "/"
	case base == "":
		base = "."
	}
	if cut < len(parts) {
		for _, part := range parts[cut+1:] {
			if part == ".." {
				base += "/.."
			}
		}
	}
	return filepath.Clean(base)
}

// ExpandHome expands a leading "~" or "~/" of a deny glob such as
// "~/.ssh/**" with home, an absolute directory. Any other glob, including
// "~user/…", and any glob when home is empty, is returned unchanged. The
// rest of the glob is kept byte for byte.
func ExpandHome(glob, home string) string {
	if home == "" || (glob != "~" && !strings.HasPrefix(glob, "~/")) {
		return glob
	}
	h := strings.TrimRight(home, "/")
	if glob == "~" {
		if h == "" {
			return "/"
		}
		return h
	}
	return h + glob[1:]
}
