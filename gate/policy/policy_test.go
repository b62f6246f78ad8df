package policy_test

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gatekeeper-ai/gatekeeper/gate/policy"
	"github.com/gatekeeper-ai/gatekeeper/runner/image/profile"
)

const minimal = "version: 1\nworkspace_root: /srv/app\n"

func decode(t *testing.T, src string) (*policy.Policy, error) {
	t.Helper()
	return policy.Decode("p.yaml", []byte(src), "/etc/gatekeeper")
}

func problems(t *testing.T, err error) []string {
	t.Helper()
	var pe *policy.Error
	if !errors.As(err, &pe) {
		t.Fatalf("error = %v, want *policy.Error", err)
	}
	return pe.Messages()
}

func TestShippedPolicyIsValid(t *testing.T) {
	t.Parallel()
	p, err := policy.Load("../../sandbox.policy.yaml")
	if err != nil {
		t.Fatalf("shipped policy: %v", err)
	}
	if !slices.Contains(p.Tools.Deny, "Bash") {
		t.Errorf("shipped policy does not deny Bash: %v", p.Tools.Deny)
	}
	if p.Sandbox.Net.Enabled {
		t.Errorf("shipped policy enables the network")
	}
	if !filepath.IsAbs(p.WorkspaceRoot) || filepath.Base(p.WorkspaceRoot) != "workspace" {
		t.Errorf("workspace_root = %q, want an absolute path ending in workspace", p.WorkspaceRoot)
	}
}

func TestDecodeDefaults(t *testing.T) {
	t.Parallel()
	p, err := decode(t, minimal)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Tools.Allow) != 0 || p.Sandbox.Net.Enabled || p.Sandbox.FS.Deps != "" {
		t.Errorf("zero policy grants something: %+v", p)
	}
	if p.Sandbox.Proc.User != 65534 || p.Sandbox.Proc.Memory != 256<<20 || p.Sandbox.Proc.Timeout.Std() != 10*time.Second {
		t.Errorf("defaults = %+v", p.Sandbox.Proc)
	}
	if p.Ceilings.Memory != p.Sandbox.Proc.Memory || !slices.Equal(p.Ceilings.Runtimes, []string{"runc"}) {
		t.Errorf("absent ceilings do not equal the base: %+v", p.Ceilings)
	}
}

func TestDecodeImage(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, src, want string
	}{
		{"no image is the default profile", minimal, profile.Default},
		{"an empty image is the default profile", minimal + "sandbox:\n  fs:\n    image: \"\"\n", profile.Default},
		{"a profile stays its name", minimal + "sandbox:\n  fs:\n    image: python-data\n", "python-data"},
		{"an image reference with a tag stays as written", minimal + "sandbox:\n  fs:\n    image: registry.example/sandbox:1.2\n", "registry.example/sandbox:1.2"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p, err := decode(t, tc.src)
			if err != nil {
				t.Fatal(err)
			}
			if p.Sandbox.FS.Image != tc.want {
				t.Fatalf("sandbox.fs.image = %q, want %q", p.Sandbox.FS.Image, tc.want)
			}
		})
	}
}

func TestDecodeRelativeWorkspaceRoot(t *testing.T) {
	t.Parallel()
	p, err := decode(t, "version: 1\nworkspace_root: ./ws/../work\n")
	if err != nil {
		t.Fatal(err)
	}
	if p.WorkspaceRoot != "/etc/gatekeeper/work" {
		t.Errorf("workspace_root = %q", p.WorkspaceRoot)
	}
}

