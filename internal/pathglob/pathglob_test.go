package pathglob_test

import (
	"slices"
	"testing"

	"github.com/gatekeeper-ai/gatekeeper/internal/pathglob"
)

// TestMatch is the one table of what a deny or write-protect glob matches,
// for the gate and the /deps mount alike.
func TestMatch(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, glob, path string
		want             bool
	}{
		{"a ** glob matches a file at any depth", "**/.env", "/srv/app/a/b/.env", true},
		{"a ** glob matches at the root", "**/.env", "/.env", true},
		{"a ** glob does not match a longer name", "**/.env", "/srv/app/.envrc", false},
		{"a relative glob matches at any depth", ".env", "/srv/app/.env", true},
		{"a relative glob with a slash matches at any depth", "secrets/*.pem", "/srv/app/secrets/k.pem", true},
		{"a relative glob matches a whole name only", ".env", "/srv/app/x.env", false},
		{"a relative glob written with ./ is cleaned", "./.env", "/srv/.env", true},
		{"an absolute glob is anchored at the root", "/srv/*/secret", "/srv/app/secret", true},
		{"* does not cross a slash", "/srv/*/secret", "/srv/a/b/secret", false},
		{"** crosses slashes", "/root/.ssh/**", "/root/.ssh/a/b", true},
		{"a /** glob does not match the directory itself", "/root/.ssh/**", "/root/.ssh", false},
		{"a brace glob matches each alternative", "/srv/{a,b}/x", "/srv/b/x", true},
		{"a brace glob matches nothing else", "/srv/{a,b}/x", "/srv/c/x", false},
		{"a class matches one character", "/srv/[ab]?/y", "/srv/a1/y", true},
		{"a negated class", "/srv/[!ab]/y", "/srv/a/y", false},
		{"a glob with // and ./ is cleaned", "/home//u/./.ssh/", "/home/u/.ssh", true},
		{"upper case in the path is ignored", "**/.env", "/srv/app/.ENV", true},
		{"mixed case in a directory is ignored", "**/.git/config", "/srv/app/.GiT/CONFIG", true},
		{"upper case in the glob is ignored", "**/CLAUDE.md", "/srv/app/claude.md", true},
		{"a dotless i is an i", "**/.git", "/srv/app/.gıt", true},
		{"a long s is an s", "**/.ssh/**", "/root/.ſsh/id", true},
		{"a Kelvin sign is a k", "**/.kube/**", "/root/.\u212aube/config", true},
		{"letters that fold together are one letter", "/srv/ϕ", "/srv/Φ", true},
		{"a dotted capital I is an i", "**/.git", "/srv/app/.gİt", true},
		{"a ligature is its letters, as ext4 casefold folds it", "**/.gitconfig", "/srv/app/.gitconﬁg", true},
		{"a ligature in a directory is its letters", "**/.git/config", "/srv/app/.git/conﬁg", true},
		{"a sharp s is ss", "/root/.ssh/**", "/root/.ßh/id_rsa", true},
		{"a capital sharp s is two letters", "**/.bash_aliases", "/srv/.BASH_ALIAẞES", false},
		{"Cherokee letters fold in both directions", "/srv/\u13a0", "/srv/\uab70", true},
		{"a decomposed accent is the composed letter, as macOS opens it", "**/café/**", "/srv/cafe\u0301/menu", true},
		{"a composed accent matches a decomposed glob", "**/cafe\u0301", "/srv/CAFÉ", true},
		{"an accent makes another letter", "**/.env", "/srv/app/.énv", false},
		{"a zero-width non-joiner HFS+ ignores is ignored", "**/.git/config", "/srv/app/.g\u200cit/config", true},
		{"a byte order mark HFS+ ignores is ignored", "**/.claude/**", "/srv/app/.claude\ufeff/settings.json", true},
		{"a trailing dot NTFS ignores is ignored", "**/.git/config", "/srv/app/.git./config", true},
		{"a trailing space NTFS ignores is ignored", "**/.mcp.json", "/srv/app/.mcp.json ", true},
		{"an NTFS stream suffix is ignored", "**/.git/config", "/srv/app/.git/config::$DATA", true},
		{"a name that is only dots is kept", "**/...", "/srv/...", true},
		{"a stripped spelling does not hide the written one", "**/a.*", "/srv/a.", true},
		{"a different letter is a different name", "**/.env", "/srv/app/.enw", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s, err := pathglob.Compile([]string{tc.glob})
			if err != nil {
				t.Fatal(err)
			}
			if got := s.MatchOne(0, tc.path); got != tc.want {
				t.Errorf("glob %q, path %q: match %v, want %v", tc.glob, tc.path, got, tc.want)
			}
			if got := len(s.Matching(tc.path)) == 1; got != tc.want {
				t.Errorf("glob %q, path %q: Matching says %v, want %v", tc.glob, tc.path, got, tc.want)
			}
		})
	}
}

func TestCompileRefusesBadGlobs(t *testing.T) {
	t.Parallel()
	for _, g := range []string{"", "  ", "[unclosed", "/srv/{a,b"} {
		if _, err := pathglob.Compile([]string{"**/.env", g}); err == nil {
			t.Errorf("Compile(%q) succeeded; want an error", g)
		}
	}
}

func TestMatchingListsEveryMatchingGlobInOrder(t *testing.T) {
	t.Parallel()
	s, err := pathglob.Compile([]string{"/srv/**", "**/.env", "**/x", "/srv/app"})
	if err != nil {
		t.Fatal(err)
	}
	got := s.Matching("/srv/app/.env", "/srv/app")
	if want := []int{0, 1, 3}; !slices.Equal(got, want) {
		t.Errorf("Matching = %v, want %v", got, want)
	}
	if want := []string{"/srv/**", "**/.env", "**/x", "/srv/app"}; !slices.Equal(s.Globs(), want) {
		t.Errorf("Globs = %q, want %q", s.Globs(), want)
	}
}

func TestAnchor(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		".env": "**/.env", "./a//b/": "**/a/b", "**/x": "**/x", "**.pem": "**.pem", "/etc/*": "/etc/*", "/home//u/./.ssh/": "/home/u/.ssh",
	} {
		if got := pathglob.Anchor(in); got != want {
			t.Errorf("Anchor(%q) = %q, want %q", in, got, want)
		}
	}
}
