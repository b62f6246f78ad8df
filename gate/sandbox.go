package gate

import (
	"fmt"
	"slices"
	"strings"

	"github.com/gatekeeper-ai/gatekeeper/gate/hostpath"
	"github.com/gatekeeper-ai/gatekeeper/runner"
	"github.com/gatekeeper-ai/gatekeeper/runner/image/profile"
	"github.com/gatekeeper-ai/gatekeeper/runner/mcpservers"
)

// RunnerSandbox turns the effective policy into the runner's resolved
// sandbox. Its image is sandbox.fs.image resolved by profile.Resolve: a
// profile name becomes that profile's tag, an image reference stays as
// it is. The policy was validated with the same function, so an error
// here means a policy built around validation; the run must not start.
func (eff *Effective) RunnerSandbox() (runner.Sandbox, error) {
	s := eff.Policy.Sandbox
	img, err := profile.Resolve(s.FS.Image)
	if err != nil {
		return runner.Sandbox{}, fmt.Errorf("sandbox.fs.image: %w", err)
	}
	return runner.Sandbox{
		Image:          img,
		Runtime:        runner.Runtime(s.Proc.Runtime),
		UID:            s.Proc.User,
		GID:            s.Proc.User,
		CPUs:           s.Proc.CPUs,
		MemoryBytes:    int64(s.Proc.Memory),
		PIDs:           s.Proc.PIDs,
		WorkspaceBytes: int64(s.FS.Workspace.Size),
		TmpBytes:       int64(s.FS.Tmp.Size),
		DepsDir:        hostpath.ExpandHome(s.FS.Deps, eff.home),
		DenyGlobs:      eff.deny.Globs(),
		Network:        eff.runnerNetwork(),
		MaxOutputBytes: int64(s.Output.MaxBytes),
		MaxFiles:       s.Output.MaxFiles,
		MaxFilesBytes:  int64(s.Output.MaxFilesBytes),
		Calls:          eff.Policy.CodeCalls.Limits(),
	}, nil
}

// runnerNetwork is the effective sandbox.net as the runner takes it. Its
// Secrets carry no Value: RunSpec reads them when a run starts
// (readSecrets), so that a sandbox built for the pool or a check reads no
// credential.
func (eff *Effective) runnerNetwork() runner.Network {
	n := eff.Policy.Sandbox.Net
	net := runner.Network{
		Enabled:     n.Enabled,
		Allow:       slices.Clone(n.Allow),
		Deny:        slices.Clone(n.Deny),
		Inspect:     slices.Clone(n.Inspect),
		BodyPreview: int64(n.BodyPreview),
	}
	if !n.Enabled {
		return net
	}
	for _, name := range n.Secrets {
		net.Secrets = append(net.Secrets, eff.Policy.Secrets[name].Runner(name))
	}
	return net
}

// readSecrets reads the value of each of net's secrets from its source
// (the reader of mcp_servers' values; lookup is the sidecar's
// environment). A secret that cannot be read, or reads empty, is an error
// that names the secret and its source, never a value: the run must not
// start without it.
func (eff *Effective) readSecrets(net *runner.Network, lookup func(string) (string, bool)) error {
	for i := range net.Secrets {
		sec := &net.Secrets[i]
		src := eff.Policy.Secrets[sec.Name]
		v, err := mcpservers.Value{FromEnv: src.FromEnv, FromFile: src.FromFile}.Resolve(lookup)
		switch {
		case err != nil:
			return fmt.Errorf("secret %q (%s) cannot be read, so the run does not start: %w", sec.Name, src.Source(), err)
		case v == "":
			return fmt.Errorf("secret %q (%s) is empty, so the run does not start", sec.Name, src.Source())
		case !sec.Inject.Body && strings.ContainsAny(v, "\r\n\x00"):
			return fmt.Errorf("secret %q (%s) has a line break or NUL, which its place (%s) may not carry, so the run does not start", sec.Name, src.Source(), sec.Inject)
		}
		sec.Value = runner.NewHidden(v)
	}
	return nil
}
