package soak

import (
	"strconv"
	"strings"
	"testing"
)

// dump is a debug=1 goroutine profile: two waits of warm containers, and
// after the faults three more blocked on the exit nobody read.
func dump(blocked int) string {
	var b strings.Builder
	b.WriteString("goroutine profile: total 9\n")
	b.WriteString("4 @ 0x1 0x2\n#\t0x10\tnet/http.(*persistConn).readLoop+0x5a\t/go/src/net/http/transport.go:2395\n\n")
	b.WriteString("2 @ 0x1 0x3\n#\t0x11\tio.ReadAtLeast+0x8e\t/go/src/io/io.go:335\n#\t0x12\tgithub.com/docker/docker/client.(*Client).ContainerWait.func1+0x12e\t/mod/client/container_wait.go:74\n\n")
	if blocked > 0 {
		b.WriteString(strconv.Itoa(blocked) + " @ 0x1 0x4\n#\t0x13\tgithub.com/docker/docker/client.(*Client).ContainerWait.func1+0x32b\t/mod/client/container_wait.go:92\n\n")
	}
	return b.String()
}

func TestGoroutineGroupsSayWhichGoroutinesGrew(t *testing.T) {
	t.Parallel()
	before, after := goroutineGroups(dump(0)), goroutineGroups(dump(3))
	const wait74 = "github.com/docker/docker/client.(*Client).ContainerWait.func1 (container_wait.go:74)"
	const wait92 = "github.com/docker/docker/client.(*Client).ContainerWait.func1 (container_wait.go:92)"
	if before["net/http.(*persistConn).readLoop (transport.go:2395)"] != 4 || before["io.ReadAtLeast (io.go:335)"] != 2 || len(before) != 2 {
		t.Errorf("baseline groups %v", before)
	}
	if after[wait92] != 3 || after[wait74] != 0 {
		t.Errorf("groups after %v, want 3 at container_wait.go:92", after)
	}
	if got, want := groupChange(before, after), "+3 "+wait92; got != want {
		t.Errorf("change %q, want %q", got, want)
	}
	if got, want := groupChange(after, before), "-3 "+wait92; got != want {
		t.Errorf("change back %q, want %q", got, want)
	}
	if got := groupChange(before, before); got != "" {
		t.Errorf("no change reads %q", got)
	}
	if got := countedGroups(after); !strings.HasPrefix(got, "4 net/http") || !strings.Contains(got, "3 "+wait92) {
		t.Errorf("counted %q", got)
	}
}
