package policy_test

import (
	"errors"
	"os"
	"testing"

	"github.com/gatekeeper-ai/gatekeeper/gate/policy"
)

// FuzzDecode: the loader never panics; what it accepts validates, and what it
// refuses is an *Error with at least one problem.
func FuzzDecode(f *testing.F) {
	shipped, err := os.ReadFile("../../sandbox.policy.yaml")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(shipped)
	f.Add([]byte(minimal))
	f.Add([]byte(minimal + "sandbox:\n  proc: {memory: 1g, timeout: 1m30s, user: 1000}\n"))
	f.Add([]byte("version: 1\nworkspace_root: &a /x\ntools: *a\n"))
	f.Add([]byte(minimal + "mcp_servers:\n  a: {command: [srv, -v], env: {T: {from_env: T}, L: x}}\n  b: {url: https://x.example/mcp, headers: {X: {from_file: /t}}}\n"))
	f.Add([]byte("{\"version\": 1, \"workspace_root\": \"/w\", \"sandbox\": {\"net\": {\"allow\": [\"*.x.com:443\"]}}}"))
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := policy.Decode("f.yaml", data, "/base")
		if err != nil {
			var pe *policy.Error
			if !errors.As(err, &pe) || len(pe.Problems) == 0 {
				t.Fatalf("error %v is not an *Error with problems", err)
			}
			return
		}
		if err := p.Validate(); err != nil {
			t.Fatalf("accepted policy does not validate: %v", err)
		}
		if _, err := p.Override(nil); err != nil {
			t.Fatalf("empty override of an accepted policy: %v", err)
		}
	})
}
