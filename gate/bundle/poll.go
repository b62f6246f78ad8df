package bundle

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"time"

	"github.com/open-policy-agent/opa/v1/download"
	"github.com/open-policy-agent/opa/v1/logging"
	"github.com/open-policy-agent/opa/v1/plugins"
	"github.com/open-policy-agent/opa/v1/plugins/rest"

	"github.com/gatekeeper-ai/gatekeeper/gate"
)

// longPollSeconds is how long a bundle server that supports long polling
// (it answers with Content-Type application/vnd.openpolicyagent.bundles)
// may hold a request open waiting for a new revision.
const longPollSeconds = 60

// Run downloads the bundle with OPA's downloader until ctx ends: every
// Poll, with the ETag of the bundle in force in If-None-Match (a 304
// costs nothing), or long polling where the server supports it. Each
// new bundle is verified by OPA's reader and offered to the engine. It
// also fails closed when the bundle in force expires.
func (m *Manager) Run(ctx context.Context) error {
	d, err := m.downloader()
	if err != nil {
		return err
	}
	d.Start(ctx)
	defer d.Stop(context.WithoutCancel(ctx))
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		m.checkExpiry(ctx)
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

func (m *Manager) downloader() (*download.Downloader, error) {
	if err := checkURL(m.cfg.URL); err != nil {
		return nil, err
	}
	u, _ := url.Parse(m.cfg.URL)
	svc := map[string]any{"name": "bundle", "url": u.Scheme + "://" + u.Host}
	if m.cfg.TokenFile != "" {
		svc["credentials"] = map[string]any{"bearer": map[string]any{"token_path": m.cfg.TokenFile}}
	}
	cfgJSON, _ := json.Marshal(svc)
	client, err := rest.New(cfgJSON, nil, rest.Logger(logging.NewNoOpLogger()))
	if err != nil {
		return nil, fmt.Errorf("bundle service: %w", err)
	}
	secs := int64((m.cfg.Poll + time.Second - 1) / time.Second)
	secs = max(secs, 1)
	lp := int64(longPollSeconds)
	trigger := plugins.TriggerPeriodic
	dc := download.Config{Trigger: &trigger, Polling: download.PollingConfig{MinDelaySeconds: &secs, MaxDelaySeconds: &secs, LongPollingTimeoutSeconds: &lp}}
	if err := dc.ValidateAndInjectDefaults(); err != nil {
		return nil, err
	}
	path := u.EscapedPath()
	if u.RawQuery != "" {
		path += "?" + u.RawQuery
	}
	d := download.New(dc, client, path).
		WithBundleVerificationConfig(m.cfg.Verify.config()).
		WithSizeLimitBytes(MaxBytes).
		WithBundlePersistence(true). // keeps the raw .tar.gz for the cache
		WithCallback(m.update)
	if e := m.ETag(); e != "" {
		d.SetCache(e)
	}
	return d, nil
}

// update is the downloader's callback for one download.
func (m *Manager) update(ctx context.Context, u download.Update) error {
	if u.Error != nil {
		var he download.HTTPError
		if errors.As(u.Error, &he) || isRequestError(u.Error) {
			m.answered(u.Error)
			m.log.Warn("policy bundle download failed; keeping the running policy", "url", m.cfg.URL, "err", u.Error)
			return nil
		}
		m.answered(nil)
		m.refuse(m.attached(), "", fmt.Errorf("bundle from %s: %w", m.cfg.URL, classify(u.Error)))
		return nil
	}
	m.answered(nil)
	if u.Bundle == nil {
		return nil // 304: the bundle in force is current
	}
	c, err := FromBundle(u.Bundle, m.cfg.Verify)
	if err != nil {
		m.refuse(m.attached(), u.Bundle.Manifest.Revision, err)
		return nil
	}
	var raw []byte
	if u.Raw != nil {
		if raw, err = io.ReadAll(io.LimitReader(u.Raw, MaxBytes+1)); err != nil || len(raw) > MaxBytes {
			raw = nil
		}
	}
	_ = m.Offer(ctx, c, bytes.Clone(raw), u.ETag) // logged by Offer and the engine
	return nil
}

func (m *Manager) attached() *gate.Engine {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.eng
}

// isRequestError reports a download that reached no server (OPA wraps
// those as "request failed: ...").
func isRequestError(err error) bool {
	return errors.Unwrap(err) != nil && len(err.Error()) >= 15 && err.Error()[:15] == "request failed:"
}

// checkURL accepts an http(s) URL with a host.
func checkURL(s string) error {
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("bundle url %q: want http(s)://host/path", s)
	}
	return nil
}