func TestDecodeErrorsNameTheirLocation(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, src string
		want      []string
	}{
		{"an unknown top-level key", minimal + "tool:\n  allow: [Read]\n", []string{`p.yaml:3:1: tool: unknown key "tool"`}},
		{"an unknown nested key", minimal + "sandbox:\n  proc:\n    memroy: 1g\n", []string{`p.yaml:5:5: sandbox.proc.memroy: unknown key "memroy"`}},
		{"a key differing only in case", minimal + "sandbox:\n  proc:\n    Memory: 1g\n", []string{`p.yaml:5:5: sandbox.proc.Memory: unknown key "Memory"`}},
		{"a duplicate key", minimal + "tools:\n  allow: [Read]\n  allow: [Bash]\n", []string{`p.yaml:5:3: tools.allow: key "allow" appears twice`}},
		{"a bad size", minimal + "sandbox:\n  proc:\n    memory: lots\n", []string{`p.yaml:5:`, `size "lots"`}},
		{"a bad duration", minimal + "sandbox:\n  proc:\n    timeout: forever\n", []string{`p.yaml:5:`, `duration "forever"`}},
		{"a string for an integer", minimal + "sandbox:\n  proc:\n    pids: many\n", []string{`p.yaml:5:`, `cannot unmarshal`}},
		{"a list where a mapping belongs", minimal + "sandbox: [a]\n", []string{`p.yaml:3:10: sandbox: expected a mapping`}},
		{"a null value", minimal + "sandbox:\n  net:\n    enabled: ~\n", []string{`p.yaml:5:14: sandbox.net.enabled: null is not a value`}},
		{"broken YAML syntax", "version: 1\nworkspace_root: [\n", []string{`p.yaml:2: did not find expected node content`}},
		{"two documents", minimal + "---\nversion: 1\n", []string{`more than one YAML document`}},
		{"uid zero", minimal + "sandbox:\n  proc:\n    user: 0\n", []string{`p.yaml:5:11: sandbox.proc.user: uid 0 (root) is never allowed`}},
		{"an unknown runtime", minimal + "sandbox:\n  proc:\n    runtime: kata\n", []string{`p.yaml:5:14: sandbox.proc.runtime: runtime "kata" is not runc or runsc`}},
		{"a tool in two lists", minimal + "tools:\n  allow: [Bash]\n  deny: [Bash]\n", []string{`p.yaml:5:9: tools.deny[0]: tool "Bash" is already in tools.allow`}},
		{"a tool name with a space", minimal + "tools:\n  allow: [\"Read \"]\n", []string{`tools.allow[0]: tool name "Read " has characters`}},
		{"the docker socket as deps", minimal + "sandbox:\n  fs:\n    deps: /var/run/docker.sock\n", []string{`sandbox.fs.deps: the Docker socket`}},
		{"the host root as deps", minimal + "sandbox:\n  fs:\n    deps: /\n", []string{`sandbox.fs.deps: "/" may never be mounted`}},
		{"a home directory as deps", minimal + "sandbox:\n  fs:\n    deps: /home/alice\n", []string{`may never be mounted`}},
		{"a directory inside a home directory as deps", minimal + "sandbox:\n  fs:\n    deps: /home/alice/venv\n", []string{`sandbox.fs.deps: "/home/alice/venv" may never be mounted into a sandbox: deps dir /home/alice/venv lies within protected path /home`}},
		{"the containerd state as deps", minimal + "sandbox:\n  fs:\n    deps: /var/lib/containerd\n", []string{`lies within protected path /var/lib/containerd`}},
		{"a deny glob that does not compile", minimal + "sandbox:\n  fs:\n    deny: [\"/srv/[ab\"]\n", []string{`p.yaml:5:11: sandbox.fs.deny[0]: "/srv/[ab" is not a glob`}},
		{"a deny glob naming another user's home", minimal + "sandbox:\n  fs:\n    deny: [\"~bob/.ssh/**\"]\n", []string{`sandbox.fs.deny[0]: "~bob/.ssh/**": only ~ and ~/ are expanded`}},
		{"an empty write-protect glob", minimal + "sandbox:\n  fs:\n    write_protect: [\"**/x\", \" \"]\n", []string{`p.yaml:5:20: sandbox.fs.write_protect[1]: empty glob`}},
		{"a write-protect glob that does not compile", minimal + "sandbox:\n  fs:\n    write_protect: [\"{a,b\"]\n", []string{`sandbox.fs.write_protect[0]: "{a,b" is not a glob`}},
		{"an unknown write-protect group", minimal + "sandbox:\n  fs:\n    write_protect_allow: [git_hook]\n", []string{`p.yaml:5:26: sandbox.fs.write_protect_allow[0]: "git_hook" is not a built-in write-protect group (liftable: agent_memory, git_dir, git_config, ide_config)`}},
		{"a write-protect group that cannot be lifted", minimal + "sandbox:\n  fs:\n    write_protect_allow: [agent_config]\n", []string{`sandbox.fs.write_protect_allow[0]: "agent_config" cannot be lifted: it is Claude Code's own configuration`}},
		{"git hooks cannot be lifted", minimal + "sandbox:\n  fs:\n    write_protect_allow: [git_dir, git_hooks]\n", []string{`sandbox.fs.write_protect_allow[1]: "git_hooks" cannot be lifted`}},
		{"a group listed twice", minimal + "sandbox:\n  fs:\n    write_protect_allow: [ide_config, ide_config]\n", []string{`sandbox.fs.write_protect_allow[1]: "ide_config" is listed twice`}},
		{"git_config lifted without git_dir", minimal + "sandbox:\n  fs:\n    write_protect_allow: [git_config]\n", []string{`sandbox.fs.write_protect_allow[0]: "git_config" lies within "git_dir", which still protects it: lift "git_dir" too`}},
		{"a bad host pattern", minimal + "sandbox:\n  net:\n    allow: [\"http://x.com\"]\n", []string{`p.yaml:5:12: sandbox.net.allow[0]: bad host pattern "http://x.com": a host pattern names a host (example.com), not a URL`}},
		{"the root as workspace", "version: 1\nworkspace_root: /\n", []string{`workspace_root: / would expose the whole host`}},
		{"no workspace", "version: 1\n", []string{`workspace_root: is required`}},
		{"version 2", "version: 2\nworkspace_root: /srv\n", []string{`p.yaml:1:10: version: version 2 is not supported`}},
		{"memory below the container minimum", minimal + "sandbox:\n  proc:\n    memory: 1m\n", []string{`sandbox.proc.memory: 1m is below`}},
		{"a negative file count", minimal + "sandbox:\n  output:\n    max_files: -1\n", []string{`p.yaml:5:16: sandbox.output.max_files: -1 is out of range: 0 (no files) to 1000`}},
		{"a file count over the hard bound", minimal + "sandbox:\n  output:\n    max_files: 1001\n", []string{`sandbox.output.max_files: 1001 is out of range`}},
		{"file bytes over the hard bound", minimal + "sandbox:\n  output:\n    max_files_bytes: 65m\n", []string{`p.yaml:5:22: sandbox.output.max_files_bytes: 65m is over the most a run may return, 64m`}},
		{"a negative file ceiling", minimal + "ceilings:\n  output_files: -3\n", []string{`ceilings.output_files: must not be negative`}},
		{"a misspelt image profile", minimal + "sandbox:\n  fs:\n    image: pyhton\n", []string{`p.yaml:5:12: sandbox.fs.image: unknown image profile "pyhton" (profiles: minimal, python, python-data, node;`}},
		{"an image without a tag", minimal + "sandbox:\n  fs:\n    image: registry.example/sandbox\n", []string{`p.yaml:5:12: sandbox.fs.image: unknown image profile "registry.example/sandbox"`}},
		{"a malformed image reference", minimal + "sandbox:\n  fs:\n    image: \"UPPER:1\"\n", []string{`p.yaml:5:12: sandbox.fs.image: image "UPPER:1" is not a valid image reference`}},
		{"an unknown profile in the ceilings", minimal + "ceilings:\n  images: [python-data, nodejs]\n", []string{`p.yaml:4:11: ceilings.images[1]: unknown image profile "nodejs"`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := decode(t, tc.src)
			if err == nil {
				t.Fatal("decoded without error")
			}
			got := strings.Join(problems(t, err), "\n")
			for _, w := range tc.want {
				if !strings.Contains(got, w) {
					t.Errorf("problems\n%s\ndo not contain %q", got, w)
				}
			}
		})
	}
}

