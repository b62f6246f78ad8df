// Command mcptestserver is mcptest's server for tests and walkthroughs: it
// serves the tools of mcptest.NewServer on stdin/stdout, or, with -listen,
// over streamable HTTP on that address, printing "URL=http://ADDR/mcp" on
// stdout once it listens. With -wait-for FILE it answers nothing until FILE
// exists: a server that is slow to start, for as long as its test wants.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/gatekeeper-ai/gatekeeper/runner/mcpservers/mcptest"
)

func main() {
	name := flag.String("name", "records", "the server's name, and its records' prefix")
	records := flag.Int("records", 500, "how many records it holds")
	listen := flag.String("listen", "", "serve streamable HTTP on this address (e.g. 127.0.0.1:0) instead of stdio")
	waitFor := flag.String("wait-for", "", "start serving only once this file exists: a server slow to start, released by the test that made it")
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
		if err := mcptest.NewServer(o).Run(context.Background(), &mcp.StdioTransport{}); err != nil {
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
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("URL=http://%s/mcp\n", ln.Addr())
	mux := http.NewServeMux()
	mux.Handle("/mcp", mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil))
	log.Fatal(http.Serve(ln, mux))
}
