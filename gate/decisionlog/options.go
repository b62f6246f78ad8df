// Package decisionlog ships every line of the sidecar's audit log
// (gate/audit) to a remote service in OPA's decision-log format
// (docs/DECISION-LOGS.md): batched, gzipped JSON arrays of events POSTed
// to the service's logs endpoint, retried with backoff and jitter.
//
// The audit log itself is the queue: a Shipper follows it from disk
// (rotated and compressed files included), verifies its chain as it reads,
// and keeps a cursor, the last line the receiver acknowledged, in a small
// file beside it. Nothing is copied to a second queue and memory stays
// bounded by one batch whatever the receiver does. The backlog, lines
// written and not yet acknowledged, is bounded: at the bound either new
// decisions are denied (Block, see Shipper.Hold) or the oldest unshipped
// lines are dropped and a decision_log audit line, itself shipped, says
// which (Drop).
package decisionlog

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"time"

	"github.com/gatekeeper-ai/gatekeeper/gate/audit"
	"github.com/gatekeeper-ai/gatekeeper/internal/nethost"
)

// Overflow says what happens when the backlog reaches Options.MaxBacklog.
type Overflow string

const (
	// Block denies new tool-call decisions (Shipper.Hold) until the
	// backlog falls below the bound: nothing is lost.
	Block Overflow = "block"
	// Drop skips the oldest unshipped lines beyond the bound and writes
	// a decision_log audit line counting them.
	Drop Overflow = "drop"
)

// Defaults for the zero fields of Options.
const (
	DefaultBatchEvents = 500
	DefaultBatchBytes  = 4 << 20
	DefaultMinBackoff  = 100 * time.Millisecond
	DefaultMaxBackoff  = 30 * time.Second
	DefaultMaxBacklog  = 1_000_000
	DefaultPoll        = 200 * time.Millisecond
)

// Rules of the lines and denials the shipper causes.
const (
	// RuleBacklogFull denies a decision while the backlog is full under
	// Block.
	RuleBacklogFull = "decision_log.backlog_full"
	// RuleDropped is the rule of the decision_log line that counts lines
	// dropped at the bound (Drop).
	RuleDropped = "decision_log.dropped"
	// RulePruned is the rule of the decision_log line that counts lines
	// whose rotated file the audit log's retention (audit.Options.Keep)
	// removed before they were shipped.
	RulePruned = "decision_log.pruned"
)

// Writer writes one audit line: the Log the shipper follows, for its
// decision_log lines.
type Writer interface {
	Write(rec audit.Record) error
}

// Options configures a Shipper. URL, AuditPath, Head and Writer are
// required.
type Options struct {
	// URL is the service's logs endpoint, the full URL events are POSTed
	// to (OPA's services[].url joined with decision_logs.resource,
	// "/logs" by default).
	URL string
	// AuditPath is the audit log's active file; Head returns its last
	// line (audit.Log.Head) and Writer writes to it.
	AuditPath string
	Head      func() (seq int64, hash string)
	Writer    Writer
	// Cursor is the file that keeps the last acknowledged line; ""
	// means AuditPath + ".decision-log-cursor".
	Cursor string

	// Instance names the sidecar: labels.id, and the first part of
	// every decision_id. Version is labels.version.
	Instance string
	Version  string
	// Labels are the operator's extra labels, beside id, version and
	// app ("gatekeeper"), which they cannot replace.
	Labels map[string]string
	// Bundle is the name of the policy bundle the policy comes from
	// (serve --bundle): a line with a policy revision then names it in
	// the event's bundles. "" when the policy is a file.
	Bundle string

	// TokenFile, when set, holds the bearer token, read again before
	// every attempt so that a rotated token takes effect.
	TokenFile string
	// Client sends the requests; nil builds one with the system roots
	// (plus CAFile's certificates) and a 30 s timeout.
	Client *http.Client
	CAFile string

	// BatchEvents and BatchBytes bound a batch: at most this many events
	// and about this many bytes of JSON before compression.
	BatchEvents int
	BatchBytes  int
	// MinBackoff and MaxBackoff bound the delay between attempts: it
	// doubles from MinBackoff to at most MaxBackoff, and each wait is
	// drawn between half of it and all of it.
	MinBackoff, MaxBackoff time.Duration
	// MaxBacklog is the bound on lines written and not acknowledged;
	// Overflow says what happens there ("" is Block).
	MaxBacklog int64
	Overflow   Overflow
	// Poll is how often an idle log is looked at again.
	Poll time.Duration
	// StopGrace is how long an attempt under way when Run's context ends
	// may still take to be answered (its acknowledgement is then kept in
	// the cursor); 0 means 5 s.
	StopGrace time.Duration

	Logger *slog.Logger
}

// withDefaults fills the zero fields and checks the rest.
func (o Options) withDefaults() (Options, error) {
	var errs []error
	if u, err := url.Parse(o.URL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		errs = append(errs, fmt.Errorf("decision log URL %q: want an http:// or https:// URL of the service's logs endpoint", o.URL))
	} else if u.Scheme == "http" && o.TokenFile != "" && !nethost.IsLoopback(u.Hostname()) {
		// The token and every decision would cross the network in the clear.
		errs = append(errs, fmt.Errorf("decision log URL %q: a token is sent only over https (or plain http to this machine's loopback)", o.URL))
	}
	if o.AuditPath == "" || o.Head == nil || o.Writer == nil {
		errs = append(errs, errors.New("decision log: the audit log, its head and its writer are required"))
	}
	if o.Cursor == "" {
		o.Cursor = o.AuditPath + ".decision-log-cursor"
	}
	if o.Instance == "" {
		o.Instance = "default"
	}
	if o.BatchEvents == 0 {
		o.BatchEvents = DefaultBatchEvents
	}
	if o.BatchBytes == 0 {
		o.BatchBytes = DefaultBatchBytes
	}
	if o.MinBackoff == 0 {
		o.MinBackoff = DefaultMinBackoff
	}
	if o.MaxBackoff == 0 {
		o.MaxBackoff = DefaultMaxBackoff
	}
	if o.MaxBacklog == 0 {
		o.MaxBacklog = DefaultMaxBacklog
	}
	if o.Overflow == "" {
		o.Overflow = Block
	}
	if o.Poll == 0 {
		o.Poll = DefaultPoll
	}
	if o.StopGrace == 0 {
		o.StopGrace = 5 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	switch {
	case o.BatchEvents < 1 || o.BatchBytes < 1:
		errs = append(errs, fmt.Errorf("decision log batch of %d events, %d bytes: want both above 0", o.BatchEvents, o.BatchBytes))
	case o.MinBackoff < 0 || o.MaxBackoff < o.MinBackoff:
		errs = append(errs, fmt.Errorf("decision log backoff %s to %s: want 0 < min <= max", o.MinBackoff, o.MaxBackoff))
	case o.MaxBacklog < 1:
		errs = append(errs, fmt.Errorf("decision log max backlog %d: want 1 or more", o.MaxBacklog))
	case o.Overflow != Block && o.Overflow != Drop:
		errs = append(errs, fmt.Errorf("decision log overflow %q: want block or drop", o.Overflow))
	}
	for k := range o.Labels {
		if k == "id" || k == "version" || k == "app" {
			errs = append(errs, fmt.Errorf("decision log label %q: id, version and app are set by gatekeeper", k))
		}
	}
	return o, errors.Join(errs...)
}
