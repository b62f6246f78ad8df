package egress_test

import (
	"context"
	"log"
	"net"
	"net/netip"

	"github.com/gatekeeper-ai/gatekeeper/runner"
	"github.com/gatekeeper-ai/gatekeeper/runner/egress"
)

// logAuditor prints events; a real one writes the audit log.
type logAuditor struct{}

func (logAuditor) Egress(ev egress.Event) error {
	log.Printf("egress %s %s:%d %s %s", ev.RunID, ev.Host, ev.Port, ev.Decision, ev.Rule)
	return nil
}

// ExampleProxy shows the lifecycle the Docker backend follows: one proxy
// for the process, one registration per sandbox for the length of its run.
func ExampleProxy() {
	p, err := egress.New(egress.Config{Auditor: logAuditor{}})
	if err != nil {
		log.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0") // in production: the proxy's address on the internal network
	if err != nil {
		log.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Serve(ctx, ln) }()

	sandboxIP := netip.MustParseAddr("172.30.0.2")
	err = p.Register(sandboxIP, egress.Registration{Run: egress.RunIdentity{RunID: "run-1", QueryID: "q-1"}, Network: runner.Network{
		Enabled: true,
		Allow:   []string{"pypi.org", "files.pythonhosted.org", "*.github.com:443"},
	}})
	if err != nil {
		log.Fatal(err)
	}
	// ... run the container with HTTP_PROXY/HTTPS_PROXY=http://<ln address> ...
	p.Unregister(sandboxIP)

	cancel()
	if err := <-done; err != nil {
		log.Fatal(err)
	}
}
