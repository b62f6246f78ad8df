package policy_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gatekeeper-ai/gatekeeper/gate/policy"
)

func TestSessionsAreOffByDefault(t *testing.T) {
	t.Parallel()
	p, err := decode(t, minimal)
	if err != nil {
		t.Fatal(err)
	}
	if p.Sandbox.Session.On() {
		t.Errorf("a policy without sandbox.session has sessions on: %+v", p.Sandbox.Session)
	}
	if p.Ceilings.Session != p.Sandbox.Session {
		t.Errorf("absent ceilings.session = %+v, want the base %+v (nothing may be raised)", p.Ceilings.Session, p.Sandbox.Session)
	}
}

func TestShippedPolicyHasSessionsOffWithinCeilings(t *testing.T) {
	t.Parallel()
	p, err := policy.Load("../../sandbox.policy.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if p.Sandbox.Session.On() {
		t.Errorf("the shipped policy turns sessions on: %+v", p.Sandbox.Session)
	}
	want := policy.Session{IdleTimeout: policy.Duration(20 * time.Minute), MaxLifetime: policy.Duration(time.Hour)}
	if p.Ceilings.Session != want {
		t.Errorf("shipped ceilings.session = %+v, want %+v", p.Ceilings.Session, want)
	}
}

func TestSessionPolicyIsValidated(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, src string
		want      []string // problems, each a substring; none: valid
	}{
		{"an idle timeout within its lifetime is on", "sandbox:\n  session:\n    idle_timeout: 5m\n    max_lifetime: 1h\n", nil},
		{"an idle timeout alone keeps the default lifetime", "sandbox:\n  session:\n    idle_timeout: 5m\n", nil},
		{"an idle timeout of zero is off whatever the lifetime", "sandbox:\n  session:\n    idle_timeout: 0s\n    max_lifetime: 0s\n", nil},
		{"a negative idle timeout is refused where it is written", "sandbox:\n  session:\n    idle_timeout: -1m\n", []string{`p.yaml:5: duration "-1m"`}},
		{"a zero lifetime is refused when sessions are on", "sandbox:\n  session:\n    idle_timeout: 1m\n    max_lifetime: 0s\n", []string{"p.yaml:6:19: sandbox.session.max_lifetime: must be greater than zero when idle_timeout is"}},
		{"an idle timeout past the lifetime is refused", "sandbox:\n  session:\n    idle_timeout: 2h\n    max_lifetime: 1h\n", []string{"p.yaml:5:19: sandbox.session.idle_timeout: 2h0m0s is longer than max_lifetime 1h0m0s"}},
		{"a negative lifetime is refused", "sandbox:\n  session:\n    max_lifetime: -1s\n", []string{`p.yaml:5: duration "-1s"`}},
		{"a negative ceiling is refused", "ceilings:\n  session:\n    idle_timeout: -1s\n", []string{`p.yaml:5: duration "-1s"`}},
		{"an unknown session key is refused", "sandbox:\n  session:\n    idle: 5m\n", []string{`p.yaml:5:5: sandbox.session.idle: unknown key "idle" (known: idle_timeout, max_lifetime)`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := decode(t, minimal+tc.src)
			if tc.want == nil {
				if err != nil {
					t.Fatalf("valid session policy refused: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("invalid session policy accepted; want %q", tc.want)
			}
			got := problems(t, err)
			for _, w := range tc.want {
				if !slices.ContainsFunc(got, func(g string) bool { return strings.Contains(g, w) }) {
					t.Errorf("problems = %q, want one containing %q", got, w)
				}
			}
		})
	}
}

func TestSessionOverride(t *testing.T) {
	t.Parallel()
	base, err := decode(t, minimal+"sandbox:\n  session:\n    max_lifetime: 30m\nceilings:\n  session: {idle_timeout: 20m, max_lifetime: 1h}\n")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, raw string
		want      policy.Session
		wantErr   string
	}{
		{"an override turns a session on, keeping the base lifetime", `{"session":{"idle_timeout":"5m"}}`, policy.Session{IdleTimeout: policy.Duration(5 * time.Minute), MaxLifetime: policy.Duration(30 * time.Minute)}, ""},
		{"milliseconds are durations too", `{"session":{"idle_timeout":60000,"max_lifetime":120000}}`, policy.Session{IdleTimeout: policy.Duration(time.Minute), MaxLifetime: policy.Duration(2 * time.Minute)}, ""},
		{"an override past its own lifetime is refused in the override", `{"session":{"idle_timeout":"45m"}}`, policy.Session{}, "sandbox_policy:1:28: sandbox.session.idle_timeout: 45m0s is longer than max_lifetime 30m0s"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s, err := base.Override([]byte(tc.raw))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if s.Session != tc.want {
				t.Errorf("session = %+v, want %+v", s.Session, tc.want)
			}
		})
	}
}

func TestValidateRefusesNegativeSessionDurationsBuiltInCode(t *testing.T) {
	t.Parallel()
	p := policy.Default()
	p.WorkspaceRoot = "/srv/app"
	p.Sandbox.Session = policy.Session{IdleTimeout: policy.Duration(-time.Second), MaxLifetime: policy.Duration(-time.Second)}
	p.Ceilings.Session.MaxLifetime = policy.Duration(-time.Second)
	got := problems(t, p.Validate())
	for _, w := range []string{"sandbox.session.idle_timeout: must not be negative (0 turns sessions off)", "sandbox.session.max_lifetime: must not be negative", "ceilings.session.max_lifetime: must not be negative"} {
		if !slices.Contains(got, w) {
			t.Errorf("problems = %q, want %q", got, w)
		}
	}
}
