package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/gatekeeper-ai/gatekeeper/gate"
	"github.com/gatekeeper-ai/gatekeeper/gate/audit"
	"github.com/gatekeeper-ai/gatekeeper/gate/decisionlog"
	"github.com/gatekeeper-ai/gatekeeper/gate/server"
)

// decisionLogOptions are serve's --decision-log flags (docs/DECISION-LOGS.md).
type decisionLogOptions struct {
	url, tokenFile, caFile, overflow string
	labels                           listFlag
	batchEvents, batchBytes          int
	minBackoff, maxBackoff           time.Duration
	maxBacklog                       int64
}

func decisionLogFlags(fs *flag.FlagSet) *decisionLogOptions {
	o := &decisionLogOptions{}
	fs.StringVar(&o.url, "decision-log", "", "ship every audit line to this OPA decision-log endpoint, the service's full logs URL, e.g. https://logs.example.com/logs (docs/DECISION-LOGS.md; off when empty)")
	fs.StringVar(&o.tokenFile, "decision-log-token-file", "", "file holding the decision-log service's bearer token, read again before every attempt")
	fs.StringVar(&o.caFile, "decision-log-ca-file", "", "PEM CA certificates trusted for the decision-log service, besides the system's")
	fs.Var(&o.labels, "decision-log-label", "k=v label added to every shipped event (repeatable; id, version and app are gatekeeper's)")
	fs.IntVar(&o.batchEvents, "decision-log-batch-events", decisionlog.DefaultBatchEvents, "most events in one POST")
	fs.IntVar(&o.batchBytes, "decision-log-batch-bytes", decisionlog.DefaultBatchBytes, "about the most bytes of JSON, before gzip, in one POST")
	fs.DurationVar(&o.minBackoff, "decision-log-min-backoff", decisionlog.DefaultMinBackoff, "first wait after a failed POST; doubled at each failure, with jitter")
	fs.DurationVar(&o.maxBackoff, "decision-log-max-backoff", decisionlog.DefaultMaxBackoff, "longest wait between two POSTs")
	fs.Int64Var(&o.maxBacklog, "decision-log-max-backlog", decisionlog.DefaultMaxBacklog, "audit lines written and not yet acknowledged by the service before --decision-log-overflow applies")
	fs.StringVar(&o.overflow, "decision-log-overflow", string(decisionlog.Block), "at the backlog bound: block (deny new tool calls until the service catches up; /readyz answers 503) or drop (skip the oldest unshipped lines and write an audit line counting them)")
	return o
}

// open makes the shipper on the audit log; nil without --decision-log.
func (o *decisionLogOptions) open(alog *audit.Log, auditPath, instance string, fromBundle bool, log *slog.Logger) (*decisionlog.Shipper, error) {
	if o.url == "" {
		return nil, nil
	}
	labels := map[string]string{}
	for _, kv := range o.labels {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("--decision-log-label %q: want k=v", kv)
		}
		labels[k] = v
	}
	opts := decisionlog.Options{
		URL: o.url, AuditPath: auditPath, Head: alog.Head, Writer: alog, Instance: instance, Version: version,
		Labels: labels, TokenFile: o.tokenFile, CAFile: o.caFile, BatchEvents: o.batchEvents, BatchBytes: o.batchBytes,
		MinBackoff: o.minBackoff, MaxBackoff: o.maxBackoff, MaxBacklog: o.maxBacklog, Overflow: decisionlog.Overflow(o.overflow),
		Logger: log,
	}
	if fromBundle {
		opts.Bundle = "gatekeeper"
	}
	return decisionlog.New(opts)
}

// startDecisionLog wires the shipper into the server's config (the hold
// on decisions, /readyz) and runs it; stop stops it, before the audit log
// closes.
func startDecisionLog(sh *decisionlog.Shipper, cfg *server.Config, eng *gate.Engine) (stop func()) {
	cfg.Hold = sh.Hold
	base := cfg.Readiness
	cfg.Readiness = func() (any, bool) {
		st := sh.Status()
		backlog := st.Backlog
		if base == nil {
			return map[string]any{"ready": st.Ready(), "policy_revision": eng.Revision(), "decision_log_backlog": backlog, "decision_log": st}, st.Ready()
		}
		status, ready := base()
		if rs, ok := status.(readyStatus); ok {
			rs.DecisionLogBacklog, rs.DecisionLog = &backlog, &st
			status = rs
		}
		return status, ready && st.Ready()
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = sh.Run(ctx) // a stop is logged by Run and shown in /readyz
	}()
	return func() { cancel(); <-done }
}
