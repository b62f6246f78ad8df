package docker

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// cgroupRoot is where the host mounts its cgroup file systems.
const cgroupRoot = "/sys/fs/cgroup"

// cgroupPeak reads the highest memory use the kernel charged to container
// id's memory cgroup, or 0 when this process cannot see it (an engine on
// another host, a cgroup layout not listed here, or a container already
// gone). The engine's stats stream samples about once a second, so a run
// shorter than that would otherwise report no peak at all; the kernel's
// high-water mark sees every allocation. It looks where the engine puts a
// container with the cgroupfs driver (v1 and v2) and with the systemd
// driver (v2).
func cgroupPeak(id string) int64 {
	for _, p := range []string{
		filepath.Join(cgroupRoot, "memory", "docker", id, "memory.max_usage_in_bytes"),
		filepath.Join(cgroupRoot, "docker", id, "memory.peak"),
		filepath.Join(cgroupRoot, "system.slice", "docker-"+id+".scope", "memory.peak"),
	} {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		if n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64); err == nil && n > 0 {
			return n
		}
	}
	return 0
}
