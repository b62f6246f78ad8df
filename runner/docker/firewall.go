package docker

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
)

// firewall shuts a sandbox network's bridge off from the host. Docker's
// rules for an internal network stop forwarding (no route out), but not
// traffic addressed to the host itself: without a rule in INPUT, a
// container on the network reaches every host service listening on
// 0.0.0.0 (or on any host address, since the container's default route
// points at the bridge). The runner installs one per network and removes
// it with the network.
type firewall interface {
	// install lets in, on r.bridge, only TCP to r.gateway:r.port (the egress
	// proxy) and refuses everything else, IPv4 and IPv6.
	install(ctx context.Context, r fwRule) error
	// remove undoes install; removing what does not exist is not an error.
	remove(ctx context.Context, r fwRule) error
	// leftovers lists the rules of instance found in the host firewall
	// (what a killed sidecar left), whatever their network.
	leftovers(ctx context.Context, instance string) ([]fwRule, error)
}

// fwRule is one sandbox network's firewall: a chain of its own in the
// filter table's INPUT, jumped to for packets arriving on the bridge.
type fwRule struct {
	instance string
	id       string // the network's short random id; names bridge and chain
	gateway  netip.Addr
	port     uint16
}

// bridge is the host-side interface of the network (at most 15 bytes).
func (r fwRule) bridge() string { return bridgePrefix + r.id }

// chain is the iptables chain holding the network's rules.
func (r fwRule) chain() string { return chainPrefix + r.id }

// comment marks the rules of r's instance, so that Cleanup finds them.
func (r fwRule) comment() string { return fwComment(r.instance) + r.id }

func fwComment(instance string) string { return "gatekeeper:" + instance + ":" }

const (
	bridgePrefix = "gk-"
	chainPrefix  = "GK-"
)

// iptables is the firewall of a Linux host, driven through the iptables and
// ip6tables commands (either backend). It needs CAP_NET_ADMIN: a sidecar
// that lacks it cannot run networked sandboxes (they are refused, never run
// without the firewall).
type iptables struct{}

// run runs one iptables (or ip6tables) command with the xtables lock.
func (iptables) run(ctx context.Context, cmd string, args ...string) (string, error) {
	c := exec.CommandContext(ctx, cmd, append([]string{"-w", "5"}, args...)...)
	var out, errb bytes.Buffer
	c.Stdout, c.Stderr = &out, &errb
	if err := c.Run(); err != nil {
		return "", fmt.Errorf("%s %s: %w: %s", cmd, strings.Join(args, " "), err, strings.TrimSpace(errb.String()))
	}
	return out.String(), nil
}

// exists reports whether a rule (given as for -C) or chain (-S) exists;
// iptables answers by exit status.
func (f iptables) exists(ctx context.Context, cmd string, args ...string) bool {
	_, err := f.run(ctx, cmd, args...)
	return err == nil
}

func (f iptables) install(ctx context.Context, r fwRule) (err error) {
	if !r.gateway.Is4() || r.port == 0 {
		return fmt.Errorf("firewall for %s: gateway %s port %d", r.bridge(), r.gateway, r.port)
	}
	defer func() {
		if err != nil {
			_ = f.remove(context.WithoutCancel(ctx), r)
		}
	}()
	br, chain, comment := r.bridge(), r.chain(), r.comment()
	steps := [][]string{
		{"iptables", "-N", chain},
		{"iptables", "-A", chain, "-p", "tcp", "-d", r.gateway.String(), "--dport", strconv.Itoa(int(r.port)), "-j", "ACCEPT"},
		{"iptables", "-A", chain, "-j", "REJECT"},
		{"iptables", "-I", "INPUT", "1", "-i", br, "-m", "comment", "--comment", comment, "-j", chain},
		{"ip6tables", "-I", "INPUT", "1", "-i", br, "-m", "comment", "--comment", comment, "-j", "DROP"},
		{"ip6tables", "-I", "FORWARD", "1", "-i", br, "-m", "comment", "--comment", comment, "-j", "DROP"},
	}
	for _, s := range steps {
		if _, err := f.run(ctx, s[0], s[1:]...); err != nil {
			return fmt.Errorf("firewall for %s: %w", br, err)
		}
	}
	// No IPv6 on the host side of the bridge at all: no link-local address
	// a container could reach, and the kernel drops what arrives.
	if err := disableIPv6(br); err != nil {
		return fmt.Errorf("firewall for %s: %w", br, err)
	}
	return nil
}

func (f iptables) remove(ctx context.Context, r fwRule) error {
	br, chain, comment := r.bridge(), r.chain(), r.comment()
	var errs []error
	del := func(cmd string, rule ...string) {
		for f.exists(ctx, cmd, append([]string{"-C"}, rule...)...) {
			if _, err := f.run(ctx, cmd, append([]string{"-D"}, rule...)...); err != nil {
				errs = append(errs, err)
				return
			}
		}
	}
	del("iptables", "INPUT", "-i", br, "-m", "comment", "--comment", comment, "-j", chain)
	del("ip6tables", "INPUT", "-i", br, "-m", "comment", "--comment", comment, "-j", "DROP")
	del("ip6tables", "FORWARD", "-i", br, "-m", "comment", "--comment", comment, "-j", "DROP")
	if f.exists(ctx, "iptables", "-S", chain) {
		for _, step := range [][]string{{"-F", chain}, {"-X", chain}} {
			if _, err := f.run(ctx, "iptables", step...); err != nil {
				errs = append(errs, err)
			}
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("remove firewall of %s: %w", br, err)
	}
	return nil
}

func (f iptables) leftovers(ctx context.Context, instance string) ([]fwRule, error) {
	if _, err := exec.LookPath("iptables"); err != nil {
		return nil, nil // no firewall, so nothing of ours in it
	}
	prefix := fwComment(instance)
	seen := map[string]bool{}
	var out []fwRule
	for _, where := range [][]string{{"iptables", "INPUT"}, {"ip6tables", "INPUT"}, {"ip6tables", "FORWARD"}} {
		text, err := f.run(ctx, where[0], "-S", where[1])
		if err != nil {
			return nil, fmt.Errorf("list firewall rules: %w", err)
		}
		for line := range strings.Lines(text) {
			for _, field := range strings.Fields(line) {
				field = strings.Trim(field, `"`)
				id, ok := strings.CutPrefix(field, prefix)
				if ok && fwIDRE.MatchString(id) && !seen[id] {
					seen[id] = true
					out = append(out, fwRule{instance: instance, id: id})
				}
			}
		}
	}
	return out, nil
}

// disableIPv6 turns IPv6 off on a host interface, if the kernel has IPv6.
func disableIPv6(iface string) error {
	p := filepath.Join("/proc/sys/net/ipv6/conf", iface, "disable_ipv6")
	err := os.WriteFile(p, []byte("1"), 0o644)
	if errors.Is(err, os.ErrNotExist) {
		if _, serr := os.Stat("/proc/sys/net/ipv6"); errors.Is(serr, os.ErrNotExist) {
			return nil
		}
	}
	if err != nil {
		return fmt.Errorf("disable IPv6: %w", err)
	}
	return nil
}
