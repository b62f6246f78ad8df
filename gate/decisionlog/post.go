package decisionlog

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"strings"
	"time"
)

// poster POSTs batches to the receiver, as OPA's decision-log plugin
// does: a gzipped JSON array of events, Content-Encoding gzip.
type poster struct {
	url, tokenFile string
	client         *http.Client
	buf            bytes.Buffer // the compressed batch, reused
}

func newPoster(o Options) (*poster, error) {
	p := &poster{url: o.URL, tokenFile: o.TokenFile, client: o.Client}
	if p.client == nil {
		tr := http.DefaultTransport.(*http.Transport).Clone()
		if o.CAFile != "" {
			pem, err := os.ReadFile(o.CAFile)
			if err != nil {
				return nil, fmt.Errorf("decision log CA file: %w", err)
			}
			pool, err := x509.SystemCertPool()
			if err != nil {
				pool = x509.NewCertPool()
			}
			if !pool.AppendCertsFromPEM(pem) {
				return nil, fmt.Errorf("decision log CA file %s: no PEM certificate in it", o.CAFile)
			}
			tr.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
		}
		p.client = &http.Client{Transport: tr, Timeout: 30 * time.Second}
	}
	return p, nil
}

// send POSTs batch once; nil means the receiver answered 2xx. Any other
// answer, a 4xx included, is an error: the caller retries, so that no
// line is dropped on a receiver's word.
func (p *poster) send(ctx context.Context, batch []pending) error {
	p.buf.Reset()
	zw, _ := gzip.NewWriterLevel(&p.buf, gzip.BestSpeed)
	zw.Write([]byte{'['})
	for i, e := range batch {
		if i > 0 {
			zw.Write([]byte{','})
		}
		zw.Write(e.json)
	}
	zw.Write([]byte{']'})
	if err := zw.Close(); err != nil {
		return fmt.Errorf("compress batch: %w", err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, p.url, bytes.NewReader(p.buf.Bytes()))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Content-Encoding", "gzip")
	if p.tokenFile != "" {
		b, err := os.ReadFile(p.tokenFile)
		if err != nil {
			return fmt.Errorf("decision log token: %w", err)
		}
		tok := strings.TrimSpace(string(b))
		if tok == "" {
			return fmt.Errorf("decision log token file %s is empty", p.tokenFile)
		}
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	resp, err := p.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("receiver answered %s: %s", resp.Status, strings.TrimSpace(string(body)))
	}
	return nil
}

// jitter is a random duration in [0, d].
func jitter(d time.Duration) time.Duration {
	if d <= 0 {
		return 0
	}
	return time.Duration(rand.Int64N(int64(d) + 1))
}
