//go:build kube

package kube

import (
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/docker/docker/client"

	"github.com/gatekeeper-ai/gatekeeper/runner"
	"github.com/gatekeeper-ai/gatekeeper/runner/image/profile"
	"github.com/gatekeeper-ai/gatekeeper/runner/runnertest"
)

// TestImagesGoInWithoutARegistry runs in the minimal profile's image
// before and after ImageLoader loads it from the Docker engine (what
// `gatekeeper image build --kube` does): before, the run fails naming that
// command, and the failure is not held against the RuntimeClass; after, a
// shell run works in it, and JavaScript, which the image lacks (no node),
// is refused as unavailable in the image.
func TestImagesGoInWithoutARegistry(t *testing.T) {
	t.Parallel()
	c := requireCluster(t)
	ref, err := profile.Resolve("minimal")
	if err != nil {
		t.Fatal(err)
	}
	cli, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	if _, err := cli.ImageInspect(t.Context(), ref); err != nil {
		t.Fatalf("no image %s in the Docker engine (bin/gatekeeper image build minimal): %v", ref, err)
	}
	loader := ImageLoader{Ctr: os.Getenv("GATEKEEPER_KUBE_CTR"), Address: os.Getenv("GATEKEEPER_KUBE_CONTAINERD")}
	// Another run's image must be absent: remove it from the cluster (the
	// cluster's copy only; the Docker engine keeps it).
	if err := loader.run(t.Context(), nil, nil, "images", "rm", "docker.io/library/"+ref); err != nil && !strings.Contains(err.Error(), "not found") {
		t.Fatal(err)
	}

	r := withRuntime{newTestRunner(t, testConfig(t, nil)), runner.Runc, c.image}
	shell := runnertest.Spec(`echo "in $(cat /etc/debian_version | cut -c1-2)"`)
	shell.Language, shell.Sandbox.Image = runner.Shell, ref
	res, err := r.Run(t.Context(), shell)
	if err == nil || !strings.Contains(err.Error(), "gatekeeper image build --kube minimal") {
		t.Fatalf("run in an image the cluster lacks = %+v, %v; want an error naming gatekeeper image build --kube minimal", res, err)
	}
	if errors.Is(err, runner.ErrRuntimeUnavailable) || errors.Is(err, runner.ErrNetworkUnsupported) {
		t.Errorf("a missing image was reported as the runtime's or the network's fault: %v", err)
	}
	// The class stays usable for images the cluster has.
	if res, err := r.Run(t.Context(), runnertest.Spec(`print("still fine")`)); err != nil || res.Stdout != "still fine\n" {
		t.Fatalf("a run in the cluster's image after the failed one = %+v, %v; want it to run", res, err)
	}

	archive, err := cli.ImageSave(t.Context(), []string{ref})
	if err != nil {
		t.Fatal(err)
	}
	defer archive.Close()
	if err := loader.Load(t.Context(), ref, archive); err != nil {
		t.Fatal(err)
	}
	res, err = r.Run(t.Context(), shell)
	if err != nil || res.ExitCode != 0 || !strings.HasPrefix(res.Stdout, "in ") {
		t.Fatalf("shell run in the loaded image = %+v, %v; want it to print the Debian version", res, err)
	}
	js := runnertest.Spec(`console.log("no node here")`)
	js.Language, js.Sandbox.Image = runner.Node, ref
	if _, err := r.Run(t.Context(), js); !errors.Is(err, runner.ErrLanguageUnavailable) {
		t.Errorf("JavaScript in the minimal image: %v, want ErrLanguageUnavailable", err)
	}
}
