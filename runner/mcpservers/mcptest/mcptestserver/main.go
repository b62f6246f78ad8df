// Command mcptestserver is mcptest's server for tests and walkthroughs: it
// serves the tools of mcptest.NewServer on stdin/stdout, or, with -listen,
// over streamable HTTP on that address, printing "URL=http://ADDR/mcp" on
// stdout once it listens. With -wait-for FILE it answers nothing until FILE
// exists: a server that is slow to start, for as long as its test wants.
// With -calls-log FILE it appends one JSON line to FILE for every
// tools/call it receives, {"tool": ..., "arguments": ...}, before it runs
// the tool: what reached the server, by the server's own account.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/gatekeeper-ai/gatekeeper/runner/mcpservers/mcptest"
)

func main() {
	name := flag.String("name", "records", "the server's name, and its records' prefix")
	records := flag.Int("records", 500, "how many records it holds")
	listen := flag.String("listen", "", "serve streamable HTTP on this address (e.g. 127.0.0.1:0) instead of stdio")
	waitFor := flag.String("wait-for", "", "start serving only once this file exists: a server slow to start, released by the test that made it")
	callsLog := flag.String("calls-log", "", "append a JSON line to this file for every tools/call received")
	flag.Parse()
	if *waitFor != "" {
		for {
			if _, err := os.Stat(*waitFor); err == nil {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	o := mcptest.Options{
		Name:    *name,
		Records: *records,
		Exit:    os.Exit,
		Stop:    make(chan struct{}), // hang until the process ends
		Secret: func(_ *mcp.CallToolRequest, name string) (string, bool) {
			return os.LookupEnv(name)
		},
	}
	if *listen == "" {
		s := mcptest.NewServer(o)
		logCalls(s, *callsLog)
		if err := s.Run(context.Background(), &mcp.StdioTransport{}); err != nil {
			log.Fatal(err)
		}
		return
	}
	o.Exit = nil // an HTTP server answers crash with an error result, as mcptest.HTTP's does
	o.Secret = func(req *mcp.CallToolRequest, name string) (string, bool) {
		if req.Extra == nil || req.Extra.Header == nil || len(req.Extra.Header.Values(name)) == 0 {
			return "", false
		}
		return req.Extra.Header.Values(name)[0], true
	}
	s := mcptest.NewServer(o)
	logCalls(s, *callsLog)
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("URL=http://%s/mcp\n", ln.Addr())
	mux := http.NewServeMux()
	mux.Handle("/mcp", mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil))
	log.Fatal(http.Serve(ln, mux))
}

// logCalls makes s append a line to path for every tools/call it
// receives; nothing when path is "".
func logCalls(s *mcp.Server, path string) {
	if path == "" {
		return
	}
	var mu sync.Mutex
	s.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if call, ok := req.(*mcp.CallToolRequest); ok && method == "tools/call" {
				line, _ := json.Marshal(map[string]any{"tool": call.Params.Name, "arguments": call.Params.Arguments})
				mu.Lock()
				f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
				if err == nil {
					_, err = f.Write(append(line, '\n'))
					f.Close()
				}
				mu.Unlock()
				if err != nil {
					log.Fatalf("calls-log: %v", err)
				}
			}
			return next(ctx, method, req)
		}
	})
}
