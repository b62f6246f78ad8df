package audit_test

import (
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/gatekeeper-ai/gatekeeper/gate/audit"
)

func Example() {
	dir, err := os.MkdirTemp("", "audit")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "audit.log")

	clock := func() time.Time { return time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC) }
	l, err := audit.Open(path, audit.Options{Now: clock})
	if err != nil {
		fmt.Println(err)
		return
	}
	// Write before replying; on error, deny.
	err = l.Write(audit.Record{
		Kind:      audit.KindDecision,
		Tool:      "WebFetch",
		Decision:  "allow",
		Rule:      "web.allowlist",
		ToolInput: map[string]any{"url": "https://example.com", "headers": map[string]any{"Authorization": "Bearer s3cr3t"}},
	})
	if err != nil {
		fmt.Println("deny:", err)
	}
	if err := l.Close(); err != nil {
		fmt.Println(err)
	}

	data, _ := os.ReadFile(path)
	fmt.Print(string(data))
	rep, err := audit.VerifyFile(path)
	fmt.Println(rep.Lines, err)
	// Output:
	// {"seq":1,"time":"2026-05-01T12:00:00Z","prev":"0000000000000000000000000000000000000000000000000000000000000000","kind":"decision","tool":"WebFetch","decision":"allow","rule":"web.allowlist","tool_input":{"headers":{"Authorization":"***"},"url":"https://example.com"}}
	// 1 <nil>
}
