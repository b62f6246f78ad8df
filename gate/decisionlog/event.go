package decisionlog

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"strconv"
	"time"

	"github.com/gatekeeper-ai/gatekeeper/gate/audit"
)

// Event is one shipped event, encoded as OPA's decision-log plugin
// encodes its EventV1 (github.com/open-policy-agent/opa/v1/plugins/logs,
// v1.22.2), with the fields gatekeeper fills. The plugin's package is not
// imported: it would bring OPA's storage and SQL dependencies into the
// sidecar for one struct.
type Event struct {
	Labels     map[string]string     `json:"labels"`
	DecisionID string                `json:"decision_id"`
	Revision   string                `json:"revision,omitempty"`
	Bundles    map[string]BundleInfo `json:"bundles,omitempty"`
	Path       string                `json:"path,omitempty"`
	Input      *any                  `json:"input,omitempty"`
	Result     *any                  `json:"result,omitempty"`
	Timestamp  time.Time             `json:"timestamp"`
	Metrics    map[string]any        `json:"metrics,omitempty"`
	Custom     map[string]any        `json:"custom,omitempty"`
}

// BundleInfo is an event's record of a bundle (OPA's BundleInfoV1).
type BundleInfo struct {
	Revision string `json:"revision,omitempty"`
}

// Position is an event's place in its sidecar's hash chain, in
// custom.audit: the line's seq, the hex SHA-256 of its bytes and the
// hash of the line before it, as the local log has them. A receiver that
// holds, for one labels.id, events whose seqs run without a gap and whose
// prev is the hash of the event before holds every line of that sidecar.
type Position struct {
	Seq  int64  `json:"seq"`
	Hash string `json:"hash"`
	Prev string `json:"prev"`
}

// decisionID is the stable id of a line of instance's log: a re-sent line
// keeps it.
func decisionID(instance string, seq int64) string {
	return instance + "-" + strconv.FormatInt(seq, 10)
}

// hashLine is the hex SHA-256 of a line's bytes without its newline, as
// the chain has it.
func hashLine(text []byte) string {
	sum := sha256.Sum256(text)
	return hex.EncodeToString(sum[:])
}

// event turns one audit line into its event. The input is the whole line
// (already masked by the audit log); the result is the decision, for a
// line that carries one.
func (s *Shipper) event(text []byte, hash string) (Event, error) {
	var rec audit.Record
	if err := json.Unmarshal(text, &rec); err != nil {
		return Event{}, fmt.Errorf("decode audit line: %w", err)
	}
	var input any = json.RawMessage(text)
	ev := Event{
		Labels:     s.labels,
		DecisionID: decisionID(s.o.Instance, rec.Seq),
		Path:       "gatekeeper/" + string(rec.Kind),
		Input:      &input,
		Timestamp:  rec.Time,
		Custom:     map[string]any{"audit": Position{Seq: rec.Seq, Hash: hash, Prev: rec.Prev}},
	}
	if rec.Decision != "" {
		var result any = map[string]string{"decision": rec.Decision, "rule": rec.Rule, "reason": rec.Reason}
		ev.Result = &result
	}
	if rev := rec.PolicyRevision; rev != "" {
		if s.o.Bundle != "" {
			ev.Bundles = map[string]BundleInfo{s.o.Bundle: {Revision: rev}}
		} else {
			ev.Revision = rev // OPA's field for a policy outside bundles
		}
	}
	return ev, nil
}

// eventLabels are every event's labels: the operator's, then id, version
// and app, which they cannot replace.
func eventLabels(o Options) map[string]string {
	l := maps.Clone(o.Labels)
	if l == nil {
		l = map[string]string{}
	}
	l["id"], l["version"], l["app"] = o.Instance, o.Version, "gatekeeper"
	return l
}
