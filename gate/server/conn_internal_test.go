package server

import (
	"runtime"
	"strings"
	"testing"
)

// TestAQueryRemembersToolUseIDsInFixedSpace: a tool_use_id has no length
// limit but the frame's, and a query remembers up to 1024 allowed ones
// and 1024 that ran: with the ids themselves kept, 1024 allows of
// 256 KiB ids held 256 MiB per query. Each now takes 16 bytes. The test
// measures the live heap, so it does not run in parallel with others.
func TestAQueryRemembersToolUseIDsInFixedSpace(t *testing.T) {
	q := &query{}
	live := func() uint64 {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	before := live()
	for i := range 256 {
		id := strings.Repeat(string(rune('a'+i%26)), 256<<10) + string(rune(i))
		q.authorize(id)
		if i%2 == 0 && !q.consume(id) {
			t.Fatalf("id %d was not authorized", i)
		}
	}
	grew := int64(live()) - int64(before)
	if len(q.authorized) != 128 || len(q.consumed) != 128 {
		t.Fatalf("%d authorized, %d consumed; want 128 each", len(q.authorized), len(q.consumed))
	}
	if grew > 1<<20 {
		t.Errorf("remembering 256 ids of 256 KiB grew the live heap by %d KiB, want under 1 MiB", grew>>10)
	}
	runtime.KeepAlive(q)
}
