package kube

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"slices"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

// rbacManifest is the Role operators install (docs/kubernetes/base).
const rbacManifest = "../../docs/kubernetes/base/rbac.yaml"

// roleOfManifest reads the Role gatekeeper-sandboxes of rbac.yaml.
func roleOfManifest(t testing.TB) rbacv1.Role {
	t.Helper()
	b, err := os.ReadFile(rbacManifest)
	if err != nil {
		t.Fatal(err)
	}
	var roles []rbacv1.Role
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(b), 4096)
	for {
		var doc json.RawMessage
		if err := dec.Decode(&doc); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("%s: %v", rbacManifest, err)
		}
		var head struct{ Kind string }
		if err := json.Unmarshal(doc, &head); err != nil {
			t.Fatalf("%s: %v", rbacManifest, err)
		}
		if head.Kind != "Role" {
			continue
		}
		var r rbacv1.Role
		strict := json.NewDecoder(bytes.NewReader(doc))
		strict.DisallowUnknownFields()
		if err := strict.Decode(&r); err != nil {
			t.Fatalf("%s: %v", rbacManifest, err)
		}
		roles = append(roles, r)
	}
	if len(roles) != 1 || roles[0].Name != "gatekeeper-sandboxes" {
		t.Fatalf("%s holds %d Roles (%v), want one, gatekeeper-sandboxes", rbacManifest, len(roles), roles)
	}
	return roles[0]
}

// grants lists a Role's rules as "verb resource" strings, sorted.
func grants(rules []rbacv1.PolicyRule) []string {
	var out []string
	for _, rule := range rules {
		for _, g := range rule.APIGroups {
			for _, res := range rule.Resources {
				for _, v := range rule.Verbs {
					out = append(out, Permission{Group: g, Resource: res, Verb: v}.String())
				}
			}
		}
	}
	slices.Sort(out)
	return out
}

// TestTheManifestGrantsExactlyThePermissionsTheRunnerChecks pins
// docs/kubernetes/base/rbac.yaml to Permissions, which CheckAccess asks
// for: a verb the code needs and the manifest lacks, or one the manifest
// grants for nothing, fails here.
func TestTheManifestGrantsExactlyThePermissionsTheRunnerChecks(t *testing.T) {
	t.Parallel()
	role := roleOfManifest(t)
	var want []string
	for _, p := range Permissions {
		want = append(want, p.String())
		if p.Why == "" {
			t.Errorf("%s: no reason given", p)
		}
	}
	slices.Sort(want)
	if got := grants(role.Rules); !slices.Equal(got, want) {
		t.Errorf("rbac.yaml grants\n  %s\nthe runner checks\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
	for _, rule := range role.Rules {
		if len(rule.ResourceNames) > 0 || len(rule.NonResourceURLs) > 0 || slices.Contains(rule.Verbs, "*") || slices.Contains(rule.Resources, "*") {
			t.Errorf("rule %+v: want plain verbs on named resources", rule)
		}
	}
}

func TestLeaseNamesAreValidAndDistinct(t *testing.T) {
	t.Parallel()
	seen := map[string]string{}
	for _, inst := range []string{"default", "agent-0", "Agent-0", "agent_0", "a.b", "a_", "x" + strings.Repeat("y", 62)} {
		name := LeaseName(inst)
		if len(name) > 253 || strings.ToLower(name) != name || strings.ContainsAny(name, "_") || strings.HasSuffix(name, "-") {
			t.Errorf("LeaseName(%q) = %q: not a DNS subdomain", inst, name)
		}
		if other, ok := seen[name]; ok {
			t.Errorf("instances %q and %q share lease %q", other, inst, name)
		}
		seen[name] = inst
	}
	if got := LeaseName("agent-0"); got != "gatekeeper-instance-agent-0" {
		t.Errorf("LeaseName(agent-0) = %q, want the plain name", got)
	}
}
