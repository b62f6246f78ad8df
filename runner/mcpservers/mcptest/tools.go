// Package mcptest holds real MCP servers for tests, written with the
// official Go SDK: the same tools served over stdio (a program the test
// builds, see Build) and over streamable HTTP on loopback (HTTP). Code-mode
// tests of other packages use them too.
//
// Every server has these tools:
//   - records {page, size}: a page of the server's records (structured
//     output with an output schema; read-only, closed world);
//   - lookup {id}: one record by id (read-only, idempotent);
//   - delete_record {id}: a destructive tool (it deletes nothing);
//   - sleep {ms}: answers after ms milliseconds;
//   - hang {}: never answers (until the server stops);
//   - crash {}: the stdio server exits mid-call (status 3); the HTTP one
//     answers an error result, as it cannot exit;
//   - big {bytes}: a text result of that many bytes;
//   - fail {}: a tool error (isError true);
//   - secret_digest {name}: whether the environment variable (stdio) or
//     request header (HTTP) name is set, and the sha256 of its value,
//     never the value;
//   - pid {}: the server's process id;
//   - spawn {}: starts a child process (sleep) and returns its pid.
package mcptest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/gatekeeper-ai/gatekeeper/internal/digest"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Record is one of a test server's records: record i (from 1) is
// {ID: i, Name: "<server>-<i>", City: one of five cities in turn, Score: i*7%100}.
type Record struct {
	ID    int    `json:"id" jsonschema:"the record's id, from 1"`
	Name  string `json:"name"`
	City  string `json:"city"`
	Score int    `json:"score"`
}

// cities are the cities records are spread over, in turn.
var cities = []string{"Lisbon", "Oslo", "Kyoto", "Lima", "Accra"}

// MakeRecord returns record id of the server named name.
func MakeRecord(name string, id int) Record {
	return Record{ID: id, Name: fmt.Sprintf("%s-%d", name, id), City: cities[id%len(cities)], Score: id * 7 % 100}
}

// Options configure a test server.
type Options struct {
	// Name is the server's implementation name and the records' prefix.
	Name string
	// Records is how many records it holds.
	Records int
	// Exit ends the process (stdio: os.Exit); nil makes crash answer an
	// error result.
	Exit func(code int)
	// Stop ends hang calls (the HTTP server closes it at cleanup).
	Stop <-chan struct{}
	// Secret reads a secret by name for secret_digest.
	Secret func(req *mcp.CallToolRequest, name string) (string, bool)
}

type pageIn struct {
	Page int `json:"page" jsonschema:"the page, from 1"`
	Size int `json:"size" jsonschema:"records per page, 1 to 100"`
}

type pageOut struct {
	Records []Record `json:"records"`
	Page    int      `json:"page"`
	Total   int      `json:"total" jsonschema:"how many records there are"`
	More    bool     `json:"more" jsonschema:"whether a later page has records"`
}

type idIn struct {
	ID int `json:"id" jsonschema:"the record's id"`
}

type msIn struct {
	MS int `json:"ms" jsonschema:"milliseconds"`
}

type bytesIn struct {
	Bytes int `json:"bytes" jsonschema:"how many bytes of text to return"`
}

type nameIn struct {
	Name string `json:"name" jsonschema:"an environment variable or header name"`
}

type digestOut struct {
	Present bool   `json:"present"`
	SHA256  string `json:"sha256,omitempty"`
}

type pidOut struct {
	PID int `json:"pid"`
}

type empty struct{}

func ptr[T any](v T) *T { return &v }

