package policy

import (
	"errors"
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/gatekeeper-ai/gatekeeper/internal/hostdirs"
	"github.com/gatekeeper-ai/gatekeeper/internal/nethost"
	"github.com/gatekeeper-ai/gatekeeper/internal/pathglob"
	"github.com/gatekeeper-ai/gatekeeper/runner/image/profile"
)

// Validate checks a policy built in code (Load and Decode already validate)
// and returns an *Error listing every problem, or nil.
func (p *Policy) Validate() error { return p.validate("", nil) }

func (p *Policy) validate(file string, pos positions) error {
	v := validator{file: file, pos: pos}
	if p.Version != Version {
		v.add("version", "version %d is not supported; this gatekeeper reads version %d", p.Version, Version)
	}
	switch {
	case p.WorkspaceRoot == "":
		v.add("workspace_root", "is required: the host directory the agent's file tools may touch")
	case !filepath.IsAbs(p.WorkspaceRoot):
		v.add("workspace_root", "%q must be an absolute path", p.WorkspaceRoot)
	case p.WorkspaceRoot == "/":
		v.add("workspace_root", "/ would expose the whole host")
	}
	v.tools(p.Tools)
	v.sandbox(p.Sandbox, "sandbox.")
	v.codeCalls(p.CodeCalls)
	c := p.Ceilings
	for _, f := range []struct {
		path string
		n    float64
	}{{"ceilings.cpus", c.CPUs}, {"ceilings.memory", float64(c.Memory)}, {"ceilings.pids", float64(c.PIDs)}, {"ceilings.timeout", float64(c.Timeout)}, {"ceilings.tmpfs", float64(c.Tmpfs)}, {"ceilings.output_bytes", float64(c.OutputBytes)},
		{"ceilings.output_files", float64(c.OutputFiles)}, {"ceilings.output_files_bytes", float64(c.OutputFilesBytes)},
		{"ceilings.session.idle_timeout", float64(c.Session.IdleTimeout)}, {"ceilings.session.max_lifetime", float64(c.Session.MaxLifetime)}} {
		if f.n < 0 {
			v.add(f.path, "must not be negative")
		}
	}
	if _, set := v.pos["ceilings.runtimes"]; set || v.pos == nil {
		for i, r := range c.Runtimes {
			if !validRuntime(r) {
				v.add(fmt.Sprintf("ceilings.runtimes[%d]", i), "runtime %q is not runc or runsc", r)
			}
		}
	}
	v.hostPatterns("ceilings.net_hosts", c.NetHosts, nethost.ParseAllow)
	for i, img := range c.Images {
		v.image(fmt.Sprintf("ceilings.images[%d]", i), img)
	}
	v.mcpServers(p.MCPServers)
	v.secrets(p.Secrets)
	v.netSecrets(p.Sandbox, p.Secrets, "sandbox.", true)
	for i, name := range c.Secrets {
		if _, ok := p.Secrets[name]; !ok {
			v.add(fmt.Sprintf("ceilings.secrets[%d]", i), "%q is not a secret of the policy's secrets catalog", name)
		}
	}
	return v.err()
}

type validator struct {
	file  string
	pos   positions
	probs []Problem
}

func (v *validator) add(path, format string, args ...any) {
	p := Problem{File: v.file, Path: path, Msg: fmt.Sprintf(format, args...)}
	// Point at the nearest key the file wrote.
	for q := path; q != ""; {
		if at, ok := v.pos[q]; ok {
			p.Line, p.Col = at.line, at.col
			break
		}
		i := strings.LastIndexAny(q, ".[")
		if i < 0 {
			break
		}
		q = q[:i]
	}
	v.probs = append(v.probs, p)
}

func (v *validator) err() error {
	if len(v.probs) == 0 {
		return nil
	}
	slices.SortStableFunc(v.probs, func(a, b Problem) int {
		if a.Line != b.Line {
			return a.Line - b.Line
		}
		return a.Col - b.Col
	})
	return &Error{Problems: v.probs}
}

