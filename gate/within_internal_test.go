package gate

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/gatekeeper-ai/gatekeeper/internal/pathglob"
)

func TestDenyWithinStopsAtItsLimit(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for i := range 5 {
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprint(i)), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	deny, err := pathglob.Compile([]string{"**/.env"})
	if err != nil {
		t.Fatal(err)
	}
	eff := &Effective{deny: deny}
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
		{"/HOME/A/.ssh/**", "/home/a", true},
		{"/home/a/.ssh/**", "/Home/A", true},
		{"/srv/app./secret", "/srv/app", true},
	} {
		if got := globCanMatchBelow(tt.glob, tt.dir); got != tt.want {
			t.Errorf("globCanMatchBelow(%q, %q) = %v; want %v", tt.glob, tt.dir, got, tt.want)
		}
	}
}

// TestSplitGrepGlob pins the split to Claude Code's (see splitGrepGlob):
// JavaScript white space, then commas outside a piece holding braces.
func TestSplitGrepGlob(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   string
		want []string
	}{
		{"*.py", []string{"*.py"}},
		{"*.py,.env", []string{"*.py", ".env"}},
		{"*.py .env", []string{"*.py", ".env"}},
		{"*.py\t.env\n*.md", []string{"*.py", ".env", "*.md"}},
		{"*.py,,.env,", []string{"*.py", ".env"}},
		{"  *.py  ", []string{"*.py"}},
		{"*.{py,md}", []string{"*.{py,md}"}},
		{"*.{py,md},.env", []string{"*.{py,md},.env"}},
		{"*.{py,md} .env", []string{"*.{py,md}", ".env"}},
		{"*.{py,.env", []string{"*.{py", ".env"}},
		{"*.py\u00a0.env", []string{"*.py", ".env"}},
		{"*.py\u3000.env", []string{"*.py", ".env"}},
		{"*.py\ufeff.env", []string{"*.py", ".env"}},
		{"*.py\u2028.env", []string{"*.py", ".env"}},
		{"*.py\u0085.env", []string{"*.py\u0085.env"}},
		{"*.py\u200b.env", []string{"*.py\u200b.env"}},
		{",", nil},
		{"", nil},
	}
	for _, tc := range tests {
		if got := splitGrepGlob(tc.in); !slices.Equal(got, tc.want) {
			t.Errorf("splitGrepGlob(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestGrepSearched(t *testing.T) {
	t.Parallel()
	tests := []struct {
		glob     string
		searched []string // base names searched
		skipped  []string // base names not searched
		unknown  bool     // every file assumed searched
	}{
		{glob: "*.py", searched: []string{"a.py"}, skipped: []string{".env", "a.md"}},
		{glob: "*.py,.env", searched: []string{"a.py", ".env"}, skipped: []string{"a.md"}},
		{glob: "*.py *.md", searched: []string{"a.py", "a.md"}, skipped: []string{".env"}},
		{glob: "*.py,!.env", unknown: true},
		{glob: "*.{py,md}", unknown: true},
		{glob: "src/*.py", unknown: true},
		{glob: "", unknown: true},
	}
	for _, tc := range tests {
		f := grepSearched(tc.glob)
		if (f == nil) != tc.unknown {
			t.Errorf("grepSearched(%q) unknown = %v, want %v", tc.glob, f == nil, tc.unknown)
			continue
		}
		for _, n := range tc.searched {
			if !f(n) {
				t.Errorf("grepSearched(%q) skips %q, which ripgrep searches", tc.glob, n)
			}
		}
		for _, n := range tc.skipped {
			if f(n) {
				t.Errorf("grepSearched(%q) searches %q, which ripgrep skips", tc.glob, n)
			}
		}
	}
}
