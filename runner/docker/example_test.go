package docker_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/gatekeeper-ai/gatekeeper/runner"
	"github.com/gatekeeper-ai/gatekeeper/runner/docker"
	"github.com/gatekeeper-ai/gatekeeper/runner/image"
)

// A sidecar builds (or finds) the default image, removes what a killed
// predecessor left, and runs code under a policy, two runs at a time.
func Example() {
	ctx := context.Background()
	tag, err := image.Build(ctx, image.Options{})
	if err != nil {
		log.Fatal(err)
	}
	r, err := docker.New(docker.Config{Instance: "gatekeeper", DefaultImage: tag})
	if err != nil {
		log.Fatal(err)
	}
	defer r.Close()
	if _, err := r.Cleanup(ctx); err != nil {
		log.Fatal(err)
	}
	q := runner.NewQueue(r, 2)

	res, err := q.Run(ctx, runner.Spec{
		RunID:    "r_1",
		QueryID:  "q_1",
		Language: runner.Python,
		Code:     `print("hello")`,
		Timeout:  10 * time.Second,
		Sandbox: runner.Sandbox{
			UID: 65534, GID: 65534,
			CPUs: 1, MemoryBytes: 256 << 20, PIDs: 64,
			WorkspaceBytes: 64 << 20, TmpBytes: 64 << 20,
			MaxOutputBytes: 1 << 20,
		},
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(res.Reason, res.ExitCode, res.Stdout)
}
