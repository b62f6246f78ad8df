package gate

import (
	"maps"
	"slices"
	"testing"

	"github.com/open-policy-agent/opa/v1/ast"
	oparego "github.com/open-policy-agent/opa/v1/rego"

	"github.com/gatekeeper-ai/gatekeeper/gate/wire"
	"github.com/gatekeeper-ai/gatekeeper/internal/nethost"
	builtin "github.com/gatekeeper-ai/gatekeeper/rego"
)

// TestToolKindAgreesWithRego pins that input.tool_kind classifies tools
// exactly as the built-in policy's host_fs_tools and host_net_tools do: a
// host file tool the sidecar called "other" would be allowed by
// tools.allow_list without its paths being judged.
func TestToolKindAgreesWithRego(t *testing.T) {
	t.Parallel()
	fs, nets := builtinSet(t, "host_fs_tools"), builtinSet(t, "host_net_tools")
	if got := slices.Sorted(maps.Keys(pathFields)); !slices.Equal(got, fs) {
		t.Errorf("the sidecar judges the paths of %v; Rego's host_fs_tools is %v", got, fs)
	}
	want := map[string]string{}
	for _, n := range fs {
		want[n] = "host_fs"
	}
	for _, n := range nets {
		want[n] = "host_net"
	}
	for _, n := range []string{"Bash", "Task", "TodoWrite", wire.SandboxTool, "read", "READ", "Read ", "webfetch", "mcp__fs__Read", ""} {
		want[n] = "other"
	}
	for name, kind := range want {
		if got := toolKind(name); got != kind {
			t.Errorf("toolKind(%q) = %q; want %q", name, got, kind)
		}
	}
}

// TestBuiltinBlockRulesAgreeWithNethost pins the Rego copy of the built-in
// block kinds (_builtin_rules) to nethost.BlockKinds: a kind the sidecar
// reports in url.builtin without a rule would deny only when the host is not
// allowlisted, and then under another rule's name.
func TestBuiltinBlockRulesAgreeWithNethost(t *testing.T) {
	t.Parallel()
	c := builtinCompiler(t)
	rs, err := oparego.New(oparego.Query("data.gatekeeper._builtin_rules"), oparego.Compiler(c)).Eval(t.Context())
	if err != nil || len(rs) != 1 {
		t.Fatalf("data.gatekeeper._builtin_rules: %v %v", rs, err)
	}
	got := rs[0].Expressions[0].Value.(map[string]any)
	want := map[string]any{}
	for _, k := range nethost.BlockKinds() {
		want[k] = "net." + k
	}
	if !maps.Equal(got, want) {
		t.Errorf("Rego's _builtin_rules is %v; nethost.BlockKinds() wants %v", got, want)
	}
}

// builtinSet evaluates data.gatekeeper.<name>, a set of strings of the
// built-in policy, and returns it sorted.
func builtinSet(t *testing.T, name string) []string {
	t.Helper()
	rs, err := oparego.New(oparego.Query("data.gatekeeper."+name), oparego.Compiler(builtinCompiler(t))).Eval(t.Context())
	if err != nil || len(rs) != 1 {
		t.Fatalf("data.gatekeeper.%s: %v %v", name, rs, err)
	}
	var out []string
	for _, v := range rs[0].Expressions[0].Value.([]any) {
		out = append(out, v.(string))
	}
	slices.Sort(out)
	return out
}

// builtinCompiler compiles the built-in policy alone.
func builtinCompiler(t *testing.T) *ast.Compiler {
	t.Helper()
	mods, err := builtin.Builtin()
	if err != nil {
		t.Fatal(err)
	}
	c, err := builtin.Compile(mods)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestWriteToolsAgreeWithRego pins hostFSWriteTools, the tools whose paths
// get the git_repository fact, to Rego's host_fs_write_tools: a write tool
// missing from the Go set would never be refused a git repository.
func TestWriteToolsAgreeWithRego(t *testing.T) {
	t.Parallel()
	if got, want := slices.Sorted(maps.Keys(hostFSWriteTools)), builtinSet(t, "host_fs_write_tools"); !slices.Equal(got, want) {
		t.Errorf("hostFSWriteTools is %v; Rego's host_fs_write_tools is %v", got, want)
	}
}
