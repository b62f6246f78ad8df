package docker

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/gatekeeper-ai/gatekeeper/internal/hostdirs"
	"github.com/gatekeeper-ai/gatekeeper/internal/pathglob"
)

// maxDepsEntries bounds the walk of a deps directory for deny-glob matches;
// a larger tree is refused rather than mounted unchecked.
const maxDepsEntries = 200_000

// checkDeps returns nil if dir may be bind-mounted read-only at /deps, or
// the reasons it may not. extra are further protected paths (the engine's
// socket, the sidecar user's home); the fixed ones are hostdirs.Protected.
// Deny globs are matched by internal/pathglob, the matcher the gate judges
// the host file tools with, so a glob means the same thing in both places.
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
	for _, p := range candidates {
		if err := hostdirs.Check(p, extra); err != nil {
			return err
		}
	}

	globs, err := pathglob.Compile(denyGlobs)
	if err != nil {
		return fmt.Errorf("deny globs: %w", err)
	}
	for _, p := range candidates {
		for a := p; a != "/"; a = filepath.Dir(a) {
			if m := globs.Matching(a); len(m) > 0 {
				return fmt.Errorf("deps dir %s lies within %s, which matches deny glob %q", dir, a, globs.Glob(m[0]))
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
			full := filepath.Join(base, rel)
			if m := globs.Matching(full); len(m) > 0 {
				return fmt.Errorf("deps dir %s contains %s, which matches deny glob %q", dir, full, globs.Glob(m[0]))
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
