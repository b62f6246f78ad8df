//go:build unix

package claudecode

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSecurePathRefusesWhatAnotherUserCanReplace checks real files, owned
// and moded as each case says (the test runs as root, as install does):
// sudo's secure-path rule, the binary and every directory above it, the
// path as given and the path its links lead to.
func TestSecurePathRefusesWhatAnotherUserCanReplace(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Fatal("this test makes files of other users: run it as root (CI does)")
	}
	const nobody = 65534
	base := t.TempDir()
	// shared stands for a directory such as /tmp, writable by everyone and
	// sticky; made here so the test does not depend on where TMPDIR is.
	shared := stickyDir(t, base)
	mk := func(t *testing.T, rel string, mode os.FileMode, uid int) string {
		t.Helper()
		p := filepath.Join(base, rel)
		must(t, os.MkdirAll(filepath.Dir(p), 0o755))
		must(t, os.WriteFile(p, []byte("#!/bin/sh\n"), mode))
		must(t, os.Chmod(p, mode))
		must(t, os.Chown(p, uid, 0))
		return p
	}
	tests := []struct {
		name string
		path func(t *testing.T) string
		// want are texts the problems must hold; nil means none at all.
		want []string
	}{
		{"root's /usr/bin/env is safe", func(*testing.T) string { return "/usr/bin/env" }, nil},
		{"a root-owned link chain through /usr/bin is safe", func(t *testing.T) string {
			// /bin is a link to usr/bin on Debian 12; either way every part is root's.
			return "/bin/sh"
		}, nil},
		{"a binary in a user's checkout", func(t *testing.T) string { return mk(t, "home/u/src/gatekeeper/bin/gatekeeper", 0o755, nobody) },
			[]string{"owned by uid 65534, not root"}},
		{"a root binary below a world-writable sticky directory", func(t *testing.T) string {
			return mk(t, filepath.Join(filepath.Base(shared), "rootbin/gatekeeper"), 0o755, 0)
		}, []string{shared + " is writable by group and others (mode 0777, sticky)"}},
		{"a group-writable binary", func(t *testing.T) string { return mk(t, "gw/gatekeeper", 0o775, 0) },
			[]string{"gatekeeper is writable by group (mode 0775)"}},
		{"a world-writable binary", func(t *testing.T) string { return mk(t, "ow/gatekeeper", 0o757, 0) },
			[]string{"gatekeeper is writable by others (mode 0757)"}},
		{"a binary in a group-writable directory", func(t *testing.T) string {
			p := mk(t, "gdir/bin/gatekeeper", 0o755, 0)
			must(t, os.Chmod(filepath.Dir(p), 0o775))
			return p
		}, []string{"gdir/bin is writable by group (mode 0775)"}},
		{"a binary in a directory another user owns", func(t *testing.T) string {
			p := mk(t, "udir/bin/gatekeeper", 0o755, 0)
			must(t, os.Chown(filepath.Dir(p), nobody, 0))
			return p
		}, []string{"udir/bin is owned by uid 65534"}},
		{"a link in a user's directory to root's binary", func(t *testing.T) string {
			dir := filepath.Join(base, "ulink")
			must(t, os.MkdirAll(dir, 0o755))
			must(t, os.Chown(dir, nobody, 0))
			link := filepath.Join(dir, "gatekeeper")
			must(t, os.Symlink("/usr/bin/env", link))
			return link
		}, []string{"ulink is owned by uid 65534"}},
		{"a root link to a user's binary", func(t *testing.T) string {
			target := mk(t, "home/v/gatekeeper", 0o755, nobody)
			link := filepath.Join(base, "rlink", "gatekeeper")
			must(t, os.MkdirAll(filepath.Dir(link), 0o755))
			must(t, os.Symlink(target, link))
			return link
		}, []string{"home/v/gatekeeper is owned by uid 65534"}},
		{"a missing binary", func(*testing.T) string { return filepath.Join(base, "none", "gatekeeper") }, []string{"cannot be resolved"}},
		{"a relative path", func(*testing.T) string { return "bin/gatekeeper" }, []string{"not an absolute path"}},
		{"a directory", func(*testing.T) string { return "/usr/bin" }, []string{"/usr/bin is not a regular file"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := SecurePath(tc.path(t))
			if tc.want == nil {
				if len(got) != 0 {
					t.Fatalf("problems %q, want none", got)
				}
				return
			}
			all := strings.Join(got, "\n")
			for _, w := range tc.want {
				if !strings.Contains(all, w) {
					t.Errorf("problems %q do not say %q", got, w)
				}
			}
		})
	}
}