func (v *validator) positive(path string, n float64) {
	if n <= 0 {
		v.add(path, "must be greater than zero")
	}
}

var toolNameRE = regexp.MustCompile(`^[A-Za-z0-9_.-]+$`)

func (v *validator) tools(t Tools) {
	where := map[string]string{}
	for _, list := range []struct {
		name  string
		names []string
	}{{"tools.allow", t.Allow}, {"tools.ask", t.Ask}, {"tools.deny", t.Deny}} {
		for i, n := range list.names {
			path := fmt.Sprintf("%s[%d]", list.name, i)
			if !toolNameRE.MatchString(n) {
				v.add(path, "tool name %q has characters outside A-Z a-z 0-9 _ . -", n)
			}
			if prev, ok := where[n]; ok {
				v.add(path, "tool %q is already in %s", n, prev)
				continue
			}
			where[n] = list.name
		}
	}
}

// image checks that img names a profile or an image reference with a tag
// or digest, as profile.Resolve will resolve it for the runner.
func (v *validator) image(path, img string) {
	if _, err := profile.Resolve(img); err != nil {
		v.add(path, "%v", err)
	}
}
func (v *validator) sandbox(s Sandbox, pre string) {
	v.image(pre+"fs.image", s.FS.Image)
	v.positive(pre+"fs.workspace.size", float64(s.FS.Workspace.Size))
	v.positive(pre+"fs.tmp.size", float64(s.FS.Tmp.Size))
	if d := s.FS.Deps; d != "" {
		switch {
		case !filepath.IsAbs(d):
			v.add(pre+"fs.deps", "%q must be an absolute host path", d)
		case strings.Contains(filepath.Clean(d), "docker.sock"):
			v.add(pre+"fs.deps", "the Docker socket may never be mounted into a sandbox")
		default:
			// The runner checks the resolved directory again before each run.
			if err := hostdirs.Check(d, nil); err != nil {
				v.add(pre+"fs.deps", "%q may never be mounted into a sandbox: %v", d, err)
			}
		}
	}
	v.globs(pre+"fs.deny", s.FS.Deny)
	v.globs(pre+"fs.write_protect", s.FS.WriteProtect)
	v.writeProtectAllow(pre+"fs.write_protect_allow", s.FS.WriteProtectAllow)
	v.hostPatterns(pre+"net.allow", s.Net.Allow, nethost.ParseAllow)
	v.hostPatterns(pre+"net.deny", s.Net.Deny, nethost.ParsePattern)
	v.positive(pre+"proc.cpus", s.Proc.CPUs)
	if s.Proc.Memory < 6<<20 {
		v.add(pre+"proc.memory", "%s is below the 6m a container needs", s.Proc.Memory)
	}
	v.positive(pre+"proc.pids", float64(s.Proc.PIDs))
	v.positive(pre+"proc.timeout", float64(s.Proc.Timeout))
	if !validRuntime(s.Proc.Runtime) {
		v.add(pre+"proc.runtime", "runtime %q is not runc or runsc", s.Proc.Runtime)
	}
	switch u := s.Proc.User; {
	case u == 0:
		v.add(pre+"proc.user", "uid 0 (root) is never allowed")
	case u < 0 || u > 1<<31-2:
		v.add(pre+"proc.user", "uid %d is out of range", u)
	}
	v.positive(pre+"output.max_bytes", float64(s.Output.MaxBytes))
	if n := s.Output.MaxFiles; n < 0 || n > MaxOutputFiles {
		v.add(pre+"output.max_files", "%d is out of range: 0 (no files) to %d", n, MaxOutputFiles)
	}
	if n := s.Output.MaxFilesBytes; n > MaxOutputFilesBytes {
		v.add(pre+"output.max_files_bytes", "%s is over the most a run may return, %s", n, ByteSize(MaxOutputFilesBytes))
	}
	v.session(pre+"session.", s.Session)
}

