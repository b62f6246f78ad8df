package kube

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"strings"
)

// DefaultContainerd is the socket of the test cluster's containerd
// (scripts/ensure-kube).
const DefaultContainerd = "/run/gatekeeper-kube/containerd.sock"

// ImageLoader puts images into the container runtime of a node, with no
// registry: it streams an image archive (what `docker save` writes) into
// `ctr images import` against the node's containerd, in the namespace the
// kubelet's CRI uses (k8s.io). It suits a cluster whose node the sidecar's
// host is, as the test cluster's is; elsewhere load the image with the
// cluster's own means and keep imagePullPolicy Never in mind (the Pods
// never pull).
type ImageLoader struct {
	// Ctr is the ctr binary (containerd's client); empty means "ctr" in
	// PATH.
	Ctr string
	// Address is the containerd socket; empty means DefaultContainerd.
	Address string
}

// Load imports the archive into the node's containerd and checks that
// ref is there after. A containerd that cannot be reached, or an archive
// it refuses, is an error with what ctr said.
func (l ImageLoader) Load(ctx context.Context, ref string, archive io.Reader) error {
	if err := l.run(ctx, archive, io.Discard, "images", "import", "-"); err != nil {
		return fmt.Errorf("import %s into the cluster's containerd: %w", ref, err)
	}
	var out bytes.Buffer
	if err := l.run(ctx, nil, &out, "images", "ls", "-q"); err != nil {
		return fmt.Errorf("list the cluster's images: %w", err)
	}
	for _, name := range strings.Fields(out.String()) {
		if name == ref || name == "docker.io/library/"+ref {
			return nil
		}
	}
	return fmt.Errorf("import %s into the cluster's containerd: the archive held no image of that name", ref)
}

// run runs ctr with args against the node's containerd.
func (l ImageLoader) run(ctx context.Context, stdin io.Reader, stdout io.Writer, args ...string) error {
	bin, addr := l.Ctr, l.Address
	if bin == "" {
		bin = "ctr"
	}
	if addr == "" {
		addr = DefaultContainerd
	}
	var stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, bin, append([]string{"--address", addr, "--namespace", "k8s.io"}, args...)...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = stdin, stdout, &stderr
	if err := cmd.Run(); err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return fmt.Errorf("%s %s: %w: %s", bin, strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
		}
		return fmt.Errorf("%s: %w", bin, err)
	}
	return nil
}
