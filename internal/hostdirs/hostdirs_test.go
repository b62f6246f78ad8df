package hostdirs_test

import (
	"strings"
	"testing"

	"github.com/gatekeeper-ai/gatekeeper/internal/hostdirs"
)

func TestCheck(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, dir string
		extra     []string
		want      string // "" for accepted, else a part of the error
	}{
		{"a library directory is accepted", "/opt/libs", nil, ""},
		{"a directory beside a protected one is accepted", "/homework", nil, ""},
		{"the host root is refused", "/", nil, "host root"},
		{"/etc is refused", "/etc", nil, "within protected path /etc"},
		{"a directory inside /etc is refused", "/etc/ssl", nil, "within protected path /etc"},
		{"a home directory is refused", "/home/alice", nil, "within protected path /home"},
		{"a directory inside a home directory is refused", "/home/alice/venv", nil, "within protected path /home"},
		{"/var, holding /var/run, is refused", "/var", nil, "contains protected path /var/run"},
		{"the containerd state is refused", "/var/lib/containerd/x", nil, "within protected path /var/lib/containerd"},
		{"an extra path is refused", "/srv/engine.sock", []string{"/srv/engine.sock"}, "within protected path /srv/engine.sock"},
		{"a directory holding an extra path is refused", "/srv", []string{"/srv/engine.sock"}, "contains protected path /srv/engine.sock"},
		{"an unclean spelling is cleaned first", "/opt/../etc/", nil, "within protected path /etc"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			err := hostdirs.Check(tc.dir, tc.extra)
			if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
				t.Errorf("Check(%q) = %v, want %q", tc.dir, err, tc.want)
			}
		})
	}
}