// session checks sandbox.session: no negative duration and, when sessions
// are on, a positive max_lifetime no shorter than idle_timeout.
func (v *validator) session(pre string, s Session) {
	idle, life := s.IdleTimeout, s.MaxLifetime
	if idle < 0 {
		v.add(pre+"idle_timeout", "must not be negative (0 turns sessions off)")
	}
	switch {
	case life < 0:
		v.add(pre+"max_lifetime", "must not be negative")
	case idle > 0 && life == 0:
		v.add(pre+"max_lifetime", "must be greater than zero when idle_timeout is (sessions are on)")
	case idle > 0 && idle > life:
		v.add(pre+"idle_timeout", "%s is longer than max_lifetime %s", idle, life)
	}
}

// globs checks a list of host path globs (fs.deny): each compiles with the
// one matcher (internal/pathglob), and "~" is the only form of home
// directory ("~user/..." is not expanded in globs).
func (v *validator) globs(path string, globs []string) {
	for i, g := range globs {
		at := fmt.Sprintf("%s[%d]", path, i)
		switch {
		case strings.TrimSpace(g) == "":
			v.add(at, "empty glob")
		case strings.HasPrefix(g, "~") && g != "~" && !strings.HasPrefix(g, "~/"):
			v.add(at, "%q: only ~ and ~/ are expanded in globs, not ~user; write the home directory out", g)
		default:
			if _, err := pathglob.Compile([]string{g}); err != nil {
				v.add(at, "%q is not a glob: %v", g, errors.Unwrap(err))
			}
		}
	}
}

// writeProtectAllow checks the names of built-in write-protect groups to
// lift: each must exist, be liftable, appear once, and come with the group
// it lies within.
func (v *validator) writeProtectAllow(path string, names []string) {
	groups := map[string]ProtectGroup{}
	var liftable []string
	for _, g := range BuiltinWriteProtect() {
		groups[g.Name] = g
		if g.Liftable {
			liftable = append(liftable, g.Name)
		}
	}
	for i, n := range names {
		at := fmt.Sprintf("%s[%d]", path, i)
		g, ok := groups[n]
		switch {
		case !ok:
			v.add(at, "%q is not a built-in write-protect group (liftable: %s)", n, strings.Join(liftable, ", "))
		case !g.Liftable:
			v.add(at, "%q cannot be lifted: %s (liftable: %s)", n, g.Why, strings.Join(liftable, ", "))
		case slices.Index(names, n) < i:
			v.add(at, "%q is listed twice", n)
		case g.Within != "" && !slices.Contains(names, g.Within):
			v.add(at, "%q lies within %q, which still protects it: lift %q too", n, g.Within, g.Within)
		}
	}
}

func validRuntime(r string) bool { return r == "runc" || r == "runsc" }

// hostPatterns checks every entry of the host pattern list at path with
// parse (nethost.ParseAllow for allow lists and ceilings, which also
// refuses public-suffix-wide wildcards; nethost.ParsePattern for deny
// lists), and requires each to be written in its canonical form, so that
// equal patterns are equal strings in Rego and the audit log.
func (v *validator) hostPatterns(path string, list []string, parse func(string) (nethost.Pattern, error)) {
	for i, s := range list {
		at := fmt.Sprintf("%s[%d]", path, i)
		p, err := parse(s)
		switch {
		case err != nil:
			v.add(at, "%v", err)
		case p.String() != s:
			v.add(at, "%q is not written in canonical form; write %q", s, p)
		}
	}
}

// Override decodes raw, a partial sandbox section in JSON (or YAML), over a
// copy of the base sandbox and validates the result. Keys are matched
// exactly; unknown keys, duplicate keys and nulls are refused. Lists in raw
// replace the base lists. Ceilings are not checked here. It is
// QueryOverride without the code_calls section (which raw may carry).
func (p *Policy) Override(raw []byte) (Sandbox, error) {
	s, _, err := p.QueryOverride(raw)
	return s, err
}
