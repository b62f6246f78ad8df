package seccomp

import (
	"bytes"
	"encoding/json"
	"flag"
	"os/exec"
	"slices"
	"strings"
	"testing"

	mobyseccomp "github.com/moby/profiles/seccomp"
	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/gatekeeper-ai/gatekeeper/internal/goldenfile"
)

var update = flag.Bool("update", false, "rewrite gvisor.json from moby's default profile")

// fromMoby returns Docker's default profile with its clone3 rule traced
// instead of answered with ENOSYS, and ptrace taken out of every rule that
// allows it (so the default action refuses it), in the format of moby's
// own default.json.
func fromMoby(t *testing.T) []byte {
	t.Helper()
	p := mobyseccomp.DefaultProfile()
	clone3, ptrace := 0, 0
	for _, s := range p.Syscalls {
		if slices.Equal(s.Names, []string{"clone3"}) && s.Action == specs.ActErrno {
			if s.ErrnoRet == nil || *s.ErrnoRet != 38 { // ENOSYS
				t.Fatalf("moby's clone3 rule answers errno %v, not ENOSYS: read the rule again before changing it", s.ErrnoRet)
			}
			s.Action, s.ErrnoRet = specs.ActTrace, nil
			clone3++
		}
		if i := slices.Index(s.Names, "ptrace"); i >= 0 {
			if s.Action != specs.ActAllow || len(s.Args) != 0 || len(s.Names) == 1 {
				t.Fatalf("moby's rule %v for ptrace is not an allow among others: read it again before changing it", s.Names)
			}
			s.Names = slices.Delete(s.Names, i, i+1)
			ptrace++
		}
	}
	if clone3 != 1 || ptrace != 2 {
		t.Fatalf("moby's default profile has %d clone3 ENOSYS rules and %d rules allowing ptrace, want 1 and 2 (without and with CAP_SYS_PTRACE)", clone3, ptrace)
	}
	if p.DefaultAction != specs.ActErrno || p.DefaultErrnoRet == nil || *p.DefaultErrnoRet != 1 { // EPERM
		t.Fatalf("moby's default action is %s with errno %v, want %s with EPERM, which ptrace now gets", p.DefaultAction, p.DefaultErrnoRet, specs.ActErrno)
	}
	b, err := json.MarshalIndent(p, "", "\t")
	if err != nil {
		t.Fatal(err)
	}
	return append(b, '\n')
}

func TestTheProfileIsDockersDefaultWithClone3TracedAndPtraceRefused(t *testing.T) {
	t.Parallel()
	want := fromMoby(t)
	if *update {
		goldenfile.Write(t, "gvisor.json", want)
		return
	}
	if GVisor() != string(want) {
		t.Fatalf("gvisor.json is not moby's default profile with clone3 traced and ptrace refused; run go test ./runner/seccomp -update and review the diff")
	}
}

func TestClone3AndPtraceAreTheOnlyRulesThatDiffer(t *testing.T) {
	t.Parallel()
	var got, moby mobyseccomp.Seccomp
	if err := json.Unmarshal([]byte(GVisor()), &got); err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(mobyseccomp.DefaultProfile())
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &moby); err != nil {
		t.Fatal(err)
	}
	if len(got.Syscalls) != len(moby.Syscalls) || got.DefaultAction != specs.ActErrno {
		t.Fatalf("%d rules and default action %s, want moby's %d and %s", len(got.Syscalls), got.DefaultAction, len(moby.Syscalls), specs.ActErrno)
	}
	var differ []string
	for i := range got.Syscalls {
		g, m := mustJSON(t, got.Syscalls[i]), mustJSON(t, moby.Syscalls[i])
		if !bytes.Equal(g, m) {
			differ = append(differ, strings.Join(got.Syscalls[i].Names, ",")+" "+string(got.Syscalls[i].Action))
		}
	}
	want := []string{
		"process_vm_readv,process_vm_writev SCMP_ACT_ALLOW",
		"clone3 SCMP_ACT_TRACE",
		"kcmp,pidfd_getfd,process_madvise,process_vm_readv,process_vm_writev SCMP_ACT_ALLOW",
	}
	if !slices.Equal(differ, want) {
		t.Errorf("the rules that differ from moby's are %q, want %q: clone3 traced, ptrace out of the rules that allowed it", differ, want)
	}
}

