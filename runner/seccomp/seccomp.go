// Package seccomp holds the seccomp profile that programs run under gVisor
// (runsc), in Docker and in Kubernetes Pods alike. It is declared once, as
// gvisor.json: Docker's default profile (github.com/moby/profiles/seccomp,
// the version go.mod requires) with two changes, which a test pins.
//
// runsc applies a container's seccomp profile inside its own kernel only
// when it runs with --oci-seccomp (scripts/ensure-docker registers it so,
// scripts/ensure-kube configures the shim so). gVisor drops a rule's
// errnoRet (gVisor bug #14688), so Docker's rule answering clone3 with
// ENOSYS would answer EPERM there, and libc, which falls back to clone only
// on ENOSYS, could start no thread. The profile therefore traces clone3
// (SCMP_ACT_TRACE) instead: with no tracer attached, a traced system call
// fails with ENOSYS, under gVisor as under Linux. A tracer, though, decides
// the call itself, and could let a traced child's clone3 make a user
// namespace; so the second change takes ptrace out of the rules that allow
// it, the default action refuses it (EPERM, which is also what runsc
// answers every SCMP_ACT_ERRNO with), and no program in the sandbox can be
// that tracer. Everything else is Docker's default, as runc containers get it.
package seccomp

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"fmt"

	"github.com/gatekeeper-ai/gatekeeper/internal/digest"
	mobyseccomp "github.com/moby/profiles/seccomp"
	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// gvisor is the profile in Docker's JSON format.
//
//go:embed gvisor.json
var gvisor string

// GVisor returns the profile for runsc sandboxes, in Docker's JSON format
// (as HostConfig.SecurityOpt's seccomp= and the kubelet's Localhost
// profiles read it).
func GVisor() string { return gvisor }

// DockerSecurityOpt returns the HostConfig.SecurityOpt entry that gives a
// container the profile: compacted, as the docker CLI sends a profile file.
func DockerSecurityOpt() string {
	var b bytes.Buffer
	if err := json.Compact(&b, []byte(gvisor)); err != nil {
		return "seccomp=" + gvisor // a test pins the profile as valid JSON
	}
	return "seccomp=" + b.String()
}

// Localhost returns the profile as a Kubernetes node's kubelet reads a
// Localhost profile, indented JSON: containerd takes that file as the OCI
// spec's linux.seccomp as it is, without Docker's conditions (archMap,
// includes and excludes by architecture, capability and kernel), which
// would then all apply. So the conditions are resolved here, as Docker
// resolves them for a container: for this machine's architecture and
// kernel (scripts/ensure-kube runs this on the node) and for a sandbox
// with no capabilities, as every gatekeeper sandbox is.
func Localhost() ([]byte, error) {
	noCaps := &specs.Spec{Process: &specs.Process{Capabilities: &specs.LinuxCapabilities{}}}
	p, err := mobyseccomp.LoadProfile(gvisor, noCaps)
	if err != nil {
		return nil, fmt.Errorf("resolve the gVisor seccomp profile: %w", err)
	}
	b, err := json.MarshalIndent(p, "", "\t")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

// LocalhostProfile returns where the profile lies under the kubelet's
// seccomp directory (a Pod's localhostProfile), where scripts/ensure-kube
// writes Localhost: named by the first 12 hex digits of gvisor.json's
// SHA-256, as scripts/ensure-kube names the file it writes,
// so that a node holding another version of the profile refuses the Pod
// rather than running it under that version.
func LocalhostProfile() string {
	return "gatekeeper/gvisor-" + digest.SHA256([]byte(gvisor))[:12] + ".json"
}
