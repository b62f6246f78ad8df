// Package policy holds the operator's sandbox.policy.yaml: its typed model,
// strict decoding with file:line:column errors, validation, and the merge of
// a per-query override over the base sandbox section.
//
// A Policy is plain data: it is decoded once, validated, and then only read.
// Ceiling checks of overrides are done in Rego (rego/constraints.rego) by the
// gate; this package does the checks that need no policy language.
package policy

import (
	"slices"
	"strings"
	"time"

	"github.com/gatekeeper-ai/gatekeeper/runner/image/profile"
)

// Version is the only policy file version this package reads.
const Version = 1

// Policy is the whole policy file.
type Policy struct {
	// Version must be 1.
	Version int `yaml:"version" json:"version"`
	// MCPServers are the operator's MCP servers that sandboxed code may
	// call, by name (mcpservers.go); none by default.
	MCPServers map[string]MCPServer `yaml:"mcp_servers" json:"mcp_servers,omitempty"`
	// WorkspaceRoot is the host directory the agent's host-side file tools
	// may touch. A relative path is relative to the policy file's directory;
	// after Load it is absolute and cleaned.
	WorkspaceRoot string `yaml:"workspace_root" json:"workspace_root"`
	// Tools lists tool names; a tool in no list is denied.
	Tools Tools `yaml:"tools" json:"tools"`
	// Sandbox is the base sandbox policy of every query.
	Sandbox Sandbox `yaml:"sandbox" json:"sandbox"`
	// Ceilings bound what a per-query override may ask for.
	Ceilings Ceilings `yaml:"ceilings" json:"ceilings"`
	// CodeCalls says which MCP tools sandboxed code may call, and bounds
	// those calls (codecalls.go).
	CodeCalls CodeCalls `yaml:"code_calls" json:"code_calls"`
	// Secrets is the catalog of credentials networked runs may use but
	// never read, by name (secrets.go); sandbox.net.secrets says which
	// runs get them. None by default.
	Secrets map[string]Secret `yaml:"secrets" json:"secrets,omitempty"`

	file string    // where the policy was decoded from
	pos  positions // where each key stands in file
}

// Where returns "file:line:col" for the value at a dotted key path (or
// its nearest written ancestor), or just the file name when unknown.
func (p *Policy) Where(path string) string {
	v := validator{file: p.file, pos: p.pos}
	v.add(path, "")
	q := v.probs[0]
	q.Path, q.Msg = "", ""
	return strings.TrimSuffix(q.String(), ": ")
}

// Tools are exact tool names as the Agent SDK reports them.
type Tools struct {
	Allow []string `yaml:"allow" json:"allow"`
	Deny  []string `yaml:"deny" json:"deny"`
	Ask   []string `yaml:"ask" json:"ask"`
}

// Sandbox is what a sandboxed run may do. A per-query override is a partial
// Sandbox.
type Sandbox struct {
	FS     FS     `yaml:"fs" json:"fs"`
	Net    Net    `yaml:"net" json:"net"`
	Proc   Proc   `yaml:"proc" json:"proc"`
	Output Output `yaml:"output" json:"output"`
	// Session keeps one sandbox, and its interpreters' state, for a
	// query's runs; off by default.
	Session Session `yaml:"session" json:"session"`
}

// Session is sandbox.session: a query's runs share one sandbox whose
// interpreters keep their state (docs/SANDBOX.md, "Sessions"). An
// IdleTimeout of 0, the default, turns sessions off: each run has a
// sandbox of its own. In ceilings.session the same keys bound what an
// override may ask for.
type Session struct {
	// IdleTimeout ends the session after this long without a run; 0 is
	// no session.
	IdleTimeout Duration `yaml:"idle_timeout" json:"idle_timeout"`
	// MaxLifetime ends the session this long after it started, between
	// runs; it must be positive, and no shorter than IdleTimeout, when
	// IdleTimeout is.
	MaxLifetime Duration `yaml:"max_lifetime" json:"max_lifetime"`
}

// On reports whether the policy asks for sessions.
func (s Session) On() bool { return s.IdleTimeout > 0 }

