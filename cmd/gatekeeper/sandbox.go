package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/gatekeeper-ai/gatekeeper/gate"
	"github.com/gatekeeper-ai/gatekeeper/runner"
	"github.com/gatekeeper-ai/gatekeeper/runner/docker"
	"github.com/gatekeeper-ai/gatekeeper/runner/image"
)

type runnerOptions struct {
	instance string
	maxRuns  int
	log      *slog.Logger
}

// sandboxRunner is the Docker backend behind a FIFO queue of --max-runs.
type sandboxRunner struct {
	docker       *docker.Runner
	queue        *runner.Queue
	defaultImage string
}

// newSandboxRunner makes the Docker runner and removes containers a killed
// predecessor of the same instance left. An engine that is down is not an
// error: decisions are served and runs answer runner_unavailable.
func newSandboxRunner(ctx context.Context, o runnerOptions) (*sandboxRunner, error) {
	d, err := docker.New(docker.Config{Instance: o.instance, DefaultImage: image.DefaultTag(image.Options{})})
	if err != nil {
		return nil, err
	}
	if n, err := d.Cleanup(ctx); err != nil {
		o.log.Warn("docker engine unavailable at start; runs will answer runner_unavailable until it is up", "err", err)
	} else if n > 0 {
		o.log.Info("removed leftover sandbox containers", "instance", o.instance, "count", n)
	}
	return &sandboxRunner{docker: d, queue: runner.NewQueue(d, o.maxRuns), defaultImage: image.DefaultTag(image.Options{})}, nil
}

func (s *sandboxRunner) close() { _ = s.docker.Close() }

// runOutput is what `gatekeeper run` prints.
type runOutput struct {
	RunID           string `json:"run_id"`
	ExitCode        int    `json:"exit_code"`
	Reason          string `json:"reason"`
	Stdout          string `json:"stdout"`
	Stderr          string `json:"stderr"`
	Truncated       bool   `json:"truncated"`
	TimedOut        bool   `json:"timed_out"`
	OOMKilled       bool   `json:"oom_killed"`
	DurationMS      int64  `json:"duration_ms"`
	PeakMemoryBytes int64  `json:"peak_memory_bytes"`
	Image           string `json:"image"`
	Runtime         string `json:"runtime"`
}

func cmdRun(ctx context.Context, args []string, env envLookup, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := newFlags("run", `run [--policy FILE] --lang python|sh|node [--sandbox-policy JSON] [--human] (-c CODE | FILE | -)

Runs one piece of code in the sandbox of the policy, with no agent, and prints
the result as JSON (or readably with --human). Exit status: the program's.`, stderr)
	policyFile := fs.String("policy", "sandbox.policy.yaml", "policy file whose sandbox section applies")
	lang := fs.String("lang", "python", "python, sh or node")
	code := fs.String("c", "", "the code to run")
	override := fs.String("sandbox-policy", "", "a per-run override of the sandbox section, as JSON (checked against the ceilings)")
	human := fs.Bool("human", false, "print the output and a one-line summary instead of JSON")
	instance := fs.String("instance", "cli", "container label of this run")
	if err := parse(fs, args, env); err != nil {
		return err
	}
	src := *code
	switch {
	case src != "" && fs.NArg() > 0:
		return fmt.Errorf("run: give the code with -c or as a file, not both")
	case src == "" && fs.NArg() == 1 && fs.Arg(0) == "-":
		b, err := io.ReadAll(stdin)
		if err != nil {
			return err
		}
		src = string(b)
	case src == "" && fs.NArg() == 1:
		b, err := os.ReadFile(fs.Arg(0))
		if err != nil {
			return fmt.Errorf("run: %w", err)
		}
		src = string(b)
	case src == "":
		fs.Usage()
		return exitError(2)
	}
	eng, err := gate.New(ctx, gate.Config{PolicyFile: *policyFile, Logger: quietLogger()})
	if err != nil {
		return err
	}
	var raw []byte
	if *override != "" {
		raw = []byte(*override)
	}
	q, err := eng.OpenQuery(ctx, "cli", raw)
	if err != nil {
		if oe, ok := err.(*gate.OverrideError); ok {
			return fmt.Errorf("run: %s:\n  %s", oe.Error(), strings.Join(oe.Violations, "\n  "))
		}
		return err
	}
	eff, err := q.Effective(ctx)
	if err != nil {
		return err
	}
	d, err := docker.New(docker.Config{Instance: *instance, DefaultImage: image.DefaultTag(image.Options{})})
	if err != nil {
		return err
	}
	defer d.Close()
	spec := runner.Spec{
		RunID: "r_" + uuid.NewString(), QueryID: "cli", Language: runner.Language(*lang), Code: src,
		Timeout: eff.Policy.Sandbox.Proc.Timeout.Std(), Sandbox: eff.RunnerSandbox(image.DefaultTag(image.Options{})),
	}
	if *human {
		spec.OnOutput = func(s runner.Stream, b []byte) {
			if s == runner.Stdout {
				stdout.Write(b)
			} else {
				stderr.Write(b)
			}
		}
	}
	res, err := d.Run(ctx, spec)
	if err != nil {
		return fmt.Errorf("run: %w", err)
	}
	if *human {
		flags := []string{}
		for _, f := range []struct {
			on   bool
			name string
		}{{res.TimedOut, "timed out"}, {res.OOMKilled, "killed: out of memory"}, {res.Truncated, "output truncated"}} {
			if f.on {
				flags = append(flags, f.name)
			}
		}
		fmt.Fprintf(stderr, "-- exit %d (%s) in %s on %s/%s %s\n", res.ExitCode, res.Reason, res.Duration.Round(time.Millisecond), res.Image, res.Runtime, strings.Join(flags, ", "))
	} else {
		out := json.NewEncoder(stdout)
		out.SetIndent("", "  ")
		if err := out.Encode(runOutput{
			RunID: res.RunID, ExitCode: res.ExitCode, Reason: string(res.Reason), Stdout: res.Stdout, Stderr: res.Stderr,
			Truncated: res.Truncated, TimedOut: res.TimedOut, OOMKilled: res.OOMKilled, DurationMS: res.Duration.Milliseconds(),
			PeakMemoryBytes: res.PeakMemoryBytes, Image: res.Image, Runtime: string(res.Runtime),
		}); err != nil {
			return err
		}
	}
	if res.ExitCode != 0 {
		return exitError(res.ExitCode)
	}
	return nil
}

func cmdImageBuild(ctx context.Context, args []string, env envLookup, stdout, stderr io.Writer) error {
	fs := newFlags("image build", `image build [--node]

Builds the default sandbox image from a minimal Debian root file system
(debootstrap, the machine's apt mirror) and imports it through the Docker API.
Does nothing when an image of the same recipe exists.`, stderr)
	node := fs.Bool("node", false, "also install nodejs (a separate, larger image)")
	if err := parse(fs, args, env); err != nil {
		return err
	}
	tag, err := image.Build(ctx, image.Options{Node: *node})
	if err != nil {
		return err
	}
	fmt.Fprintln(stdout, tag)
	return nil
}
