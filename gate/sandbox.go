package gate

import (
	"github.com/gatekeeper-ai/gatekeeper/gate/hostpath"
	"github.com/gatekeeper-ai/gatekeeper/runner"
)

// RunnerSandbox turns the effective policy into the runner's resolved
// sandbox. defaultImage stands in for an empty sandbox.fs.image.
func (eff *Effective) RunnerSandbox(defaultImage string) runner.Sandbox {
	s := eff.Policy.Sandbox
	img := s.FS.Image
	if img == "" {
		img = defaultImage
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
	}
}
