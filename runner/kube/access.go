package kube

import (
	"context"
	"errors"
	"fmt"
	"strings"

	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Permission is one verb on one resource (or subresource) of an API group
// in the runner's namespace: a rule of the Role the runner needs.
type Permission struct {
	Group     string // "" is the core group
	Resource  string // pods, pods/attach, ...
	Verb      string
	Why       string // what the runner does with it
	LeaseOnly bool   // needed only with Config.Lease
}

// String is the permission as kubectl auth can-i and a Role spell it:
// "create pods/attach", "update leases.coordination.k8s.io".
func (p Permission) String() string {
	res := p.Resource
	if p.Group != "" {
		base, sub, ok := strings.Cut(res, "/")
		res = base + "." + p.Group
		if ok {
			res += "/" + sub
		}
	}
	return p.Verb + " " + res
}

// Permissions are exactly the verbs the runner uses in its namespace, and
// nothing cluster-wide: docs/kubernetes/base/rbac.yaml grants these (a
// test reads that file and compares), docs/KUBERNETES.md explains each.
// RuntimeClasses are not read: a class's canary Pod proves it exists and
// enforces what it must.
var Permissions = []Permission{
	{Resource: "pods", Verb: "create", Why: "each sandbox is a Pod (runs, warm Pods, the canaries)"},
	{Resource: "pods", Verb: "get", Why: "a deleted Pod is confirmed gone with the API server, not only the watch's cache"},
	{Resource: "pods", Verb: "list", Why: "the watch of the runner's own Pods (by its instance label) starts with a list; the start-up clean-up lists the instance's leftovers"},
	{Resource: "pods", Verb: "watch", Why: "a Pod's start, end and deletion are followed through a watch"},
	{Resource: "pods", Verb: "patch", Why: "a warm Pod is labelled with the run that takes it"},
	{Resource: "pods", Verb: "delete", Why: "a Pod is deleted when its run ends, and a predecessor's leftovers at start"},
	{Resource: "pods/attach", Verb: "create", Why: "the code and workspace go to the container's standard input over an attach (SPDY, and WebSocket from Kubernetes 1.35)"},
	{Resource: "pods/attach", Verb: "get", Why: "the attach's WebSocket upgrade is a GET, authorized as get up to Kubernetes 1.34"},
	{Group: "networking.k8s.io", Resource: "networkpolicies", Verb: "create", Why: "each sandbox Pod gets a NetworkPolicy: deny-all, or egress to the proxy only"},
	{Group: "networking.k8s.io", Resource: "networkpolicies", Verb: "list", Why: "the start-up clean-up lists the instance's leftover NetworkPolicies"},
	{Group: "networking.k8s.io", Resource: "networkpolicies", Verb: "delete", Why: "a Pod's NetworkPolicy is deleted after the Pod"},
	{Group: "coordination.k8s.io", Resource: "leases", Verb: "create", Why: "the instance's Lease is created by the first sidecar of the instance", LeaseOnly: true},
	{Group: "coordination.k8s.io", Resource: "leases", Verb: "get", Why: "a starting sidecar reads who holds the instance's Lease", LeaseOnly: true},
	{Group: "coordination.k8s.io", Resource: "leases", Verb: "update", Why: "the holder renews the Lease; a successor takes over an expired one", LeaseOnly: true},
	{Group: "coordination.k8s.io", Resource: "leases", Verb: "delete", Why: "a sidecar that stops cleanly removes its Lease, so its successor starts at once", LeaseOnly: true},
}

// ErrForbidden is wrapped by CheckAccess's error when the runner's
// credentials lack a permission it needs.
var ErrForbidden = errors.New("the runner's credentials lack permissions it needs")

// CheckAccess asks the API server, with a SelfSubjectAccessReview each
// (which every authenticated user may create, through the cluster's
// system:basic-user role), whether the runner's credentials hold every
// permission of Permissions in its namespace (the Lease's only with
// Config.Lease). The error names each one missing, what it is for, and
// where the rules to grant are; it wraps ErrForbidden.
func (r *Runner) CheckAccess(ctx context.Context) error { return r.pf.checkAccess(ctx) }

func (r *platform) checkAccess(ctx context.Context) error {
	var missing []string
	for _, p := range Permissions {
		if p.LeaseOnly && r.cfg.Lease == nil {
			continue
		}
		res, sub, _ := strings.Cut(p.Resource, "/")
		review := &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{
			ResourceAttributes: &authorizationv1.ResourceAttributes{
				Namespace: r.cfg.Namespace, Group: p.Group, Resource: res, Subresource: sub, Verb: p.Verb,
			},
		}}
		got, err := r.cs.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, review, metav1.CreateOptions{})
		if err != nil {
			return apiErr("check the runner's permissions (SelfSubjectAccessReview)", err)
		}
		if !got.Status.Allowed {
			missing = append(missing, fmt.Sprintf("%s (%s)", p, p.Why))
		}
	}
	if len(missing) == 0 {
		return nil
	}
	return fmt.Errorf("%w in namespace %s: %s; grant them with a Role in that namespace bound to the runner's user or ServiceAccount (docs/kubernetes/base/rbac.yaml lists every rule)",
		ErrForbidden, r.cfg.Namespace, strings.Join(missing, "; "))
}
