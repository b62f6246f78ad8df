package kube

import (
	"os"
	"path/filepath"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/gatekeeper-ai/gatekeeper/runner"
)

const (
	testUID = "6d8a98d8-45f5-488b-90a2-674b2ecc02b0"
	testCID = "4962e94d47831137c1cbed2da3799addcaee1736f3caf78f04727c06c5d365f1"
)

func testPod(uid, containerID string, qos corev1.PodQOSClass) *corev1.Pod {
	p := &corev1.Pod{}
	p.UID = types.UID(uid)
	p.Status.QOSClass = qos
	p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: containerName, ContainerID: containerID}}
	return p
}

// TestPeakFiles lays out a node's cgroups as each driver and version
// makes them, with a decoy of the other cgroup level holding another
// number, and checks that the peak comes from the sandbox's own: the
// container's under runc, the Pod's under gVisor.
func TestPeakFiles(t *testing.T) {
	t.Parallel()
	sdUID := "6d8a98d8_45f5_488b_90a2_674b2ecc02b0"
	tests := []struct {
		name     string
		qos      corev1.PodQOSClass
		rt       runner.Runtime
		file     string // holds 7340032
		decoy    string // holds 1, must not be read
		scheme   string
		wantPeak int64
	}{
		{"cgroupfs v1, runc: the container's cgroup, not the pod's with its pause container", corev1.PodQOSGuaranteed, runner.Runc,
			"memory/kubepods/pod" + testUID + "/" + testCID + "/memory.max_usage_in_bytes",
			"memory/kubepods/pod" + testUID + "/memory.max_usage_in_bytes", "containerd", 7 << 20},
		{"cgroupfs v1, gVisor: the pod's cgroup, where the shim puts the sandbox", corev1.PodQOSGuaranteed, runner.Runsc,
			"memory/kubepods/pod" + testUID + "/memory.max_usage_in_bytes",
			"memory/kubepods/pod" + testUID + "/" + testCID + "/memory.max_usage_in_bytes", "containerd", 7 << 20},
		{"cgroupfs v1, burstable", corev1.PodQOSBurstable, runner.Runc,
			"memory/kubepods/burstable/pod" + testUID + "/" + testCID + "/memory.max_usage_in_bytes",
			"memory/kubepods/pod" + testUID + "/" + testCID + "/memory.max_usage_in_bytes", "containerd", 7 << 20},
		{"cgroupfs v2", corev1.PodQOSGuaranteed, runner.Runc,
			"kubepods/pod" + testUID + "/" + testCID + "/memory.peak",
			"kubepods/pod" + testUID + "/memory.peak", "containerd", 7 << 20},
		{"systemd v1, containerd", corev1.PodQOSGuaranteed, runner.Runc,
			"memory/kubepods.slice/kubepods-pod" + sdUID + ".slice/cri-containerd-" + testCID + ".scope/memory.max_usage_in_bytes",
			"memory/kubepods.slice/kubepods-pod" + sdUID + ".slice/memory.max_usage_in_bytes", "containerd", 7 << 20},
		{"systemd v2, CRI-O, besteffort", corev1.PodQOSBestEffort, runner.Runc,
			"kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod" + sdUID + ".slice/crio-" + testCID + ".scope/memory.peak",
			"kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod" + sdUID + ".slice/memory.peak", "cri-o", 7 << 20},
		{"systemd v2, gVisor", corev1.PodQOSGuaranteed, runner.Runsc,
			"kubepods.slice/kubepods-pod" + sdUID + ".slice/memory.peak",
			"kubepods.slice/kubepods-pod" + sdUID + ".slice/cri-containerd-" + testCID + ".scope/memory.peak", "containerd", 7 << 20},
		{"a cgroup this process cannot see is no peak", corev1.PodQOSGuaranteed, runner.Runc,
			"memory/elsewhere/memory.max_usage_in_bytes",
			"memory/kubepods/pod" + testUID + "/memory.max_usage_in_bytes", "containerd", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			root := t.TempDir()
			for f, v := range map[string]string{tt.file: "7340032\n", tt.decoy: "1\n"} {
				if err := os.MkdirAll(filepath.Join(root, filepath.Dir(f)), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(root, f), []byte(v), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			files := peakFiles(root, testPod(testUID, tt.scheme+"://"+testCID, tt.qos), tt.rt)
			if got := readPeak(files); got != tt.wantPeak {
				t.Errorf("peak %d, want %d (files %q)", got, tt.wantPeak, files)
			}
		})
	}
}

// TestPeakFilesRefuseOddIDs checks that a Pod UID or container ID that is
// not of the shape the kubelet and the runtime give names no file: they
// are joined into paths on the node.
func TestPeakFilesRefuseOddIDs(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, uid, containerID string
	}{
		{"a uid that climbs out", "../../../etc", "containerd://" + testCID},
		{"a container id that climbs out", testUID, "containerd://../../" + testCID[6:]},
		{"a container id without a scheme", testUID, testCID},
		{"a short container id", testUID, "containerd://abc"},
		{"no container status yet", testUID, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if files := peakFiles("/sys/fs/cgroup", testPod(tt.uid, tt.containerID, corev1.PodQOSGuaranteed), runner.Runc); files != nil {
				t.Errorf("peakFiles = %q, want none", files)
			}
		})
	}
}
