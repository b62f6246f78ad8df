package docker

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"regexp"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/network"

	"github.com/gatekeeper-ai/gatekeeper/runner"
	"github.com/gatekeeper-ai/gatekeeper/runner/egress"
	"github.com/gatekeeper-ai/gatekeeper/runner/sandbox"
)

// Network labels and options.
const (
	// LabelNetworkID carries the network's short id on the networks a
	// Runner creates (besides the instance, run and query labels).
	LabelNetworkID = "gatekeeper.net_id"

	optBridgeName = "com.docker.network.bridge.name"
	optMasquerade = "com.docker.network.bridge.enable_ip_masquerade"
	optICC        = "com.docker.network.bridge.enable_icc"
)

// unusedDNS is the DNS server the sandbox's resolver is given. Docker's
// embedded resolver (127.0.0.11, always in resolv.conf on a user-defined
// network) forwards the names it does not know to the container's DNS
// servers from the container's own network namespace, on an internal
// network too; 0.0.0.0 is the container itself, where nothing answers on
// port 53, so every outside name fails (the embedded resolver does not
// answer at all, so the program's resolver is told to give up after one
// second). The host firewall refuses DNS to the host as well.
const unusedDNS = "0.0.0.0"

var fwIDRE = regexp.MustCompile(`^[0-9a-f]{10}$`)

// sandboxNet is the internal network of one networked run, the proxy
// listener on its gateway and the firewall that leaves the proxy the only
// thing the sandbox reaches. close undoes all of it.
type sandboxNet struct {
	r       *platform
	name    string // the Docker network's name
	netID   string // the Docker network's ID
	fw      fwRule
	fwOn    bool
	gateway netip.Addr
	proxy   netip.AddrPort
	stop    context.CancelFunc // ends the proxy's Serve on this network
	served  chan struct{}      // closed when Serve returned
	src     netip.Addr         // the registered sandbox address, once known
}

// openNetwork creates the run's internal network, listens for the proxy on
// its gateway, installs the firewall and starts serving. On error nothing
// of it is left.
func (r *platform) openNetwork(ctx context.Context, spec runner.Spec) (_ *sandboxNet, err error) {
	var b [5]byte
	if _, err := rand.Read(b[:]); err != nil {
		return nil, fmt.Errorf("network id: %w", err)
	}
	id := hex.EncodeToString(b[:])
	sn := &sandboxNet{r: r, name: "gatekeeper-" + r.cfg.Instance + "-" + id, fw: fwRule{instance: r.cfg.Instance, id: id}}
	defer func() {
		if err != nil {
			sn.close()
		}
	}()

	// Not cancelled with ctx: a network the engine created after the
	// caller gave up would be left behind.
	createCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
	defer cancel()
	ipv6 := false
	created, err := r.cli.NetworkCreate(createCtx, sn.name, network.CreateOptions{
		Driver:     "bridge",
		Internal:   true,
		EnableIPv6: &ipv6,
		Options: map[string]string{
			optBridgeName: sn.fw.bridge(),
			optMasquerade: "false",
			optICC:        "false",
		},
		Labels: map[string]string{
			runner.LabelInstance: r.cfg.Instance,
			runner.LabelRunID:    spec.RunID,
			runner.LabelQueryID:  spec.QueryID,
			LabelNetworkID:       id,
		},
	})
	if err != nil {
		// The engine may have made it and died before it answered.
		r.retry.addLost(true, LabelNetworkID, id)
		return nil, engineErr("create sandbox network", err)
	}
	sn.netID = created.ID
	insp, err := r.cli.NetworkInspect(createCtx, created.ID, network.InspectOptions{})
	if err != nil {
		return nil, engineErr("inspect sandbox network", err)
	}
	for _, c := range insp.IPAM.Config {
		if gw, err := netip.ParseAddr(c.Gateway); err == nil && gw.Is4() {
			sn.gateway = gw
			break
		}
	}
	if !sn.gateway.IsValid() {
		return nil, fmt.Errorf("sandbox network %s has no IPv4 gateway (IPAM %+v)", sn.name, insp.IPAM.Config)
	}

	ln, err := net.Listen("tcp4", netip.AddrPortFrom(sn.gateway, 0).String())
	if err != nil {
		return nil, fmt.Errorf("listen for the egress proxy on sandbox network %s: %w", sn.name, err)
	}
	sn.proxy = ln.Addr().(*net.TCPAddr).AddrPort()
	sn.fw.gateway, sn.fw.port = sn.gateway, sn.proxy.Port()
	if err := r.fw.install(ctx, sn.fw); err != nil {
		ln.Close()
		return nil, fmt.Errorf("sandbox network needs the host firewall (run gatekeeper as root, with iptables): %w: %w", runner.ErrNetworkUnsupported, err)
	}
	sn.fwOn = true

	serveCtx, stop := context.WithCancel(context.WithoutCancel(ctx))
	sn.stop, sn.served = stop, make(chan struct{})
	go func() {
		defer close(sn.served)
		if err := r.cfg.Egress.Serve(serveCtx, ln); err != nil {
			r.log.Error("egress proxy stopped serving a sandbox network", "network", sn.name, "err", err)
		}
	}()
	return sn, nil
}

