//go:build kube

package kube

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/gatekeeper-ai/gatekeeper/runner"
	"github.com/gatekeeper-ai/gatekeeper/runner/runnertest"
)

// adminClient is the test cluster's admin (KUBECONFIG of ensure-kube env),
// which makes what a platform team would: the namespace, the
// ServiceAccount, the Role.
func adminClient(t testing.TB) (*rest.Config, kubernetes.Interface) {
	t.Helper()
	path := os.Getenv("KUBECONFIG")
	if path == "" {
		t.Fatal(`no admin kubeconfig: eval "$(scripts/ensure-kube env)" sets KUBECONFIG`)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return cfg, cs
}

// serviceAccountNamespace makes a fresh namespace (deleted when t ends)
// holding the ServiceAccount gatekeeper bound to a Role gatekeeper-sandboxes
// of rules, and returns it, with a REST config carrying only a token of
// that ServiceAccount (TokenRequest), as an in-cluster sidecar has.
func serviceAccountNamespace(t *testing.T, rules []rbacv1.PolicyRule) (string, *rest.Config) {
	t.Helper()
	admin, cs := adminClient(t)
	ctx := t.Context()
	suffix := make([]byte, 3)
	_, _ = rand.Read(suffix)
	ns := fmt.Sprintf("gk-rbac-%d-%s", os.Getpid(), hex.EncodeToString(suffix))
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns,
		Labels: map[string]string{"pod-security.kubernetes.io/enforce": "restricted"}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := cs.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{}); err != nil {
			t.Errorf("delete namespace %s: %v", ns, err)
		}
	})
	if _, err := cs.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "gatekeeper"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.RbacV1().Roles(ns).Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "gatekeeper-sandboxes"}, Rules: rules}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "gatekeeper-sandboxes"},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: "gatekeeper", Namespace: ns}},
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: "gatekeeper-sandboxes"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// A Pod is admitted only once the namespace's default ServiceAccount
	// exists (the controller-manager makes it).
	for {
		_, err := cs.CoreV1().ServiceAccounts(ns).Get(ctx, "default", metav1.GetOptions{})
		if err == nil {
			break
		}
		if !apierrors.IsNotFound(err) {
			t.Fatal(err)
		}
		select {
		case <-ctx.Done():
			t.Fatal(ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
	secs := int64(600)
	tok, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(ctx, "gatekeeper",
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &secs}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cfg := rest.AnonymousClientConfig(admin) // the server's address and CA, no credentials
	cfg.BearerToken = tok.Status.Token
	return ns, cfg
}

// TestTheManifestsRoleAloneRunsCodeAndLessFailsAtStart runs the sidecar's
// runner with a token of a ServiceAccount whose only permissions are the
// Role of docs/kubernetes/base/rbac.yaml, read from the file: it starts
// (the permission check, the Lease), passes gVisor's canary and runs code,
// with no ClusterRole and no RuntimeClass read; a missing RuntimeClass is
// still refused clearly. Then each granted verb is taken away in turn, and
// Start fails naming exactly that verb and where the rules are, before
// anything is made.
func TestTheManifestsRoleAloneRunsCodeAndLessFailsAtStart(t *testing.T) {
	t.Parallel()
	c := requireCluster(t)
	role := roleOfManifest(t)
	ns, rc := serviceAccountNamespace(t, role.Rules)
	_, cs := adminClient(t)
	cfg := Config{Instance: "rbac", Namespace: ns, REST: rc, Classes: RuntimeClasses{RunscNoNet: "gvisor-nonet"},
		Lease: &LeaseConfig{Holder: t.Name()}}

	r, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Start(t.Context()); err != nil {
		t.Fatalf("Start with exactly the manifest's Role: %v", err)
	}
	if errs := r.Check(t.Context(), c.image); len(errs) != 1 || errs["gvisor-nonet"] != nil {
		t.Fatalf("the start-up canaries with the Role alone: %v, want gvisor-nonet checked", errs)
	}
	spec := runnertest.Spec(`print(6 * 7)`)
	spec.Sandbox.Image, spec.Sandbox.Runtime, spec.Sandbox.CPUs = c.image, runner.Runsc, 0.25
	res, err := r.Run(t.Context(), spec)
	if err != nil || res.Stdout != "42\n" {
		t.Fatalf("a run with the Role alone: %+v, %v; want 42", res, err)
	}
	if n, err := r.Cleanup(t.Context()); err != nil {
		t.Errorf("Cleanup with the Role alone: %d, %v", n, err)
	}
	r.Close()
	if _, err := cs.CoordinationV1().Leases(ns).Get(t.Context(), LeaseName("rbac"), metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("after Close the instance's Lease is still there (%v): a clean stop releases it", err)
	}

	missing := cfg
	missing.Instance, missing.Classes, missing.Lease = "rbac-class", RuntimeClasses{RunscNoNet: "no-such-class"}, nil
	mr := newTestRunner(t, missing)
	err = mr.Check(t.Context(), c.image)["no-such-class"]
	if !errors.Is(err, runner.ErrRuntimeUnavailable) || !strings.Contains(err.Error(), `RuntimeClass "no-such-class" not found`) {
		t.Errorf("a RuntimeClass that does not exist, with the Role alone: %v; want it refused, named", err)
	}

	for _, p := range Permissions {
		t.Run("without "+p.String(), func(t *testing.T) {
			var less []rbacv1.PolicyRule
			for _, rule := range role.Rules {
				rule = *rule.DeepCopy()
				if slices.Contains(rule.APIGroups, p.Group) && slices.Contains(rule.Resources, p.Resource) {
					rule.Verbs = slices.DeleteFunc(rule.Verbs, func(v string) bool { return v == p.Verb })
				}
				if len(rule.Verbs) > 0 {
					less = append(less, rule)
				}
			}
			if _, err := cs.RbacV1().Roles(ns).Update(t.Context(), &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "gatekeeper-sandboxes"}, Rules: less}, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
			// The authorizer follows Roles through a watch: a Start soon
			// after the update may still see the old rules.
			deadline := time.Now().Add(10 * time.Second)
			for {
				lr, err := New(cfg)
				if err != nil {
					t.Fatal(err)
				}
				err = lr.Start(t.Context())
				lr.Close()
				if err != nil {
					if !errors.Is(err, ErrForbidden) || !strings.Contains(err.Error(), p.String()+" ("+p.Why+")") ||
						!strings.Contains(err.Error(), "docs/kubernetes/base/rbac.yaml") {
						t.Errorf("Start without %s: %v; want ErrForbidden naming that permission, why it is needed, and the manifest", p, err)
					}
					for _, q := range Permissions {
						if q != p && strings.Contains(err.Error(), q.String()+" (") {
							t.Errorf("Start without %s also names %s, which the Role grants: %v", p, q, err)
						}
					}
					return
				}
				if time.Now().After(deadline) {
					t.Fatalf("Start without %s succeeded", p)
				}
				time.Sleep(200 * time.Millisecond)
			}
		})
	}
}
