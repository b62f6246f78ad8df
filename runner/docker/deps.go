package docker

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
)

// maxDepsEntries bounds the walk of a deps directory for deny-glob matches;
// a larger tree is refused rather than mounted unchecked.
const maxDepsEntries = 200_000

// protectedPaths are host paths a deps mount may neither be, lie inside,
// nor contain. Home directories are covered by /root and /home.
var protectedPaths = []string{
	"/etc", "/proc", "/sys", "/dev", "/boot",
	"/run", "/var/run",
	"/root", "/home",
	"/var/lib/docker", "/var/lib/containerd",
}

// checkDeps returns nil if dir may be bind-mounted read-only at /deps, or
// the reasons it may not. extra are further protected paths (the engine's
// socket, the sidecar user's home).
func checkDeps(dir string, denyGlobs, extra []string) error {
	if !filepath.IsAbs(dir) {
		return fmt.Errorf("deps dir %q is not an absolute path", dir)
	}
	clean := filepath.Clean(dir)
	fi, err := os.Stat(clean)
	if err != nil {
		return fmt.Errorf("deps dir: %w", err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("deps dir %s is not a directory", clean)
	}
	resolved, err := filepath.EvalSymlinks(clean)
	if err != nil {
		return fmt.Errorf("deps dir: %w", err)
	}
	candidates := []string{clean}
	if resolved != clean {
		candidates = append(candidates, resolved)
	}
	protected := append(append([]string{}, protectedPaths...), extra...)
	for _, p := range candidates {
		if p == "/" {
			return fmt.Errorf("deps dir %s is the host root", dir)
		}
		for _, q := range protected {
			q = filepath.Clean(q)
			switch {
			case within(p, q):
				return fmt.Errorf("deps dir %s lies within protected path %s", dir, q)
			case within(q, p):
				return fmt.Errorf("deps dir %s contains protected path %s", dir, q)
			}
		}
	}

	globs, err := compileGlobs(denyGlobs)
	if err != nil {
		return err
	}
	for _, p := range candidates {
		comps := splitPath(p)
		for _, g := range globs {
			for i := 1; i <= len(comps); i++ {
				if g.match(comps[:i]) {
					return fmt.Errorf("deps dir %s lies within %s, which matches deny glob %q", dir, "/"+strings.Join(comps[:i], "/"), g.text)
				}
			}
		}
	}
	// A path below dir matching a glob would be exposed too, and so would a
	// Unix socket (a daemon's control socket): walk the tree, without
	// following symlinks (they resolve inside the container).
	n := 0
	walkErr := filepath.WalkDir(resolved, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if n++; n > maxDepsEntries {
			return fmt.Errorf("deps dir %s has more than %d entries to check against deny globs", dir, maxDepsEntries)
		}
		if p == resolved {
			return nil
		}
		if d.Type()&fs.ModeSocket != 0 {
			return fmt.Errorf("deps dir %s contains the socket %s", dir, p)
		}
		rel := strings.TrimPrefix(p, resolved+"/")
		for _, base := range candidates {
			comps := splitPath(filepath.Join(base, rel))
			for _, g := range globs {
				if g.match(comps) {
					return fmt.Errorf("deps dir %s contains %s, which matches deny glob %q", dir, filepath.Join(base, rel), g.text)
				}
			}
		}
		return nil
	})
	if walkErr != nil {
		var pe *fs.PathError
		if errors.As(walkErr, &pe) {
			return fmt.Errorf("deps dir %s cannot be checked against deny globs: %w", dir, walkErr)
		}
		return walkErr
	}
	return nil
}

// within reports whether p is q or lies below q.
func within(p, q string) bool {
	return p == q || q == "/" || strings.HasPrefix(p, q+"/")
}

func splitPath(p string) []string {
	p = strings.Trim(filepath.ToSlash(p), "/")
	if p == "" {
		return nil
	}
	return strings.Split(p, "/")
}

type glob struct {
	text  string
	comps []string
}

// compileGlobs splits deny globs into path components. An absolute glob is
// anchored at the root; a relative one ("**/.env", ".env") matches at any
// depth. "**" matches zero or more components; other components use
// path.Match syntax. A leading "~/" is expanded to the home directory.
func compileGlobs(globs []string) ([]glob, error) {
	out := make([]glob, 0, len(globs))
	for _, text := range globs {
		g := text
		if g == "~" || strings.HasPrefix(g, "~/") {
			home, err := os.UserHomeDir()
			if err != nil {
				return nil, fmt.Errorf("deny glob %q: %w", text, err)
			}
			g = home + strings.TrimPrefix(g, "~")
		}
		comps := splitPath(path.Clean(g)) // "/home//u/./.ssh" denies /home/u/.ssh
		if len(comps) == 0 || g == "" {
			return nil, fmt.Errorf("deny glob %q is empty", text)
		}
		if !strings.HasPrefix(g, "/") && comps[0] != "**" {
			comps = append([]string{"**"}, comps...)
		}
		for _, c := range comps {
			if _, err := path.Match(c, ""); err != nil {
				return nil, fmt.Errorf("deny glob %q: %w", text, err)
			}
		}
		out = append(out, glob{text: text, comps: comps})
	}
	return out, nil
}

func (g glob) match(name []string) bool { return matchComps(g.comps, name) }

func matchComps(pattern, name []string) bool {
	for len(pattern) > 0 {
		if pattern[0] == "**" {
			for len(pattern) > 0 && pattern[0] == "**" {
				pattern = pattern[1:]
			}
			if len(pattern) == 0 {
				return true
			}
			for i := 0; i <= len(name); i++ {
				if matchComps(pattern, name[i:]) {
					return true
				}
			}
			return false
		}
		if len(name) == 0 {
			return false
		}
		if ok, _ := path.Match(pattern[0], name[0]); !ok {
			return false
		}
		pattern, name = pattern[1:], name[1:]
	}
	return len(name) == 0
}
