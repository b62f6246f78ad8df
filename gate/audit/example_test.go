package audit_test

import (
	"encoding/json"
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

// A rotated log is read back in order, across its closed (and compressed)
// files, with Files and Lines; this is how a backfill reads what was
// written before it started listening for new records.
func ExampleLines() {
	dir, err := os.MkdirTemp("", "audit")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "audit.jsonl")

	// A tiny MaxBytes rotates before every record but the first.
	l, err := audit.Open(path, audit.Options{MaxBytes: 10, Compress: true})
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, tool := range []string{"Read", "Grep", "Bash"} {
		if err := l.Write(audit.Record{Kind: audit.KindDecision, Tool: tool}); err != nil {
			fmt.Println("deny:", err)
		}
	}
	l.Close()

	files, err := audit.Files(path)
	if err != nil {
		fmt.Println(err)
		return
	}
	for line, err := range audit.Lines(files) {
		if err != nil {
			fmt.Println(err)
			return
		}
		var rec audit.Record
		if err := json.Unmarshal(line.Text, &rec); err != nil {
			fmt.Println(err)
			return
		}
		// A rotate line names the file before; a decision, its tool.
		fmt.Println(filepath.Base(line.File.Path), line.Number, rec.Seq, rec.Kind, rec.Tool+rec.PrevFile)
	}
	rep, err := audit.VerifySet(files, audit.VerifyOptions{})
	fmt.Println(len(rep.Files), rep.Lines, err)
	// Output:
	// audit.jsonl.000000000001.gz 1 1 decision Read
	// audit.jsonl.000000000002.gz 1 2 rotate audit.jsonl.000000000001
	// audit.jsonl.000000000002.gz 2 3 decision Grep
	// audit.jsonl 1 4 rotate audit.jsonl.000000000002
	// audit.jsonl 2 5 decision Bash
	// 3 5 <nil>
}
