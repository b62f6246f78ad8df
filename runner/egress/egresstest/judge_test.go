package egresstest_test

import (
	"encoding/base64"
	"net/url"
	"strings"
	"testing"

	"github.com/gatekeeper-ai/gatekeeper/runner"
	"github.com/gatekeeper-ai/gatekeeper/runner/egress/egresstest"
)

func TestDenyMethodsDeniesItsMethodsAndTheJudgeRecords(t *testing.T) {
	t.Parallel()
	j := &egresstest.Judge{Decide: egresstest.DenyMethods("DELETE")}
	if v := j.JudgeRequest(t.Context(), runner.HTTPRequest{Method: "GET", Path: "/a"}); !v.Allow || v.Rule != egresstest.JudgeAllowRule {
		t.Errorf("GET: %+v, want an allow", v)
	}
	if v := j.JudgeRequest(t.Context(), runner.HTTPRequest{Method: "DELETE", Path: "/b"}); v.Allow || v.Rule != egresstest.JudgeDenyRule || v.Reason != egresstest.JudgeDenyReason {
		t.Errorf("DELETE: %+v, want a deny", v)
	}
	if got := j.Requests(); len(got) != 2 || got[0].Path != "/a" || got[1].Method != "DELETE" {
		t.Errorf("recorded %+v", got)
	}
}

func TestFindLeaksFindsEachSpelling(t *testing.T) {
	t.Parallel()
	v := egresstest.SecretValue(t, "tok")
	if !strings.HasPrefix(v, "gkreal_tok_") || len(v) != len("gkreal_tok_")+40 || egresstest.SentinelPattern.MatchString(v) {
		t.Fatalf("SecretValue = %q", v)
	}
	values := map[string]string{"tok": v}
	for _, tt := range []struct{ name, data string }{
		{"the value in plain text", "x" + v + "y"},
		{"the value query-escaped", "a=" + url.QueryEscape("&"+v)},
		{"the value in Basic credentials", "Basic " + base64.StdEncoding.EncodeToString([]byte("ci:"+v))},
		{"the value after one byte, base64url", base64.URLEncoding.EncodeToString([]byte("a" + v + "b"))},
		{"the value after two bytes, base64", base64.StdEncoding.EncodeToString([]byte("ab" + v))},
	} {
		t.Run(tt.name+" is found", func(t *testing.T) {
			t.Parallel()
			if got := egresstest.FindLeaks([]byte(tt.data), values); len(got) == 0 {
				t.Errorf("FindLeaks(%q) found nothing", tt.data)
			}
		})
	}
	other := egresstest.SecretValue(t, "tok")
	for _, data := range []string{other, base64.StdEncoding.EncodeToString([]byte("ci:" + other)), "gksentinel_0123456789abcdef0123456789abcdef"} {
		if got := egresstest.FindLeaks([]byte(data), values); got != nil {
			t.Errorf("FindLeaks(%q) = %v, want nothing (another value)", data, got)
		}
	}
}
