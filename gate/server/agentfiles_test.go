package server_test

import (
	"encoding/json"
	"testing"

	"github.com/gatekeeper-ai/gatekeeper/gate/audit"
)

func TestARunReturnsToAgentFilesMarkedAndAuditsTheirDigest(t *testing.T) {
	t.Parallel()
	fr := &savingRunner{}
	h := start(t, options{runner: fr})
	c := h.connect(t)
	q := c.open("")

	plain := runOnce(c, q, "toolu_1", "")
	res := runOnce(c, q, "toolu_2", `,"to_agent":["*.bin"]`)
	if plain["type"] != "run_result" || res["type"] != "run_result" {
		t.Fatalf("runs: %v %v", plain, res)
	}
	files, _ := json.Marshal(res["files"])
	if string(files) != `[{"base64":"AAEC","change":"created","media_type":"application/octet-stream","path":"out.bin","sha256":"x","size":3,"to_agent":true}]` {
		t.Errorf("run_result files %s; want out.bin marked to_agent", files)
	}
	if files, _ := json.Marshal(plain["files"]); string(files) != `[{"base64":"AAEC","change":"created","media_type":"application/octet-stream","path":"out.bin","sha256":"x","size":3}]` {
		t.Errorf("a run without to_agent returned %s; want nothing marked", files)
	}
	var runs []audit.Record
	for _, rec := range readAudit(t, h.auditPath) {
		if rec.Kind == audit.KindRun {
			runs = append(runs, rec)
		}
	}
	if len(runs) != 2 {
		t.Fatalf("%d run lines, want 2", len(runs))
	}
	if runs[0].AgentFiles != nil {
		t.Errorf("the first run's line has agent_files %+v; want none", runs[0].AgentFiles)
	}
	if a := runs[1].AgentFiles; len(a) != 1 || a[0] != (audit.AgentFile{Path: "out.bin", Size: 3, SHA256: "x"}) {
		t.Errorf("the second run's agent_files %+v; want out.bin, 3 bytes, its digest", a)
	}
}
