package bench

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
)

// mergeKeep are results.json keys of the run as a whole, never taken over
// from the fresh run's rows: they are merged (phase_seconds, notes) or
// recomputed (targets).
var mergeKeep = []string{"targets", "phase_seconds", "notes", "failed_phases"}

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
	out.Notes = append(slices.Clone(fresh.Notes), fmt.Sprintf("Rows of %s measured %s and merged (-merge) into the results of %s, whence the other rows come; the machine line above is the later run's.",
		strings.Join(phases, ", "), fresh.Generated, prev.Generated))
	out.Notes = append(out.Notes, prev.Notes...)
	out.samples = fresh.samples
	out.evaluate()
	return out, nil
}