// TestInstallRefusesAnInsecureBinaryUnlessForced: a binary another user
// can replace is refused with the reasons, nothing is written, and --force
// installs it anyway; --copy-binary copies it into the directory, names the
// copy, and uninstall removes it.
func TestInstallRefusesAnInsecureBinaryUnlessForced(t *testing.T) {
	t.Parallel()
	base := stickyDir(t, t.TempDir())
	bin := filepath.Join(base, "bin", "gatekeeper")
	must(t, os.MkdirAll(filepath.Dir(bin), 0o755))
	must(t, os.WriteFile(bin, []byte("#!/bin/sh\necho gk\n"), 0o755))
	if os.Geteuid() == 0 {
		must(t, os.Chown(bin, 65534, 0))
	}
	dir := filepath.Join(base, "claude-code")
	o := options(dir)
	o.Gatekeeper = bin
	_, err := Install(o, false)
	if !errors.Is(err, ErrInsecure) || !strings.Contains(err.Error(), bin) || !strings.Contains(err.Error(), "--force installs anyway") {
		t.Fatalf("Install of a user's binary: %v, want ErrInsecure naming it", err)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a refused install wrote %s: %v", dir, err)
	}
	if _, err := Install(o, true); err != nil {
		t.Fatalf("--force: %v", err)
	}
	if _, err := Uninstall(dir, false); err != nil {
		t.Fatal(err)
	}

	// The copy lands in dir, which is below a world-writable directory:
	// refused for that, installed with force.
	o = options(dir)
	o.CopyFrom = bin
	if _, err := Install(o, false); !errors.Is(err, ErrInsecure) || !strings.Contains(err.Error(), base+" is writable by group and others") {
		t.Fatalf("a copy into a directory below the world-writable %s: %v, want ErrInsecure naming it", base, err)
	}
	if _, err := Install(o, true); err != nil {
		t.Fatal(err)
	}
	copied := filepath.Join(dir, BinaryFile)
	fi, err := os.Stat(copied)
	if err != nil || fi.Mode().Perm() != 0o755 {
		t.Fatalf("the copy: %v %v", fi, err)
	}
	if settings, _ := os.ReadFile(filepath.Join(dir, SettingsFile)); !strings.Contains(string(settings), `"command": "`+copied+`"`) {
		t.Errorf("the settings do not name the copy %s:\n%s", copied, settings)
	}
	paths, err := InstalledPaths(dir)
	if err != nil || !strings.Contains(strings.Join(paths, " "), copied) {
		t.Errorf("InstalledPaths = %v, %v; want the copy", paths, err)
	}
	if _, err := Uninstall(dir, false); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("uninstall left %s: %v", dir, err)
	}
}

// stickyDir makes a directory in parent that everyone may write, with the
// sticky bit, as /tmp is; Go's FileMode spells the bit os.ModeSticky (an
// octal 01000 would be ignored).
func stickyDir(t *testing.T, parent string) string {
	t.Helper()
	d := filepath.Join(parent, "shared")
	must(t, os.Mkdir(d, 0o755))
	must(t, os.Chmod(d, os.ModeSticky|0o777))
	fi, err := os.Stat(d)
	must(t, err)
	if fi.Mode()&os.ModeSticky == 0 || fi.Mode().Perm() != 0o777 {
		t.Fatalf("%s has mode %v, want a sticky 0777", d, fi.Mode())
	}
	return d
}