// FS is the sandbox's filesystem.
type FS struct {
	// Image names the container image: a profile of gatekeeper's locally
	// built images (python, python-data, node, minimal; see
	// runner/image/profile) or an image reference with a tag or digest.
	// Empty (in a file or an override) means the default profile, python;
	// after decoding it is never empty.
	Image string `yaml:"image" json:"image"`
	// Workspace is the tmpfs at /workspace holding the code and its files.
	Workspace Tmpfs `yaml:"workspace" json:"workspace"`
	// Tmp is the tmpfs at /tmp.
	Tmp Tmpfs `yaml:"tmp" json:"tmp"`
	// Deps is a host directory mounted read-only at /deps; empty means none.
	Deps string `yaml:"deps" json:"deps"`
	// Deny are host path globs ("~/.ssh/**", "**/.env") that no host file
	// tool may touch and no mount may expose, even inside the workspace.
	// Globs are matched by internal/pathglob: a relative glob matches at
	// any depth, and case is ignored.
	Deny []string `yaml:"deny" json:"deny"`
	// WriteProtect are host path globs, in the syntax of Deny, that no host
	// file tool may create, change or move into, even inside the workspace;
	// reading them is not affected. They add to the built-in list
	// (BuiltinWriteProtect), which is always in force.
	WriteProtect []string `yaml:"write_protect" json:"write_protect"`
	// WriteProtectAllow names groups of the built-in write-protect list to
	// lift (only those whose Liftable is true).
	WriteProtectAllow []string `yaml:"write_protect_allow" json:"write_protect_allow"`
}

// Tmpfs is a size-limited in-memory filesystem.
type Tmpfs struct {
	Size ByteSize `yaml:"size" json:"size"`
}

// Net is the sandbox's network. The zero value is no network at all.
type Net struct {
	Enabled bool     `yaml:"enabled" json:"enabled"`
	Allow   []string `yaml:"allow" json:"allow"`
	Deny    []string `yaml:"deny" json:"deny"`
	// Inspect are host patterns (of hosts net.allow admits) whose HTTPS the
	// egress proxy terminates, so that each request is decided by the
	// policy (event http_request). The hosts of the run's secrets are
	// inspected too; every other host is a plain tunnel.
	Inspect []string `yaml:"inspect" json:"inspect"`
	// Secrets names the entries of the secrets catalog every run gets.
	Secrets []string `yaml:"secrets" json:"secrets"`
	// BodyPreview is how many bytes of a request body the policy sees
	// (input.http.body), at most MaxBodyPreview.
	BodyPreview ByteSize `yaml:"body_preview" json:"body_preview"`
}

// Proc are process limits.
type Proc struct {
	CPUs    float64  `yaml:"cpus" json:"cpus"`
	Memory  ByteSize `yaml:"memory" json:"memory"`
	PIDs    int64    `yaml:"pids" json:"pids"`
	Timeout Duration `yaml:"timeout" json:"timeout"`
	// Runtime is "runc" or "runsc" (gVisor).
	Runtime string `yaml:"runtime" json:"runtime"`
	// User is the uid (and gid) code runs as; never 0.
	User int `yaml:"user" json:"user"`
}

// Output bounds what a run may print and the files it hands back.
type Output struct {
	// MaxBytes caps stdout and stderr, each.
	MaxBytes ByteSize `yaml:"max_bytes" json:"max_bytes"`
	// MaxFiles is the most files of the workspace a run returns, and the
	// most files a run call may send in; 0 returns none (and takes none).
	MaxFiles int `yaml:"max_files" json:"max_files"`
	// MaxFilesBytes is the most bytes of file content a run returns, all
	// files together (a file past it is listed without its content), and
	// the most a run call may send in.
	MaxFilesBytes ByteSize `yaml:"max_files_bytes" json:"max_files_bytes"`
}

// Hard bounds of the output keys, whatever a policy says: a run_result
// frame carries the returned files (binary ones in base64), and the
// sidecar holds them in memory until it is sent.
const (
	MaxOutputFiles      = 1000
	MaxOutputFilesBytes = 64 << 20
)

