package sandbox

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"time"

	"github.com/gatekeeper-ai/gatekeeper/runner"
	"github.com/gatekeeper-ai/gatekeeper/runner/egress"
	"github.com/gatekeeper-ai/gatekeeper/runner/launch"
)

// Plan is a validated Spec turned into what a platform needs to make its
// sandbox. It depends on the Sandbox but not on the language, the
// timeout or the code, which travel on standard input (Input); so a warm
// pool makes sandboxes from a plan before any of those is known. A
// platform may read a Plan from several goroutines and must not change it.
type Plan struct {
	// Image and Runtime are what runs the code, defaults applied.
	Image   string
	Runtime runner.Runtime
	// Sandbox is the run's resolved policy.
	Sandbox runner.Sandbox
	// Input is the run's program, code and files, end marks' tag and
	// saved workspace.
	Input *launch.Input
	// PoolKey is set for a warm sandbox: its labels are the pool's, not
	// a run's.
	PoolKey string
	// Warm is set for a warm sandbox: what it starts ahead.
	Warm *launch.Warm
	// Wait is the longest the sandbox waits for its code; Life the
	// longest it lives (PID 1's timeout).
	Wait, Life time.Duration
	// Idle is set for a session's sandbox: the longest it waits for each
	// run after its first (launch.SessionCommand).
	Idle time.Duration
	// Sentinels and Egress are set for a sandbox whose traffic the egress
	// proxy intercepts (Network.Inspect or Secrets): its secrets'
	// sentinels by name (egress.NewSentinels, made for this sandbox), and
	// what its launcher writes (the CA, the sentinel files). Neither
	// holds a secret's value.
	Sentinels map[string]string
	Egress    *launch.Egress
}

// Command is the sandbox's command line, with env as the program's whole
// environment (launch.Command, or launch.WarmCommand for a warm sandbox).
func (p *Plan) Command(env []string) []string {
	if p.Idle > 0 {
		return launch.SessionCommand(p.Life, p.Wait, p.Idle, env, p.Egress)
	}
	if p.Warm != nil {
		// The pool checked the Warm when it planned the sandbox
		// (warmStarts); a Warm{} always passes.
		if argv, err := launch.WarmCommand(p.Life, p.Wait, env, *p.Warm); err == nil {
			return argv
		}
	}
	if p.Egress != nil {
		return launch.EgressCommand(p.Life, p.Wait, env, p.Egress)
	}
	return launch.Command(p.Life, p.Wait, env)
}

// poolable reports whether runs of sb may use warm sandboxes: a network
// or a deps directory is made for one run.
func poolable(sb runner.Sandbox) bool { return !sb.Network.Enabled && sb.DepsDir == "" }

// poolKey identifies the settings of a poolable sandbox: every field that
// reaches the sandbox, with the image and runtime resolved.
func poolKey(p *Plan) string {
	sb := p.Sandbox
	sum := sha256.Sum256(fmt.Appendf(nil, "%q %q %d %d %g %d %d %d %d", p.Image, p.Runtime,
		sb.UID, sb.GID, sb.CPUs, sb.MemoryBytes, sb.PIDs, sb.WorkspaceBytes, sb.TmpBytes))
	return hex.EncodeToString(sum[:8])
}

// Plan validates spec and plans its sandbox, as Run does first. Problems
// with the Spec are returned together, wrapped in runner.ErrInvalidSpec;
// the platform's refusals (Platform.Validate) come as it words them.
func (r *Runner) Plan(spec runner.Spec) (*Plan, error) {
	sb := spec.Sandbox
	var problems []string
	bad := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	if sb.Network.Enabled {
		if err := egress.ValidateNetwork(sb.Network); err != nil {
			bad("%v", err)
		}
	}
	life := spec.Timeout + launch.BackstopGrace + r.cfg.ColdMargin
	if launch.WantsSnapshot(spec) {
		life += launch.SnapshotGrace
	}
	p := &Plan{Image: sb.Image, Runtime: sb.Runtime, Sandbox: sb, Wait: life, Life: life}
	if intercepts(sb.Network) {
		var ca []byte
		if ep, ok := r.pf.(EgressPlatform); ok {
			ca = ep.EgressCA()
		}
		problems = append(problems, planEgress(p, ca)...)
	}
	if p.Image == "" {
		p.Image = r.cfg.DefaultImage
	}
	if p.Image == "" {
		bad("no image: Sandbox.Image and the runner's default image are empty")
	}
	if p.Runtime == "" {
		p.Runtime = runner.Runc
	}
	if p.Runtime != runner.Runc && p.Runtime != runner.Runsc {
		bad("unknown runtime %q", p.Runtime)
	}
	in, more := launch.Check(spec, r.cfg.MinMemoryBytes)
	problems = append(problems, more...)
	p.Input = in
	more, err := r.pf.Validate(spec, p)
	if err != nil {
		return nil, err
	}
	problems = append(problems, more...)
	if len(problems) > 0 {
		return nil, fmt.Errorf("%w: %s", runner.ErrInvalidSpec, strings.Join(problems, "; "))
	}
	return p, nil
}
