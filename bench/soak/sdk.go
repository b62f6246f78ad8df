package soak

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/gatekeeper-ai/gatekeeper/bench"
)

// SDKCall is one tool call of a real Agent SDK session, as
// node/sdk-sessions.mjs reports it.
type SDKCall struct {
	Session  int    `json:"session"`
	Query    int    `json:"query"`
	Kind     string `json:"kind"`
	Tool     string `json:"tool"`
	Rule     string `json:"rule"` // the rule a deny must name; "" for a call that must work
	ID       string `json:"id"`
	Emitted  int64  `json:"emitted"`  // ms since the epoch: the model made the call
	Resulted int64  `json:"resulted"` // and got its result
	Got      bool   `json:"got"`
	IsError  bool   `json:"is_error"`
	Text     string `json:"text"`
}

// SDKError is an error a query of an SDK session ended with, and when the
// query ran (ms since the epoch).
type SDKError struct {
	From int64  `json:"from"`
	To   int64  `json:"to"`
	Text string `json:"text"`
}

// SDKResult is what a batch of SDK sessions did.
type SDKResult struct {
	Queries int        `json:"queries"`
	Calls   []SDKCall  `json:"calls"`
	Errors  []SDKError `json:"errors"`
	Err     string     `json:"-"` // the batch itself failed
}

// sdkRun is a batch of SDK sessions running in node.
type sdkRun struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	out   string
	log   string
	err   error
}

// startSDK starts SDKSessions sessions in node; stop them with wait. With
// none configured it returns a batch that does nothing.
func (s *soak) startSDK(ctx context.Context) *sdkRun {
	s.mu.Lock()
	s.sdkBatches++
	n := s.sdkBatches
	s.mu.Unlock()
	r := &sdkRun{out: filepath.Join(s.cfg.Work, fmt.Sprintf("sdk-%d.json", n)), log: filepath.Join(s.cfg.Work, fmt.Sprintf("sdk-%d.log", n))}
	if s.cfg.SDKSessions == 0 {
		return r
	}
	cfgFile := filepath.Join(s.cfg.Work, fmt.Sprintf("sdk-%d.config.json", n))
	b, _ := json.Marshal(map[string]any{
		"tsClient": filepath.Join(s.cfg.Repo, "ts-client"), "url": "unix://" + s.sidecar.Socket, "tokenFile": s.sidecar.TokenFile,
		"ws": s.world.WS, "home": s.world.Home, "sessions": s.cfg.SDKSessions, "out": r.out,
	})
	if r.err = os.WriteFile(cfgFile, b, 0o600); r.err != nil {
		return r
	}
	os.Remove(r.out)
	logf, err := os.Create(r.log)
	if err != nil {
		r.err = err
		return r
	}
	r.cmd = exec.Command(s.cfg.Node, filepath.Join(s.cfg.Repo, "bench", "soak", "node", "sdk-sessions.mjs"), cfgFile)
	r.cmd.Stdout, r.cmd.Stderr = logf, logf
	if r.stdin, r.err = r.cmd.StdinPipe(); r.err != nil {
		logf.Close()
		return r
	}
	if r.err = r.cmd.Start(); r.err != nil {
		logf.Close()
		return r
	}
	go func() {
		<-ctx.Done()
		r.stdin.Close()
	}()
	return r
}

// wait tells the sessions to finish (their stdin closes), waits up to 4
// minutes for the queries under way to end, and reads what they report.
func (r *sdkRun) wait() SDKResult {
	var res SDKResult
	if r.cmd == nil {
		if r.err != nil {
			res.Err = r.err.Error()
		}
		return res
	}
	r.stdin.Close()
	done := make(chan error, 1)
	go func() { done <- r.cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			res.Err = fmt.Sprintf("node sdk-sessions.mjs: %v; see %s:\n%s", err, r.log, bench.Tail(r.log, 20))
			return res
		}
	case <-time.After(4 * time.Minute):
		_ = r.cmd.Process.Kill()
		<-done
		res.Err = fmt.Sprintf("node sdk-sessions.mjs did not finish within 4 minutes of its stop; see %s", r.log)
		return res
	}
	b, err := os.ReadFile(r.out)
	if err == nil {
		err = json.Unmarshal(b, &res)
	}
	if err != nil {
		res.Err = fmt.Sprintf("read %s: %v", r.out, err)
	}
	return res
}
