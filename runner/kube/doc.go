// Package kube is to run sandboxes as Kubernetes Pods (issue 16). So far it
// holds only the smoke test of the cluster scripts/ensure-kube sets up
// (smoke_test.go, build tag kube): see docs/KUBERNETES.md.
package kube
