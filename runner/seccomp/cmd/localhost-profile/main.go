// Command localhost-profile prints runner/seccomp's profile for gVisor
// Pods as this node's kubelet reads a Localhost profile (seccomp.Localhost);
// scripts/ensure-kube runs it on the node.
package main

import (
	"fmt"
	"os"

	"github.com/gatekeeper-ai/gatekeeper/runner/seccomp"
)

func main() {
	b, err := seccomp.Localhost()
	if err != nil {
		fmt.Fprintln(os.Stderr, "localhost-profile:", err)
		os.Exit(1)
	}
	os.Stdout.Write(b) //nolint:errcheck // a short write fails the caller's check of the file
}
