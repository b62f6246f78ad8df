package sockdir_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gatekeeper-ai/gatekeeper/internal/sockdir"
)

func TestCheck(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatalf("this test makes a directory of another user and needs root (uid %d)", os.Geteuid())
	}
	base := t.TempDir()
	mk := func(name string, mode os.FileMode, uid int) string {
		p := filepath.Join(base, name)
		if err := os.Mkdir(p, mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(p, uid, uid); err != nil {
			t.Fatal(err)
		}
		return p
	}
	theirs := mk("theirs", 0o700, 65534)
	link := filepath.Join(base, "link")
	if err := os.Symlink(theirs, link); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, dir, want string // want: "" accepted, else a part of the error
	}{
		{"this user's private directory", mk("mine", 0o700, os.Geteuid()), ""},
		{"root's directory writable by all, as a Pod's emptyDir", mk("emptydir", 0o777, 0), ""},
		{"another user's directory", theirs, "belongs to uid 65534"},
		{"a link to another user's directory", link, "belongs to uid 65534"},
		{"a missing directory", filepath.Join(base, "missing"), "no such file"},
	}
	for _, tc := range tests {
		err := sockdir.Check(tc.dir)
		if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%s: Check(%s) = %v, want %q", tc.name, tc.dir, err, tc.want)
		}
	}
}
