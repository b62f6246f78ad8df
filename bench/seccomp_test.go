package bench

import (
	"slices"
	"testing"
)

func TestUnconfinedTakesOnlyTheProfileAway(t *testing.T) {
	t.Parallel()
	args := []string{"run", "--rm", "-i", "--runtime", "runsc", "--security-opt", "no-new-privileges", "--entrypoint", "/usr/bin/env", "img", "-i", "PATH=/bin"}
	orig := slices.Clone(args)
	got := unconfined(args)
	want := []string{"run", "--rm", "-i", "--runtime", "runsc", "--security-opt", "no-new-privileges", "--security-opt", "seccomp=unconfined", "--entrypoint", "/usr/bin/env", "img", "-i", "PATH=/bin"}
	if !slices.Equal(got, want) {
		t.Errorf("unconfined = %q, want %q", got, want)
	}
	if !slices.Equal(args, orig) {
		t.Errorf("unconfined changed its argument to %q", args)
	}
	withProfile := []string{"run", "--runtime", "runsc", "--security-opt", "no-new-privileges", "--security-opt", "seccomp=/tmp/p.json", "--entrypoint", "/usr/bin/env", "img"}
	want = []string{"run", "--runtime", "runsc", "--security-opt", "no-new-privileges", "--security-opt", "seccomp=unconfined", "--entrypoint", "/usr/bin/env", "img"}
	if got := unconfined(withProfile); !slices.Equal(got, want) {
		t.Errorf("unconfined = %q, want the profile replaced: %q", got, want)
	}
}
