package sandbox

import (
	"context"
	"net"
	"net/netip"

	"github.com/gatekeeper-ai/gatekeeper/runner/egress"
)

// Egress is what a platform needs of the egress proxy; *egress.Proxy
// satisfies it. The platform serves it on a listener networked sandboxes
// can reach (runner/docker: on each sandbox network's gateway;
// runner/kube: on Config.EgressAddr) and registers each networked
// sandbox's address for the length of its run.
type Egress interface {
	Serve(ctx context.Context, ln net.Listener) error
	Register(addr netip.Addr, reg egress.Registration) error
	Bind(addr netip.Addr, id egress.RunIdentity) error
	Unregister(addr netip.Addr)
}

// ProxyEnv is a networked sandbox's proxy environment for the proxy at
// url: upper and lower case, as tools differ in which they read, and an
// empty NO_PROXY so that nothing bypasses the proxy (nothing else is
// reachable anyway).
func ProxyEnv(url string) []string {
	return []string{"HTTP_PROXY=" + url, "HTTPS_PROXY=" + url, "http_proxy=" + url, "https_proxy=" + url, "NO_PROXY=", "no_proxy="}
}