func TestDecodeReportsEveryProblem(t *testing.T) {
	t.Parallel()
	_, err := decode(t, "version: 1\nworkspace_root: /srv\nsandbox:\n  proc:\n    user: 0\n    runtime: kata\n    cpus: 0\n")
	if got := problems(t, err); len(got) != 3 {
		t.Errorf("got %d problems, want 3: %q", len(got), got)
	}
}

func TestOverride(t *testing.T) {
	t.Parallel()
	base, err := decode(t, minimal+"sandbox:\n  fs:\n    deny: [\"~/.ssh/**\"]\n  net:\n    allow: [a.example]\n")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		raw     string
		check   func(t *testing.T, s policy.Sandbox)
		wantErr string
	}{
		{name: "an empty override is the base", raw: ``, check: func(t *testing.T, s policy.Sandbox) {
			if s.Proc.Memory != base.Sandbox.Proc.Memory {
				t.Errorf("memory = %v", s.Proc.Memory)
			}
		}},
		{name: "a string size and duration replace only their keys", raw: `{"proc":{"memory":"512m","timeout":"30s"}}`, check: func(t *testing.T, s policy.Sandbox) {
			if s.Proc.Memory != 512<<20 || s.Proc.Timeout.Std() != 30*time.Second || s.Proc.PIDs != 128 {
				t.Errorf("proc = %+v", s.Proc)
			}
		}},
		{name: "numbers are bytes and milliseconds", raw: `{"proc":{"memory":8388608,"timeout":1500}}`, check: func(t *testing.T, s policy.Sandbox) {
			if s.Proc.Memory != 8<<20 || s.Proc.Timeout.Std() != 1500*time.Millisecond {
				t.Errorf("proc = %+v", s.Proc)
			}
		}},
		{name: "a list replaces the base list", raw: `{"net":{"enabled":true,"allow":["b.example"]}}`, check: func(t *testing.T, s policy.Sandbox) {
			if !s.Net.Enabled || !slices.Equal(s.Net.Allow, []string{"b.example"}) {
				t.Errorf("net = %+v", s.Net)
			}
		}},
		{name: "pretty-printed JSON with tabs", raw: "{\n\t\"proc\": {\n\t\t\"pids\": 64\n\t}\n}", check: func(t *testing.T, s policy.Sandbox) {
			if s.Proc.PIDs != 64 {
				t.Errorf("pids = %d", s.Proc.PIDs)
			}
		}},
		{name: "an unknown key is refused", raw: `{"proc":{"privileged":true}}`, wantErr: `sandbox.proc.privileged: unknown key "privileged"`},
		{name: "a read-only switch does not exist", raw: `{"fs":{"read_only":false}}`, wantErr: `sandbox.fs.read_only: unknown key`},
		{name: "a case-variant key is refused", raw: `{"proc":{"Memory":"8g"}}`, wantErr: `unknown key "Memory"`},
		{name: "a duplicate key is refused", raw: `{"proc":{"memory":"1g","memory":"8g"}}`, wantErr: `sandbox.proc.memory: key "memory" appears twice`},
		{name: "root is refused", raw: `{"proc":{"user":0}}`, wantErr: `sandbox_policy:1:17: sandbox.proc.user: uid 0 (root) is never allowed`},
		{name: "a null is refused", raw: `{"net":null}`, wantErr: `null is not a value`},
		{name: "a whole policy is not a sandbox section", raw: `{"tools":{"allow":["Bash"]}}`, wantErr: `sandbox.tools: unknown key "tools"`},
		{name: "a profile is chosen by name", raw: `{"fs":{"image":"node"}}`, check: func(t *testing.T, s policy.Sandbox) {
			if s.FS.Image != "node" {
				t.Errorf("image = %q", s.FS.Image)
			}
		}},
		{name: "an empty image asks for the default profile", raw: `{"fs":{"image":""}}`, check: func(t *testing.T, s policy.Sandbox) {
			if s.FS.Image != profile.Default {
				t.Errorf("image = %q, want %q", s.FS.Image, profile.Default)
			}
		}},
		{name: "an unknown profile is refused with its location", raw: `{"fs":{"image":"ruby"}}`, wantErr: `sandbox_policy:1:16: sandbox.fs.image: unknown image profile "ruby"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s, err := base.Override([]byte(tc.raw))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			tc.check(t, s)
		})
	}
	if !slices.Equal(base.Sandbox.Net.Allow, []string{"a.example"}) || base.Sandbox.Proc.Memory != 256<<20 {
		t.Errorf("override changed the base: %+v", base.Sandbox)
	}
}

func TestByteSize(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]policy.ByteSize{"4096": 4096, "1k": 1024, "512m": 512 << 20, "1g": 1 << 30, "64Mi": 64 << 20, "2GiB": 2 << 30, "3 MB": 3 << 20} {
		got, err := policy.ParseByteSize(in)
		if err != nil || got != want {
			t.Errorf("ParseByteSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "-1m", "1.5g", "g", "99999999999t"} {
		if _, err := policy.ParseByteSize(in); err == nil {
			t.Errorf("ParseByteSize(%q) succeeded", in)
		}
	}
	if s := policy.ByteSize(8 << 30).String(); s != "8g" {
		t.Errorf("String = %q", s)
	}
}

func TestLoadNamesAMissingFile(t *testing.T) {
	t.Parallel()
	_, err := policy.Load(filepath.Join(t.TempDir(), "nope.yaml"))
	if !errors.Is(err, os.ErrNotExist) || !strings.Contains(err.Error(), "nope.yaml") {
		t.Errorf("err = %v", err)
	}
}
