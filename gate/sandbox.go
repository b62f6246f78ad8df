package gate

import (
	"fmt"

	"github.com/gatekeeper-ai/gatekeeper/gate/hostpath"
	"github.com/gatekeeper-ai/gatekeeper/runner"
	"github.com/gatekeeper-ai/gatekeeper/runner/image/profile"
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
		Network: runner.Network{
			Enabled: s.Net.Enabled,
			Allow:   append([]string(nil), s.Net.Allow...),
			Deny:    append([]string(nil), s.Net.Deny...),
		},
		MaxOutputBytes: int64(s.Output.MaxBytes),
		MaxFiles:       s.Output.MaxFiles,
		MaxFilesBytes:  int64(s.Output.MaxFilesBytes),
		Calls:          eff.Policy.CodeCalls.Limits(),
	}, nil
}
