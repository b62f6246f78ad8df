package runner_test

import (
	"context"
	"fmt"

	"github.com/gatekeeper-ai/gatekeeper/runner"
)

type echoBackend struct{}

func (echoBackend) Run(_ context.Context, spec runner.Spec) (runner.Result, error) {
	return runner.Result{RunID: spec.RunID, Reason: runner.Exited, Stdout: spec.Code}, nil
}

// A Queue wraps a backend so that at most N runs happen at once; the rest
// wait in arrival order.
func ExampleQueue() {
	q := runner.NewQueue(echoBackend{}, 4)
	res, err := q.Run(context.Background(), runner.Spec{RunID: "r_1", Code: "hi"})
	fmt.Println(res.Reason, res.Stdout, err)
	// Output: exited hi <nil>
}
