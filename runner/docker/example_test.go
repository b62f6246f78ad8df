package docker_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/gatekeeper-ai/gatekeeper/runner"
	"github.com/gatekeeper-ai/gatekeeper/runner/docker"
	"github.com/gatekeeper-ai/gatekeeper/runner/egress"
	"github.com/gatekeeper-ai/gatekeeper/runner/image"
	"github.com/gatekeeper-ai/gatekeeper/runner/sandbox"
)

// logAuditor prints egress events; the sidecar writes them to its audit log.
type logAuditor struct{}

func (logAuditor) Egress(ev egress.Event) error {
	log.Printf("egress %s %s:%d %s %s", ev.RunID, ev.Host, ev.Port, ev.Decision, ev.Rule)
	return nil
}

// A sidecar builds (or finds) the default profile's image, removes what a
// killed predecessor left, keeps two containers of its base sandbox warm,
// and runs code under a policy, two runs at a time. Networked sandboxes go
// through the egress proxy.
func Example() {
	ctx := context.Background()
	built, err := image.Build(ctx, image.Options{Profile: "python"})
	if err != nil {
		log.Fatal(err)
	}
	base := runner.Sandbox{
		Image: built.Tag,
		UID:   65534, GID: 65534,
		CPUs: 1, MemoryBytes: 256 << 20, PIDs: 64,
		WorkspaceBytes: 64 << 20, TmpBytes: 64 << 20,
		MaxOutputBytes: 1 << 20,
	}
	proxy, err := egress.New(egress.Config{Auditor: logAuditor{}})
	if err != nil {
		log.Fatal(err)
	}
	r, err := docker.New(docker.Config{
		Instance: "gatekeeper",
		Egress:   proxy,
		Pool:     sandbox.PoolConfig{Size: 2, Idle: 5 * time.Minute, Sandboxes: []runner.Sandbox{base}},
	})
	if err != nil {
		log.Fatal(err)
	}
	defer r.Close() // removes the warm containers
	if _, err := r.Cleanup(ctx); err != nil {
		log.Fatal(err)
	}
	if err := r.Warm(ctx); err != nil {
		log.Fatal(err)
	}
	q := runner.NewQueue(r, 2)

	res, err := q.Run(ctx, runner.Spec{
		RunID:    "r_1",
		QueryID:  "q_1",
		Language: runner.Python,
		Code:     `print("hello")`,
		Timeout:  10 * time.Second,
		Sandbox:  base, // a warm container's
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(res.Reason, res.ExitCode, res.Stdout)

	networked := base
	networked.Network = runner.Network{Enabled: true, Allow: []string{"pypi.org", "files.pythonhosted.org"}}
	res, err = q.Run(ctx, runner.Spec{
		RunID:    "r_2",
		QueryID:  "q_1",
		Language: runner.Shell,
		Code:     `echo "$HTTPS_PROXY"`, // the proxy on the run's own network
		Timeout:  10 * time.Second,
		Sandbox:  networked,
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(res.Reason, res.ExitCode, res.Stdout)
}
