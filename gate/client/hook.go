package client

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/gatekeeper-ai/gatekeeper/gate/wire"
)

// maxAnswer bounds the hook answer read back; a real one is a few hundred
// bytes.
const maxAnswer = 1 << 20

// Hook forwards one Claude Code hook input to the sidecar's hook endpoint
// and returns its answer, a JSON object. Anything else (an unreachable
// sidecar, a status other than 200, an answer that is not a JSON object,
// ctx ending) is an error saying why.
func (e Endpoint) Hook(ctx context.Context, token string, input []byte) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://gatekeeper"+wire.HookPath, bytes.NewReader(input))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := e.HTTPClient().Do(req)
	if err != nil {
		return nil, fmt.Errorf("ask the sidecar at %s: %w", e, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer+1))
	if err != nil {
		return nil, fmt.Errorf("read the sidecar's answer: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("the sidecar answered HTTP %d: %s", resp.StatusCode, strings.TrimSpace(string(clip(body))))
	}
	var obj map[string]json.RawMessage
	if len(body) > maxAnswer || json.Unmarshal(body, &obj) != nil || obj == nil {
		return nil, fmt.Errorf("the sidecar's answer is not a JSON object: %q", clip(body))
	}
	return body, nil
}

func clip(b []byte) []byte {
	if len(b) > 200 {
		return b[:200]
	}
	return b
}
