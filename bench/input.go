package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
)

// Call is one tool call as the harness sends it.
type Call struct {
	ToolName  string         `json:"tool_name"`
	ToolInput map[string]any `json:"tool_input"`
	ToolUseID string         `json:"tool_use_id"`
	Event     string         `json:"event"`
	MCPServer *MCPServer     `json:"mcp_server,omitempty"`
}

// MCPServer is a decide frame's mcp_server.
type MCPServer struct {
	Name   string `json:"name"`
	Source string `json:"source"`
}

// Decision is a decision's three fields, as the sidecar, OPA and the JS
// floor all return them.
type Decision struct {
	Decision string `json:"decision"`
	Reason   string `json:"reason"`
	Rule     string `json:"rule"`
}

// dumpToolUseID marks the call whose Rego input the dump rule reports.
const dumpToolUseID = "bench-dump-input"

// dumpRego is an operator rule (loaded with --rego-dir) that denies the
// marked call with the whole Rego input as its reason. Its rule name sorts
// before every built-in one, so it is the reported deny.
const dumpRego = `package gatekeeper

# bench: report the input the sidecar built for the marked call.
deny contains {"rule": "bench.dump_input", "reason": json.marshal(input)} if input.tool_use_id == "` + dumpToolUseID + `"
`

// RegoInput returns the exact input object the sidecar gives its Rego for
// call, and the decision the sidecar makes for it. Both come from the
// sidecar's own code: `gatekeeper decide` (the same gate package as
// `gatekeeper serve`), once with an extra rule that hands the input back as
// its reason, once without. The input's tool_use_id is call's.
func RegoInput(ctx context.Context, bin, policyFile, dir string, call Call) (map[string]any, Decision, error) {
	regoDir := filepath.Join(dir, "dump-rego")
	if err := os.MkdirAll(regoDir, 0o755); err != nil {
		return nil, Decision{}, err
	}
	if err := os.WriteFile(filepath.Join(regoDir, "dump.rego"), []byte(dumpRego), 0o644); err != nil {
		return nil, Decision{}, err
	}
	marked := call
	marked.ToolUseID = dumpToolUseID
	dumped, err := decideCLI(ctx, bin, policyFile, regoDir, marked)
	if err != nil {
		return nil, Decision{}, err
	}
	if dumped.Rule != "bench.dump_input" {
		return nil, Decision{}, fmt.Errorf("dump rule did not decide (rule %s): %s", dumped.Rule, dumped.Reason)
	}
	var input map[string]any
	if err := json.Unmarshal([]byte(dumped.Reason), &input); err != nil {
		return nil, Decision{}, fmt.Errorf("dumped input: %w", err)
	}
	input["tool_use_id"] = call.ToolUseID
	want, err := decideCLI(ctx, bin, policyFile, "", call)
	if err != nil {
		return nil, Decision{}, err
	}
	return input, want, nil
}

func decideCLI(ctx context.Context, bin, policyFile, regoDir string, call Call) (Decision, error) {
	args := []string{"decide", "--policy", policyFile}
	if regoDir != "" {
		args = append(args, "--rego-dir", regoDir)
	}
	in, err := json.Marshal(call)
	if err != nil {
		return Decision{}, err
	}
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Stdin = bytes.NewReader(in)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	var ee *exec.ExitError
	if err != nil && !(errors.As(err, &ee) && (ee.ExitCode() == 1 || ee.ExitCode() == 3)) {
		return Decision{}, fmt.Errorf("gatekeeper decide: %w: %s", err, stderr.Bytes())
	}
	var d Decision
	if err := json.Unmarshal(out, &d); err != nil {
		return Decision{}, fmt.Errorf("gatekeeper decide output %.200s: %w", out, err)
	}
	return d, nil
}

var (
	workspaceRootRE = regexp.MustCompile(`(?m)^workspace_root:.*$`)
	runtimeRE       = regexp.MustCompile(`(?m)^(\s+runtime:\s*)runc\b`)
)

// WritePolicy writes the shipped policy (sandbox.policy.yaml) to
// dir/NAME.policy.yaml with its workspace at dir/workspace and the given
// runtime, and returns the file's path. It fails if the shipped policy no
// longer has the lines it rewrites.
func WritePolicy(shipped []byte, dir, name, runtime string) (string, error) {
	if len(workspaceRootRE.FindAll(shipped, -1)) != 1 || len(runtimeRE.FindAll(shipped, -1)) != 1 {
		return "", errors.New("sandbox.policy.yaml: expected one workspace_root line and one `runtime: runc` line")
	}
	p := workspaceRootRE.ReplaceAll(shipped, []byte("workspace_root: ./workspace"))
	p = runtimeRE.ReplaceAll(p, []byte("${1}"+runtime))
	path := filepath.Join(dir, name+".policy.yaml")
	return path, os.WriteFile(path, p, 0o644)
}