// TestNoRuleAllowsPtrace checks gvisor.json under every condition (any
// capability, architecture or kernel): with ptrace on no rule, the default
// action refuses it, so no program becomes the tracer that clone3's
// SCMP_ACT_TRACE would hand its decision to.
func TestNoRuleAllowsPtrace(t *testing.T) {
	t.Parallel()
	var p mobyseccomp.Seccomp
	if err := json.Unmarshal([]byte(GVisor()), &p); err != nil {
		t.Fatal(err)
	}
	for _, s := range p.Syscalls {
		if slices.Contains(s.Names, "ptrace") || s.Name == "ptrace" {
			t.Errorf("a rule names ptrace: %s", mustJSON(t, s))
		}
	}
	if p.DefaultAction != specs.ActErrno || p.DefaultErrnoRet == nil || *p.DefaultErrnoRet != 1 {
		t.Errorf("default action %s with errno %v, want %s with EPERM", p.DefaultAction, p.DefaultErrnoRet, specs.ActErrno)
	}
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestDockerSecurityOptCarriesTheProfile(t *testing.T) {
	t.Parallel()
	got, ok := strings.CutPrefix(DockerSecurityOpt(), "seccomp=")
	var compact bytes.Buffer
	if err := json.Compact(&compact, []byte(GVisor())); err != nil {
		t.Fatal(err)
	}
	if !ok || got != compact.String() || strings.ContainsAny(got, "\n\t") {
		t.Errorf("DockerSecurityOpt = %.40q…, want seccomp= and the profile, compacted", DockerSecurityOpt())
	}
}

// TestEnsureKubeNamesTheFileAsThePodDoes pins scripts/ensure-kube's name
// for the file it writes into the kubelet's seccomp directory to the name
// gVisor Pods ask for.
func TestEnsureKubeNamesTheFileAsThePodDoes(t *testing.T) {
	t.Parallel()
	out, err := exec.CommandContext(t.Context(), "../../scripts/ensure-kube", "seccomp-profile").Output()
	if err != nil {
		t.Fatalf("ensure-kube seccomp-profile: %v", err)
	}
	if got := strings.TrimSpace(string(out)); got != LocalhostProfile() {
		t.Errorf("ensure-kube names the profile %q, the Pods ask for %q", got, LocalhostProfile())
	}
}

// TestLocalhostHasNoConditionsLeft checks the profile for the kubelet:
// containerd applies every rule of the file, so a rule kept only for a
// capability (unshare, clone3 allowed with CAP_SYS_ADMIN) or another
// architecture (s390's clone, which checks the flags in another argument)
// would open what Docker's resolution closes.
func TestLocalhostHasNoConditionsLeft(t *testing.T) {
	t.Parallel()
	b, err := Localhost()
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(b, []byte(`"includes"`)) || bytes.Contains(b, []byte(`"excludes"`)) || bytes.Contains(b, []byte(`"archMap"`)) {
		t.Fatalf("the Localhost profile keeps conditions containerd would ignore:\n%s", b)
	}
	var p specs.LinuxSeccomp
	if err := json.Unmarshal(b, &p); err != nil {
		t.Fatal(err)
	}
	actions := map[string][]string{}
	for _, s := range p.Syscalls {
		for _, n := range s.Names {
			actions[n] = append(actions[n], string(s.Action))
		}
	}
	for name, want := range map[string][]string{
		"clone3":            {"SCMP_ACT_TRACE"},
		"clone":             {"SCMP_ACT_ALLOW"}, // one rule, with the namespace flags masked out
		"unshare":           nil,
		"open_by_handle_at": nil,
		"perf_event_open":   nil,
		"bpf":               nil,
		"ptrace":            nil, // refused by the default action
		"process_vm_readv":  {"SCMP_ACT_ALLOW"},
		"read":              {"SCMP_ACT_ALLOW"},
	} {
		if !slices.Equal(actions[name], want) {
			t.Errorf("%s: rules %q, want %q", name, actions[name], want)
		}
	}
	if p.DefaultAction != specs.ActErrno || len(p.Architectures) == 0 {
		t.Errorf("default action %s, architectures %q; want %s and this machine's", p.DefaultAction, p.Architectures, specs.ActErrno)
	}
}