// NewServer returns a server with every tool above.
func NewServer(o Options) *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: o.Name, Version: "1"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "records", Description: "Returns one page of the records.",
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true, OpenWorldHint: ptr(false), Title: "List records"}},
		func(_ context.Context, _ *mcp.CallToolRequest, in pageIn) (*mcp.CallToolResult, pageOut, error) {
			if in.Page < 1 || in.Size < 1 || in.Size > 100 {
				return nil, pageOut{}, fmt.Errorf("page must be at least 1 and size 1 to 100")
			}
			out := pageOut{Page: in.Page, Total: o.Records, Records: []Record{}}
			for id := (in.Page-1)*in.Size + 1; id <= min(in.Page*in.Size, o.Records); id++ {
				out.Records = append(out.Records, MakeRecord(o.Name, id))
			}
			out.More = in.Page*in.Size < o.Records
			return nil, out, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "lookup", Description: "Returns the record with this id.",
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true, IdempotentHint: true, OpenWorldHint: ptr(false)}},
		func(_ context.Context, _ *mcp.CallToolRequest, in idIn) (*mcp.CallToolResult, Record, error) {
			if in.ID < 1 || in.ID > o.Records {
				return nil, Record{}, fmt.Errorf("no record %d", in.ID)
			}
			return nil, MakeRecord(o.Name, in.ID), nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "delete_record", Description: "Deletes a record (in this test server, nothing is deleted).",
		Annotations: &mcp.ToolAnnotations{DestructiveHint: ptr(true), OpenWorldHint: ptr(false)}},
		func(_ context.Context, _ *mcp.CallToolRequest, in idIn) (*mcp.CallToolResult, any, error) {
			return text(fmt.Sprintf("deleted %d", in.ID)), nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "sleep", Description: "Answers after ms milliseconds."},
		func(ctx context.Context, _ *mcp.CallToolRequest, in msIn) (*mcp.CallToolResult, any, error) {
			select {
			case <-time.After(time.Duration(in.MS) * time.Millisecond):
			case <-ctx.Done():
			}
			return text("slept"), nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "hang", Description: "Never answers."},
		func(context.Context, *mcp.CallToolRequest, empty) (*mcp.CallToolResult, any, error) {
			<-o.Stop // the caller's cancellation is ignored on purpose
			return text("stopped"), nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "crash", Description: "Ends the server's process mid-call."},
		func(context.Context, *mcp.CallToolRequest, empty) (*mcp.CallToolResult, any, error) {
			if o.Exit == nil {
				return nil, nil, fmt.Errorf("this server cannot exit")
			}
			fmt.Fprintln(os.Stderr, "crash: exiting mid-call")
			o.Exit(3)
			return nil, nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "big", Description: "Returns bytes bytes of text."},
		func(_ context.Context, _ *mcp.CallToolRequest, in bytesIn) (*mcp.CallToolResult, any, error) {
			return text(strings.Repeat("x", max(in.Bytes, 0))), nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "fail", Description: "Always reports a tool error."},
		func(context.Context, *mcp.CallToolRequest, empty) (*mcp.CallToolResult, any, error) {
			return nil, nil, fmt.Errorf("this tool always fails")
		})
	mcp.AddTool(s, &mcp.Tool{Name: "secret_digest", Description: "Whether a secret is set, and its sha256."},
		func(_ context.Context, req *mcp.CallToolRequest, in nameIn) (*mcp.CallToolResult, digestOut, error) {
			v, ok := o.Secret(req, in.Name)
			if !ok {
				return nil, digestOut{}, nil
			}
			return nil, digestOut{Present: true, SHA256: Digest(v)}, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "pid", Description: "The server's process id."},
		func(context.Context, *mcp.CallToolRequest, empty) (*mcp.CallToolResult, pidOut, error) {
			return nil, pidOut{PID: os.Getpid()}, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "spawn", Description: "Starts a child process that sleeps, and returns its pid."},
		func(context.Context, *mcp.CallToolRequest, empty) (*mcp.CallToolResult, pidOut, error) {
			cmd := exec.Command("sleep", "1000")
			if err := cmd.Start(); err != nil {
				return nil, pidOut{}, err
			}
			go cmd.Wait()
			return nil, pidOut{PID: cmd.Process.Pid}, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "media", Description: "Returns one content item of each kind that is not text: MediaPNG as an image, MediaPDF as an embedded blob resource, a text resource and a resource link."},
		func(context.Context, *mcp.CallToolRequest, empty) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{
				&mcp.TextContent{Text: "the media of " + o.Name},
				&mcp.ImageContent{Data: MediaPNG, MIMEType: "image/png"},
				&mcp.EmbeddedResource{Resource: &mcp.ResourceContents{URI: "test://" + o.Name + "/report.pdf", MIMEType: "application/pdf", Blob: MediaPDF}},
				&mcp.EmbeddedResource{Resource: &mcp.ResourceContents{URI: "test://" + o.Name + "/notes", MIMEType: "text/plain", Text: "notes of " + o.Name}},
				&mcp.ResourceLink{URI: "https://files.example/" + o.Name + ".csv", Name: o.Name + ".csv", MIMEType: "text/csv"},
			}}, nil, nil
		})
	return s
}

// The bytes the media tool returns.
var (
	MediaPNG = []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR fake image")
	MediaPDF = []byte("%PDF-1.4\n% a fake report\n%%EOF\n")
)

// Digest is the hex sha256 that secret_digest reports for value.
func Digest(value string) string {
	return digest.SHA256([]byte(value))
}

func text(s string) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: s}}}
}
