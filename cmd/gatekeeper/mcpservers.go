package main

import (
	"context"
	"log/slog"
	"slices"
	"strings"

	"github.com/gatekeeper-ai/gatekeeper/gate"
	"github.com/gatekeeper-ai/gatekeeper/gate/audit"
	"github.com/gatekeeper-ai/gatekeeper/gate/policy"
	"github.com/gatekeeper-ai/gatekeeper/runner/mcpservers"
)

// startMCPServers starts the client to the policy's mcp_servers (as the
// policy is at start, with its code_calls.max_result_bytes as the bound
// the client reads of a result; a reload changes neither) and connects every
// server in the background, logging each one's state. It returns nil when
// the policy configures none.
func startMCPServers(ctx context.Context, eng *gate.Engine, log *slog.Logger) (*mcpservers.Servers, error) {
	eff, err := baseEffective(ctx, eng)
	if err != nil {
		return nil, err
	}
	configs := mcpConfigs(eff.Policy.MCPServers)
	if len(configs) == 0 {
		return nil, nil
	}
	s, err := mcpservers.New(configs, mcpOptions(eff, log))
	if err != nil {
		return nil, err
	}
	go func() {
		for name, err := range s.Connect(ctx) {
			if err != nil && ctx.Err() == nil {
				log.Warn("mcp server unavailable at start; its calls fail until it connects", "mcp_server", name, "err", err)
			}
		}
	}()
	return s, nil
}

// runToolServers is the client to eff's mcp_servers for one run of
// gatekeeper run, or nil when the policy declares none or its code may
// call none. Servers connect on first use.
func runToolServers(eff *gate.Effective, log *slog.Logger) (*mcpservers.Servers, error) {
	if len(eff.Policy.MCPServers) == 0 || len(eff.Policy.CodeCalls.Callable) == 0 {
		return nil, nil
	}
	return mcpservers.New(mcpConfigs(eff.Policy.MCPServers), mcpOptions(eff, log))
}

// mcpOptions are the MCP client's options under eff: a result is read up
// to its code_calls.max_result_bytes.
func mcpOptions(eff *gate.Effective, log *slog.Logger) mcpservers.Options {
	return mcpservers.Options{Logger: log, MaxResultBytes: int64(eff.Policy.CodeCalls.MaxResultBytes)}
}

// logCodeCalls is gatekeeper run's gate.Auditor: one log line per nested
// call, as logEgress has one per connection.
type logCodeCalls struct{ log *slog.Logger }

func (l logCodeCalls) Write(r audit.Record) error {
	l.log.Info("code_call", "run_id", r.RunID, "seq", r.CallSeq, "server", r.Server, "tool", r.Tool,
		"decision", r.Decision, "rule", r.Rule, "reason", r.Reason, "arguments_bytes", r.ArgumentsBytes,
		"result_bytes", r.ResultBytes, "duration_ms", r.DurationMS, "error_kind", r.ErrorKind, "error", r.Error)
	return nil
}

// mcpConfigs converts the policy's servers, sorted by name.
func mcpConfigs(servers map[string]policy.MCPServer) []mcpservers.Config {
	var out []mcpservers.Config
	for name, s := range servers {
		out = append(out, mcpservers.Config{
			Name: name, Description: s.Description, Command: s.Argv(), URL: s.URL,
			Env: mcpValues(s.Env), Headers: mcpValues(s.Headers),
		})
	}
	slices.SortFunc(out, func(a, b mcpservers.Config) int { return strings.Compare(a.Name, b.Name) })
	return out
}

func mcpValues(m map[string]policy.MCPValue) map[string]mcpservers.Value {
	if len(m) == 0 {
		return nil
	}
	out := make(map[string]mcpservers.Value, len(m))
	for k, v := range m {
		out[k] = mcpservers.Value{Literal: v.Literal, FromEnv: v.FromEnv, FromFile: v.FromFile}
	}
	return out
}
