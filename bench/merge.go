package bench

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// mergeKeep are results.json keys of the run as a whole, never taken over
// from the fresh run's rows: they stay the earlier run's (its time, machine
// and load, which most rows are from), are merged (phase_seconds, notes) or
// recomputed (targets).
var mergeKeep = []string{"generated", "seconds", "machine", "targets", "phase_seconds", "notes", "failed_phases"}

// MergeResults lays fresh, a run of some phases (-only), over old, the
// results.json of an earlier run: every row fresh measured replaces old's,
// the others stay, and the targets are evaluated again over the whole. The
// run's context (time, machine) is fresh's; a note says which phases are
// whose.
func MergeResults(old []byte, fresh *Results, phases []string) (*Results, error) {
	var base map[string]json.RawMessage
	if err := json.Unmarshal(old, &base); err != nil {
		return nil, fmt.Errorf("the results to merge into: %w", err)
	}
	var prev Results
	if err := json.Unmarshal(old, &prev); err != nil {
		return nil, fmt.Errorf("the results to merge into: %w", err)
	}
	raw, err := json.Marshal(fresh)
	if err != nil {
		return nil, err
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(raw, &top); err != nil {
		return nil, err
	}
	for k, v := range top {
		if !slices.Contains(mergeKeep, k) {
			base[k] = v
		}
	}
	merged, err := json.Marshal(base)
	if err != nil {
		return nil, err
	}
	out := &Results{}
	if err := json.Unmarshal(merged, out); err != nil {
		return nil, err
	}
	out.PhaseSeconds = prev.PhaseSeconds
	if out.PhaseSeconds == nil {
		out.PhaseSeconds = map[string]float64{}
	}
	for k, v := range fresh.PhaseSeconds {
		out.PhaseSeconds[k] = v
	}
	out.Failed = fresh.Failed
	m := fresh.Machine
	out.Notes = append(slices.Clone(fresh.Notes), fmt.Sprintf("The rows of %s were measured again %s (-merge; %.0f s, load average %s at the start and %s at the end, gatekeeper `%s`, Docker engine %s, Node %s) and laid over this run's results; the line above is this run's.",
		strings.Join(phases, ", "), fresh.Generated, fresh.Seconds, m.LoadStart, m.LoadEnd, m.Gatekeeper, m.Docker, m.Node))
	out.Notes = append(out.Notes, prev.Notes...)
	out.samples = fresh.samples
	out.evaluate()
	return out, nil
}

// Render reads results.json from cfg.Out, evaluates its targets again and
// writes results.json and results.md from it, measuring nothing: the
// table and the figures derived from the samples follow the current code.
func Render(cfg Config) (*Results, error) {
	b, err := os.ReadFile(filepath.Join(cfg.Out, "results.json"))
	if err != nil {
		return nil, err
	}
	r := &Results{}
	if err := json.Unmarshal(b, r); err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Join(cfg.Out, "results.json"), err)
	}
	r.evaluate()
	cfg.Merge = true // no samples for the chart: leave latency.svg
	return r, r.write(cfg)
}
