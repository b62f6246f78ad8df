// Command mcptestserver is mcptest's server over stdio, for tests: it
// serves the tools of mcptest.NewServer on stdin/stdout.
package main

import (
	"context"
	"flag"
	"log"
	"os"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/gatekeeper-ai/gatekeeper/runner/mcpservers/mcptest"
)

func main() {
	name := flag.String("name", "records", "the server's name, and its records' prefix")
	records := flag.Int("records", 500, "how many records it holds")
	flag.Parse()
	s := mcptest.NewServer(mcptest.Options{
		Name:    *name,
		Records: *records,
		Exit:    os.Exit,
		Stop:    make(chan struct{}), // hang until the process ends
		Secret: func(_ *mcp.CallToolRequest, name string) (string, bool) {
			return os.LookupEnv(name)
		},
	})
	if err := s.Run(context.Background(), &mcp.StdioTransport{}); err != nil {
		log.Fatal(err)
	}
}
