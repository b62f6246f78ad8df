package gate

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/gobwas/glob"
)

func TestDenyWithinStopsAtItsLimit(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for i := range 5 {
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprint(i)), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	m, err := glob.Compile("**/.env", '/')
	if err != nil {
		t.Fatal(err)
	}
	eff := &Effective{denyGlobs: []string{"**/.env"}, denyMatchers: []*glob.Pattern{m}}
	if _, err := denyWithin(eff, dir, true, nil, 5); err != nil {
		t.Errorf("5 entries under a limit of 5: %v", err)
	}
	if _, err := denyWithin(eff, dir, true, nil, 4); !errors.Is(err, errSearchTooLarge) {
		t.Errorf("5 entries over a limit of 4: %v; want errSearchTooLarge", err)
	}
}

func TestGlobCanMatchBelow(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		glob, dir string
		want      bool
	}{
		{"**/.env", "/srv/app", true},
		{"/home/a/.ssh/**", "/srv/app", false},
		{"/home/a/.*", "/home/a", true},
		{"/home/a/.*", "/home", true},
		{"/home/a/.*", "/home/ab", false},
		{"/srv/app/secret/*.pem", "/srv/app", true},
		{"/srv/*/secret", "/srv/app", true},
		{"/srv/app2/**", "/srv/app", false},
	} {
		if got := globCanMatchBelow(tt.glob, tt.dir); got != tt.want {
			t.Errorf("globCanMatchBelow(%q, %q) = %v; want %v", tt.glob, tt.dir, got, tt.want)
		}
	}
}
