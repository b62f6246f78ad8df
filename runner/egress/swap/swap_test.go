package swap

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/gatekeeper-ai/gatekeeper/internal/nethost"
	"github.com/gatekeeper-ai/gatekeeper/runner"
)

func TestNewRefuses(t *testing.T) {
	t.Parallel()
	const value = "a-Secret-Value-0123456789"
	ok := func() runner.Secret {
		return runner.Secret{Name: "s", Hosts: []string{"api.example.com"}, Inject: runner.SecretPlace{Header: "Authorization"}, Value: runner.NewHidden(value)}
	}
	sent := map[string]string{"s": "gksentinel_11111111111111111111111111111111", "t": "gksentinel_22222222222222222222222222222222"}
	cases := []struct {
		name    string
		secrets func() []runner.Secret
		sent    map[string]string
		want    string
		is      error
	}{
		{name: "a secret without a sentinel", secrets: func() []runner.Secret { s := ok(); s.Name = "nosentinel"; return []runner.Secret{s} }, want: "no sentinel"},
		{name: "a short sentinel", secrets: func() []runner.Secret { return []runner.Secret{ok()} }, sent: map[string]string{"s": "gk_short"}, want: "no sentinel"},
		{name: "a sentinel with other characters", secrets: func() []runner.Secret { return []runner.Secret{ok()} }, sent: map[string]string{"s": "gksentinel_1111111111+11111"}, want: "only letters"},
		{name: "a secret without a name", secrets: func() []runner.Secret { s := ok(); s.Name = ""; return []runner.Secret{s} }, sent: map[string]string{"": sent["s"]}, want: "no name"},
		{name: "two secrets of one name", secrets: func() []runner.Secret { return []runner.Secret{ok(), ok()} }, want: "a second secret"},
		{name: "a secret without hosts", secrets: func() []runner.Secret { s := ok(); s.Hosts = nil; return []runner.Secret{s} }, want: "no hosts"},
		{name: "a host that does not parse", secrets: func() []runner.Secret { s := ok(); s.Hosts = []string{"https://x/"}; return []runner.Secret{s} }, is: nethost.ErrBadPattern},
		{name: "a host pattern over a public suffix", secrets: func() []runner.Secret { s := ok(); s.Hosts = []string{"*.github.io"}; return []runner.Secret{s} }, is: nethost.ErrTooBroad},
		{name: "no place", secrets: func() []runner.Secret { s := ok(); s.Inject = runner.SecretPlace{}; return []runner.Secret{s} }, want: "names 0 places"},
		{name: "two places", secrets: func() []runner.Secret { s := ok(); s.Inject.Body = true; return []runner.Secret{s} }, want: "names 2 places"},
		{name: "a bad header name", secrets: func() []runner.Secret { s := ok(); s.Inject.Header = "X Y"; return []runner.Secret{s} }, want: "not a header name"},
		{name: "the Host header", secrets: func() []runner.Secret { s := ok(); s.Inject.Header = "host"; return []runner.Secret{s} }, want: "Host"},
		{name: "a bad Basic part", secrets: func() []runner.Secret {
			s := ok()
			s.Inject = runner.SecretPlace{Basic: "both"}
			return []runner.Secret{s}
		}, want: `"both"`},
		{name: "an empty value", secrets: func() []runner.Secret { s := ok(); s.Value = runner.Hidden{}; return []runner.Secret{s} }, want: "empty"},
		{name: "a value with a newline in a header", secrets: func() []runner.Secret {
			s := ok()
			s.Value = runner.NewHidden(value + "\r\nX: y")
			return []runner.Secret{s}
		}, want: "control character"},
		{name: "a value with ':' in a Basic user", secrets: func() []runner.Secret {
			s := ok()
			s.Inject = runner.SecretPlace{Basic: runner.BasicEither}
			s.Value = runner.NewHidden(value + ":x")
			return []runner.Secret{s}
		}, want: "':'"},
		{name: "a value the sentinels spell", secrets: func() []runner.Secret { s := ok(); s.Value = runner.NewHidden("1111gksen"); return []runner.Secret{s} }, want: "spelled by the sentinels"},
		{name: "a value holding a sentinel", secrets: func() []runner.Secret {
			s := ok()
			s.Value = runner.NewHidden("x" + sent["s"] + "y")
			return []runner.Secret{s}
		}, want: "holds the sentinel"},
		{name: "a sentinel inside another", secrets: func() []runner.Secret { a, b := ok(), ok(); b.Name = "t"; return []runner.Secret{a, b} },
			sent: map[string]string{"s": "gksentinel_1111111111111111", "t": "xgksentinel_1111111111111111x"}, want: "inside the first's"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			sn := tc.sent
			if sn == nil {
				sn = sent
			}
			set, err := New(tc.secrets(), sn)
			if err == nil {
				t.Fatalf("New = %v, want an error", set)
			}
			if tc.is != nil && !errors.Is(err, tc.is) || tc.want != "" && !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("New: %v; want %q / %v", err, tc.want, tc.is)
			}
			if strings.Contains(err.Error(), value) {
				t.Fatalf("the error holds the value: %v", err)
			}
		})
	}
}

func TestNewReportsEveryProblem(t *testing.T) {
	t.Parallel()
	_, err := New([]runner.Secret{
		{Name: "a", Hosts: []string{"a.example.com"}, Inject: runner.SecretPlace{Header: "X"}},
		{Name: "b", Inject: runner.SecretPlace{Query: "q"}, Value: runner.NewHidden("some-long-value")},
	}, map[string]string{"a": "gksentinel_aaaaaaaaaaaaaaaa", "b": "gksentinel_bbbbbbbbbbbbbbbb"})
	if err == nil || !strings.Contains(err.Error(), `secrets[0] "a": the value is empty`) || !strings.Contains(err.Error(), `secrets[1] "b": no hosts`) {
		t.Fatalf("New: %v; want both secrets' problems", err)
	}
}

func TestSetNeverFormatsAValue(t *testing.T) {
	t.Parallel()
	s := newTestSet(t)
	for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%q", "%x"} {
		got := fmt.Sprintf(verb, s)
		noValue(t, verb, got)
		if !strings.Contains(got, "github") && verb != "%x" {
			t.Errorf("%s of a Set = %q, want its names", verb, got)
		}
	}
	noValue(t, "String", s.String())
	if !strings.Contains(s.String(), "basic auth password") {
		t.Errorf("String = %q, want the places", s.String())
	}
}
