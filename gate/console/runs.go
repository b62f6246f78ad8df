package console

import (
	"encoding/json"
	"slices"
	"sync"

	"github.com/gatekeeper-ai/gatekeeper/gate/audit"
	"github.com/gatekeeper-ai/gatekeeper/gate/server"
)

// RunDetail is what the console holds of one finished run beyond its
// audit line: the code and files as they ran, the output as the model got
// it (capped as the run was), and the effective policy.
type RunDetail struct {
	RunID     string `json:"run_id"`
	QueryID   string `json:"query_id"`
	ToolUseID string `json:"tool_use_id"`
	Language  string `json:"language"`
	Code      string `json:"code"`
	// Files maps each input file's name to its size in bytes, or to "***"
	// when the audit log would mask it.
	Files  map[string]any `json:"files,omitempty"`
	Stdout string         `json:"stdout"`
	Stderr string         `json:"stderr"`
	// Truncated is set when either stream hit OutputCapBytes.
	Truncated      bool  `json:"truncated"`
	OutputCapBytes int64 `json:"output_cap_bytes"`
	TimeoutMS      int64 `json:"timeout_ms"`
	// Policy is the query's effective policy (masked as the log masks),
	// PolicyHash its hash.
	Policy     any    `json:"policy"`
	PolicyHash string `json:"policy_hash"`
	// Result is the runner's result without its output: anything a later
	// runner reports (files returned, say) appears here.
	Result json.RawMessage `json:"result"`

	size int64
}

// runStore keeps the details of recent runs, bounded by count and bytes;
// the oldest go first. It is safe for concurrent use.
type runStore struct {
	maxRuns  int
	maxBytes int64

	mu    sync.Mutex
	byID  map[string]*RunDetail
	order []string // run ids, oldest first
	bytes int64
}

func newRunStore(maxRuns int, maxBytes int64) *runStore {
	return &runStore{maxRuns: maxRuns, maxBytes: maxBytes, byID: map[string]*RunDetail{}}
}

// ObserveRun keeps a copy of a finished run; it implements
// server.RunObserver.
func (s *runStore) ObserveRun(info server.RunInfo) {
	d := &RunDetail{
		RunID: info.Spec.RunID, QueryID: info.Spec.QueryID, ToolUseID: info.ToolUseID, Language: string(info.Spec.Language),
		Code: info.Spec.Code, Stdout: info.Result.Stdout, Stderr: info.Result.Stderr, Truncated: info.Result.Truncated,
		OutputCapBytes: info.Spec.Sandbox.MaxOutputBytes, TimeoutMS: info.Spec.Timeout.Milliseconds(), PolicyHash: info.PolicyHash,
	}
	// The code and files the way the audit log writes a tool input: a
	// file under a secret-looking name shows no size.
	names := make(map[string]any, len(info.Spec.Files))
	for name, content := range info.Spec.Files {
		names[name] = len(content)
	}
	in := map[string]any{"code": d.Code}
	if len(names) > 0 {
		in["files"] = names
	}
	if m, err := audit.Mask(in); err == nil {
		mm := m.(map[string]any)
		d.Code, _ = mm["code"].(string)
		d.Files, _ = mm["files"].(map[string]any)
	}
	if p, err := audit.Mask(info.Policy); err == nil {
		d.Policy = p
	}
	res := info.Result
	res.Stdout, res.Stderr = "", ""
	d.Result, _ = json.Marshal(res)
	d.size = int64(len(d.Code)+len(d.Stdout)+len(d.Stderr)+len(d.Result)+len(info.Policy)) + int64(64*len(names))

	s.mu.Lock()
	defer s.mu.Unlock()
	if old, ok := s.byID[d.RunID]; ok {
		s.bytes -= old.size
		s.order = slices.DeleteFunc(s.order, func(id string) bool { return id == d.RunID })
	}
	s.byID[d.RunID] = d
	s.order = append(s.order, d.RunID)
	s.bytes += d.size
	for len(s.order) > 1 && (len(s.order) > s.maxRuns || s.bytes > s.maxBytes) {
		gone := s.order[0]
		s.order = s.order[1:]
		s.bytes -= s.byID[gone].size
		delete(s.byID, gone)
	}
}

// get returns the detail of a run, nil when it is not held (never seen,
// or evicted).
func (s *runStore) get(id string) *RunDetail {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.byID[id]
}

// stats returns how many runs and bytes are held.
func (s *runStore) stats() (runs int, bytes int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.order), s.bytes
}
