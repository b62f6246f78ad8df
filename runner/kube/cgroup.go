package kube

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/gatekeeper-ai/gatekeeper/runner"
)

// cgroupRoot is where the node mounts its cgroup file systems.
const cgroupRoot = "/sys/fs/cgroup"

// A Pod's UID and its container's ID name directories on the node: only
// these shapes are joined into a path.
var (
	podUIDRE       = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)
	containerIDRE  = regexp.MustCompile(`^[0-9a-f]{64}$`)
	scopeForScheme = map[string]string{"containerd": "cri-containerd", "cri-o": "crio"}
)

// peakFiles lists the files that may hold the kernel's high-water mark of
// the memory a Pod's sandbox used, where the kubelet and its runtime put
// the Pod's cgroup on the node: with the cgroupfs or the systemd driver,
// on cgroup v1 (memory.max_usage_in_bytes) or v2 (memory.peak). Under
// runc it is the sandbox container's own cgroup (the Pod's holds the
// pause container too). Under gVisor it is the Pod's: the runsc shim puts
// the whole sandbox (its kernel, the Sentry, and the gofer) there and
// leaves the containers' cgroups empty; that is the memory the Pod's limit
// counts. It returns nil for a Pod whose UID or container ID is not of
// the expected shape.
func peakFiles(root string, pod *corev1.Pod, rt runner.Runtime) []string {
	uid := string(pod.UID)
	st := sandboxStatus(pod)
	if !podUIDRE.MatchString(uid) || st == nil {
		return nil
	}
	scheme, id, ok := strings.Cut(st.ContainerID, "://")
	if !ok || !containerIDRE.MatchString(id) {
		return nil
	}
	qos := ""
	switch pod.Status.QOSClass {
	case corev1.PodQOSBurstable:
		qos = "burstable"
	case corev1.PodQOSBestEffort:
		qos = "besteffort"
	}
	// The cgroupfs driver: kubepods[/qos]/pod<uid>/<id>.
	fsPod := filepath.Join("kubepods", qos, "pod"+uid)
	fsCtr := filepath.Join(fsPod, id)
	// The systemd driver: kubepods.slice[/kubepods-qos.slice]/
	// kubepods[-qos]-pod<uid with _>.slice/<runtime>-<id>.scope.
	slice, prefix := "kubepods.slice", "kubepods"
	if qos != "" {
		slice, prefix = filepath.Join(slice, "kubepods-"+qos+".slice"), "kubepods-"+qos
	}
	sdPod := filepath.Join(slice, prefix+"-pod"+strings.ReplaceAll(uid, "-", "_")+".slice")
	var sdCtr string
	if scope := scopeForScheme[scheme]; scope != "" {
		sdCtr = filepath.Join(sdPod, scope+"-"+id+".scope")
	}
	dirs := []string{fsCtr, sdCtr}
	if rt == runner.Runsc {
		dirs = []string{fsPod, sdPod}
	}
	var files []string
	for _, d := range dirs {
		if d == "" {
			continue
		}
		files = append(files,
			filepath.Join(root, "memory", d, "memory.max_usage_in_bytes"),
			filepath.Join(root, d, "memory.peak"))
	}
	return files
}

// readPeak returns the first positive number in files, or 0 when this
// process sees none of them (a runner on another node, a cgroup layout
// not listed in peakFiles, or a sandbox already gone).
func readPeak(files []string) int64 {
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		if n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64); err == nil && n > 0 {
			return n
		}
	}
	return 0
}
