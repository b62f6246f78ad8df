package main

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gatekeeper-ai/gatekeeper/gate/bundle"
)

func TestBundleBuild(t *testing.T) {
	t.Parallel()
	dir, good := writePolicy(t, cliPolicy)
	broken := filepath.Join(dir, "broken.yaml")
	if err := os.WriteFile(broken, []byte("version: 1\nworkspace_root: ./ws\ntools:\n  alow: [Read]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	priv, _ := bundleKeys(t, dir, "k1")
	cases := []struct {
		name string
		args []string
		want string // "" for success
	}{
		{"a good policy makes a bundle", []string{"--policy", good, "--revision", "r1", "--serial", "1"}, ""},
		{"a broken policy is refused with its line", []string{"--policy", broken, "--revision", "r1", "--serial", "1"}, "(broken.yaml):4"},
		{"a signing key without a key id is refused", []string{"--policy", good, "--signing-key", priv}, "--key-id"},
		{"a revision with a space is refused", []string{"--policy", good, "--revision", "a b", "--serial", "1"}, "revision"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			out := filepath.Join(t.TempDir(), "b.tar.gz")
			var stderr bytes.Buffer
			err := run(t.Context(), append([]string{"bundle", "build", "-o", out}, tc.args...), strings.NewReader(""), io.Discard, &stderr)
			if tc.want != "" {
				if err == nil || !strings.Contains(err.Error(), tc.want) {
					t.Fatalf("bundle build %v: err %v, want one containing %q", tc.args, err, tc.want)
				}
				if _, serr := os.Stat(out); serr == nil {
					t.Fatalf("bundle build %v wrote %s despite refusing", tc.args, out)
				}
				return
			}
			if err != nil {
				t.Fatalf("bundle build %v: %v\n%s", tc.args, err, stderr.String())
			}
			raw, err := os.ReadFile(out)
			if err != nil {
				t.Fatal(err)
			}
			c, err := bundle.Read(raw, nil)
			if err != nil || c.Revision != "r1" || c.Serial != 1 || string(c.Policy) != cliPolicy {
				t.Fatalf("the built bundle reads as %+v, %v; want r1, serial 1, the policy file's text", c, err)
			}
		})
	}
}
