package docker

import (
	"context"
	"errors"
	"io"
	"sync"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/events"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/api/types/system"
	"github.com/docker/docker/client"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
)

// fakeEngine answers the calls a Runner makes before it starts a container
// and records them; calls a test does not expect fail.
type fakeEngine struct {
	mu       sync.Mutex
	calls    map[string]int
	runtimes []string
	hasFile  map[string]bool // paths ContainerStatPath finds
	created  []*container.HostConfig
	removed  []string // containers and networks removed, in order
	// failRemovals is how many removals (of containers or networks) fail,
	// as they do while the engine restarts, before they succeed.
	failRemovals int
	// events are what Events streams (each filtered by the options'
	// container and event) before the stream ends.
	events []events.Message
	// loseCreates makes ContainerCreate create the container (it is in
	// containers, which ContainerList lists) and then fail, as a create
	// does whose answer the engine never sent.
	loseCreates bool
	containers  map[string]map[string]string // id → labels, of lost creates
}

// removal counts a removal of id, failing while failRemovals lasts.
func (f *fakeEngine) removal(id string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.failRemovals > 0 {
		f.failRemovals--
		return cerrdefs.ErrUnavailable.WithMessage("Cannot connect to the Docker daemon")
	}
	f.removed = append(f.removed, id)
	delete(f.containers, id)
	return nil
}

func newFake(runtimes ...string) *fakeEngine {
	return &fakeEngine{calls: map[string]int{}, runtimes: runtimes, hasFile: map[string]bool{}}
}

func (f *fakeEngine) count(name string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls[name]
}

func (f *fakeEngine) called(name string) {
	f.mu.Lock()
	f.calls[name]++
	f.mu.Unlock()
}

var errUnexpected = errors.New("unexpected call to the fake engine")

func (f *fakeEngine) Info(context.Context) (system.Info, error) {
	f.called("Info")
	info := system.Info{Runtimes: map[string]system.RuntimeWithStatus{}}
	for _, r := range f.runtimes {
		info.Runtimes[r] = system.RuntimeWithStatus{}
	}
	return info, nil
}

func (f *fakeEngine) ImageInspect(_ context.Context, ref string, _ ...client.ImageInspectOption) (image.InspectResponse, error) {
	f.called("ImageInspect")
	if ref == "missing:image" {
		return image.InspectResponse{}, cerrdefs.ErrNotFound.WithMessage("no such image")
	}
	return image.InspectResponse{ID: "sha256:" + ref}, nil
}

func (f *fakeEngine) ContainerCreate(_ context.Context, cfg *container.Config, host *container.HostConfig, _ *network.NetworkingConfig, _ *ocispec.Platform, _ string) (container.CreateResponse, error) {
	f.called("ContainerCreate")
	f.mu.Lock()
	defer f.mu.Unlock()
	f.created = append(f.created, host)
	if f.loseCreates {
		if f.containers == nil {
			f.containers = map[string]map[string]string{}
		}
		f.containers["lost-c0ffee"] = cfg.Labels
		return container.CreateResponse{}, errors.New(`error during connect: Post "http://docker/containers/create": EOF`)
	}
	return container.CreateResponse{ID: "c0ffee"}, nil
}

func (f *fakeEngine) ContainerStatPath(_ context.Context, _, path string) (container.PathStat, error) {
	f.called("ContainerStatPath")
	if f.hasFile[path] {
		return container.PathStat{Name: path}, nil
	}
	return container.PathStat{}, cerrdefs.ErrNotFound.WithMessage("no such file: " + path)
}

func (f *fakeEngine) ContainerAttach(context.Context, string, container.AttachOptions) (types.HijackedResponse, error) {
	f.called("ContainerAttach")
	return types.HijackedResponse{}, errUnexpected
}

func (f *fakeEngine) ContainerStart(context.Context, string, container.StartOptions) error {
	f.called("ContainerStart")
	return errUnexpected
}

func (f *fakeEngine) ContainerWait(context.Context, string, container.WaitCondition) (<-chan container.WaitResponse, <-chan error) {
	f.called("ContainerWait")
	errC := make(chan error, 1)
	errC <- errUnexpected
	return nil, errC
}

func (f *fakeEngine) ContainerKill(context.Context, string, string) error {
	f.called("ContainerKill")
	return nil
}

func (f *fakeEngine) ContainerInspect(context.Context, string) (container.InspectResponse, error) {
	f.called("ContainerInspect")
	return container.InspectResponse{}, errUnexpected
}

func (f *fakeEngine) ContainerStats(context.Context, string, bool) (container.StatsResponseReader, error) {
	f.called("ContainerStats")
	return container.StatsResponseReader{}, errUnexpected
}

func (f *fakeEngine) ContainerRemove(_ context.Context, id string, _ container.RemoveOptions) error {
	f.called("ContainerRemove")
	return f.removal(id)
}

func (f *fakeEngine) ContainerList(_ context.Context, opts container.ListOptions) ([]container.Summary, error) {
	f.called("ContainerList")
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []container.Summary
	for id, labels := range f.containers {
		if opts.Filters.MatchKVList("label", labels) {
			out = append(out, container.Summary{ID: id, Labels: labels})
		}
	}
	return out, nil
}

func (f *fakeEngine) NetworkCreate(_ context.Context, name string, _ network.CreateOptions) (network.CreateResponse, error) {
	f.called("NetworkCreate")
	return network.CreateResponse{ID: "net-" + name}, nil
}

func (f *fakeEngine) NetworkInspect(_ context.Context, id string, _ network.InspectOptions) (network.Inspect, error) {
	f.called("NetworkInspect")
	// A loopback gateway, so that the runner can listen on it.
	return network.Inspect{ID: id, IPAM: network.IPAM{Config: []network.IPAMConfig{{Subnet: "127.0.0.0/8", Gateway: "127.0.0.1"}}}}, nil
}

func (f *fakeEngine) NetworkRemove(_ context.Context, id string) error {
	f.called("NetworkRemove")
	return f.removal(id)
}

func (f *fakeEngine) NetworkList(context.Context, network.ListOptions) ([]network.Summary, error) {
	f.called("NetworkList")
	return nil, nil
}

func (f *fakeEngine) Events(_ context.Context, opts events.ListOptions) (<-chan events.Message, <-chan error) {
	f.called("Events")
	msgs, errs := make(chan events.Message, len(f.events)), make(chan error, 1)
	for _, m := range f.events {
		if opts.Filters.ExactMatch("container", m.Actor.ID) && opts.Filters.ExactMatch("event", string(m.Action)) {
			msgs <- m
		}
	}
	errs <- io.EOF
	return msgs, errs
}

func (f *fakeEngine) DaemonHost() string { return "unix:///var/run/docker.sock" }

// fakeFirewall records installs and removals; installErr makes install fail.
type fakeFirewall struct {
	mu         sync.Mutex
	installErr error
	installed  map[string]fwRule
	removed    []string
}

func (f *fakeFirewall) install(_ context.Context, r fwRule) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.installErr != nil {
		return f.installErr
	}
	if f.installed == nil {
		f.installed = map[string]fwRule{}
	}
	f.installed[r.id] = r
	return nil
}

func (f *fakeFirewall) remove(_ context.Context, r fwRule) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.installed, r.id)
	f.removed = append(f.removed, r.id)
	return nil
}

func (f *fakeFirewall) leftovers(context.Context, string) ([]fwRule, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []fwRule
	for _, r := range f.installed {
		out = append(out, r)
	}
	return out, nil
}