// proxyURL is the HTTP_PROXY of the sandbox.
func (sn *sandboxNet) proxyURL() string { return "http://" + sn.proxy.String() }

// register tells the proxy the started container's address is the
// sandbox reg describes (sandbox.Plan.Registration).
func (sn *sandboxNet) register(ctx context.Context, containerID string, reg egress.Registration) error {
	insp, err := sn.r.cli.ContainerInspect(ctx, containerID)
	if err != nil {
		return engineErr("inspect container for its sandbox address", err)
	}
	var ep *network.EndpointSettings
	if insp.NetworkSettings != nil {
		ep = insp.NetworkSettings.Networks[sn.name]
	}
	if ep == nil {
		return fmt.Errorf("container %s is not on its sandbox network %s", short(containerID), sn.name)
	}
	addr, err := netip.ParseAddr(ep.IPAddress)
	if err != nil {
		return fmt.Errorf("container %s address on %s: %w", short(containerID), sn.name, err)
	}
	if err := sn.r.cfg.Egress.Register(addr, reg); err != nil {
		return fmt.Errorf("register the sandbox with the egress proxy: %w", err)
	}
	sn.src = addr
	return nil
}

// bind hands the registered sandbox to spec's run (a session's next).
func (sn *sandboxNet) bind(spec runner.Spec) error {
	if !sn.src.IsValid() {
		return errors.New("bind the sandbox to its run: it is not registered with the egress proxy")
	}
	if err := sn.r.cfg.Egress.Bind(sn.src, sandbox.RunIdentity(spec)); err != nil {
		return fmt.Errorf("bind the sandbox to its run: %w", err)
	}
	return nil
}

// unregister makes the proxy forget the sandbox's address, once.
func (sn *sandboxNet) unregister() {
	if sn.src.IsValid() {
		sn.r.cfg.Egress.Unregister(sn.src)
		sn.src = netip.Addr{}
	}
}

// close unregisters the sandbox, stops serving, and removes the firewall
// and the network, with fresh contexts. The container must be gone first.
func (sn *sandboxNet) close() {
	sn.unregister()
	if sn.stop != nil {
		sn.stop()
		<-sn.served
	}
	ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
	defer cancel()
	if sn.fwOn {
		if err := sn.r.fw.remove(ctx, sn.fw); err != nil {
			sn.r.log.Error("remove sandbox network firewall", "network", sn.name, "err", err)
		}
	}
	if sn.netID != "" {
		if err := sn.r.cli.NetworkRemove(ctx, sn.netID); err != nil && !cerrdefs.IsNotFound(err) {
			sn.r.log.Warn("remove sandbox network; retrying in the background", "network", sn.name, "err", err)
			sn.r.retry.add(true, sn.netID)
		}
	}
}

// networks lists the sandbox networks labelled with this runner's instance.
func (r *platform) networks(ctx context.Context) ([]network.Summary, error) {
	list, err := r.cli.NetworkList(ctx, network.ListOptions{
		Filters: filters.NewArgs(filters.Arg("label", runner.LabelInstance+"="+r.cfg.Instance)),
	})
	if err != nil {
		return nil, engineErr("list networks", err)
	}
	return list, nil
}

// cleanupNetworks removes this instance's sandbox networks and their
// firewalls, and firewall rules whose network is gone. Containers on the
// networks must be removed first.
func (r *platform) cleanupNetworks(ctx context.Context) (removed int, err error) {
	list, err := r.networks(ctx)
	if err != nil {
		return 0, err
	}
	var errs []error
	for _, n := range list {
		if id := n.Labels[LabelNetworkID]; fwIDRE.MatchString(id) {
			if err := r.fw.remove(ctx, fwRule{instance: r.cfg.Instance, id: id}); err != nil {
				errs = append(errs, err)
			}
		}
		switch err := r.cli.NetworkRemove(ctx, n.ID); {
		case err == nil:
			removed++
		case cerrdefs.IsNotFound(err):
		default:
			errs = append(errs, engineErr("remove network "+n.Name, err))
		}
	}
	if r.cfg.Egress != nil {
		stray, err := r.fw.leftovers(ctx, r.cfg.Instance)
		if err != nil {
			errs = append(errs, err)
		}
		for _, rule := range stray {
			if err := r.fw.remove(ctx, rule); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return removed, errors.Join(errs...)
}

// leftoverNetworks counts this instance's sandbox networks and, when the
// runner has an egress proxy, its firewall rules.
func (r *platform) leftoverNetworks(ctx context.Context) (int, error) {
	list, err := r.networks(ctx)
	if err != nil {
		return 0, err
	}
	n := len(list)
	if r.cfg.Egress != nil {
		stray, err := r.fw.leftovers(ctx, r.cfg.Instance)
		if err != nil {
			return n, err
		}
		n += len(stray)
	}
	return n, nil
}

// EgressCA is the egress proxy's CA certificate (sandbox.EgressPlatform);
// nil without a proxy.
func (r *platform) EgressCA() []byte {
	if r.cfg.Egress == nil {
		return nil
	}
	return r.cfg.Egress.CACert()
}