// Ceilings are the most an override may ask for. A ceiling left out of the
// file equals the base sandbox's value: nothing may be raised.
type Ceilings struct {
	CPUs        float64  `yaml:"cpus" json:"cpus"`
	Memory      ByteSize `yaml:"memory" json:"memory"`
	PIDs        int64    `yaml:"pids" json:"pids"`
	Timeout     Duration `yaml:"timeout" json:"timeout"`
	Tmpfs       ByteSize `yaml:"tmpfs" json:"tmpfs"`
	OutputBytes ByteSize `yaml:"output_bytes" json:"output_bytes"`
	// OutputFiles and OutputFilesBytes bound output.max_files and
	// output.max_files_bytes.
	OutputFiles      int      `yaml:"output_files" json:"output_files"`
	OutputFilesBytes ByteSize `yaml:"output_files_bytes" json:"output_files_bytes"`
	// NetHosts are host patterns an override may add to net.allow.
	NetHosts []string `yaml:"net_hosts" json:"net_hosts"`
	// Images an override may choose besides the base image: profile names
	// or image references, as in sandbox.fs.image.
	Images []string `yaml:"images" json:"images"`
	// Runtimes an override may choose.
	Runtimes []string `yaml:"runtimes" json:"runtimes"`
	// Session bounds sandbox.session.idle_timeout and max_lifetime.
	Session Session `yaml:"session" json:"session"`
	// Secrets names the entries of the secrets catalog an override may add
	// to sandbox.net.secrets; none by default.
	Secrets []string `yaml:"secrets" json:"secrets"`
}

// Default returns the values a policy file starts from: no tools, no mounts,
// no network, and small limits. Keys the file leaves out keep these values.
func Default() Policy {
	return Policy{
		Version: Version,
		Sandbox: Sandbox{
			FS: FS{
				Image:     profile.Default,
				Workspace: Tmpfs{Size: 64 << 20},
				Tmp:       Tmpfs{Size: 64 << 20},
			},
			Proc: Proc{
				CPUs:    1,
				Memory:  256 << 20,
				PIDs:    128,
				Timeout: Duration(10e9),
				Runtime: "runc",
				User:    65534,
			},
			Net:     Net{BodyPreview: DefaultBodyPreview},
			Output:  Output{MaxBytes: 1 << 20, MaxFiles: 20, MaxFilesBytes: 4 << 20},
			Session: Session{MaxLifetime: Duration(time.Hour)},
		},
		CodeCalls: defaultCodeCalls(),
	}
}

// defaultImage makes an empty sandbox.fs.image name the default profile.
func (s *Sandbox) defaultImage() {
	if s.FS.Image == "" {
		s.FS.Image = profile.Default
	}
}

// Clone returns a deep copy of the sandbox section.
func (s Sandbox) Clone() Sandbox {
	s.FS.Deny = slices.Clone(s.FS.Deny)
	s.FS.WriteProtect = slices.Clone(s.FS.WriteProtect)
	s.FS.WriteProtectAllow = slices.Clone(s.FS.WriteProtectAllow)
	s.Net.Allow = slices.Clone(s.Net.Allow)
	s.Net.Deny = slices.Clone(s.Net.Deny)
	s.Net.Inspect = slices.Clone(s.Net.Inspect)
	s.Net.Secrets = slices.Clone(s.Net.Secrets)
	return s
}

// fillCeilings sets every ceiling the file left out to the base value.
func (p *Policy) fillCeilings() {
	c, s := &p.Ceilings, p.Sandbox
	if c.CPUs == 0 {
		c.CPUs = s.Proc.CPUs
	}
	if c.Memory == 0 {
		c.Memory = s.Proc.Memory
	}
	if c.PIDs == 0 {
		c.PIDs = s.Proc.PIDs
	}
	if c.Timeout == 0 {
		c.Timeout = s.Proc.Timeout
	}
	if c.Tmpfs == 0 {
		c.Tmpfs = max(s.FS.Workspace.Size, s.FS.Tmp.Size)
	}
	if c.OutputBytes == 0 {
		c.OutputBytes = s.Output.MaxBytes
	}
	if c.OutputFiles == 0 {
		c.OutputFiles = s.Output.MaxFiles
	}
	if c.OutputFilesBytes == 0 {
		c.OutputFilesBytes = s.Output.MaxFilesBytes
	}
	if c.Runtimes == nil {
		c.Runtimes = []string{s.Proc.Runtime}
	}
	if c.Session.IdleTimeout == 0 {
		c.Session.IdleTimeout = s.Session.IdleTimeout
	}
	if c.Session.MaxLifetime == 0 {
		c.Session.MaxLifetime = s.Session.MaxLifetime
	}
}
