package docker

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gatekeeper-ai/gatekeeper/runner/sandbox"
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

// cgroupDirs are the directories of container id's cgroup: psi holds its
// pressure files (cpu.pressure, memory.pressure), mem its memory use
// (v2's memory.current, or v1's memory.usage_in_bytes). On cgroup v2 both
// are its one cgroup; on a v1 host that mounts the v2 hierarchy beside
// it (systemd's "hybrid" layout, at /sys/fs/cgroup/unified), the runtime
// puts the container there too, and the kernel keeps its pressure there,
// while the memory controller is v1's. A pure v1 host has no pressure
// files: psi is "" and the runner has no stall figures.
func cgroupDirs(id string) (psi, mem string, v2 bool) {
	for _, d := range []string{
		filepath.Join(cgroupRoot, "docker", id),
		filepath.Join(cgroupRoot, "system.slice", "docker-"+id+".scope"),
	} {
		if exists(filepath.Join(d, "memory.current")) {
			return d, d, true
		}
	}
	for _, d := range []string{
		filepath.Join(cgroupRoot, "unified", "docker", id),
		filepath.Join(cgroupRoot, "unified", "system.slice", "docker-"+id+".scope"),
	} {
		if exists(filepath.Join(d, "memory.pressure")) {
			psi = d
		}
	}
	for _, d := range []string{
		filepath.Join(cgroupRoot, "memory", "docker", id),
		filepath.Join(cgroupRoot, "memory", "system.slice", "docker-"+id+".scope"),
	} {
		if exists(filepath.Join(d, "memory.usage_in_bytes")) {
			mem = d
		}
	}
	return psi, mem, false
}

func exists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// readStall reads the stall figures of the cgroup in psi and mem (see
// cgroupDirs); ok is false when one cannot be read (the cgroup is gone).
func readStall(psi, mem string, v2 bool) (s sandbox.Stall, ok bool) {
	memFull, ok1 := psiTotal(filepath.Join(psi, "memory.pressure"), "full")
	cpuSome, ok2 := psiTotal(filepath.Join(psi, "cpu.pressure"), "some")
	use := filepath.Join(mem, "memory.usage_in_bytes")
	if v2 {
		use = filepath.Join(mem, "memory.current")
	}
	n, ok3 := readInt(use)
	if !ok1 || !ok2 || !ok3 {
		return s, false
	}
	return sandbox.Stall{MemoryFull: memFull, CPUSome: cpuSome, MemoryBytes: n}, true
}

// psiTotal reads the total stall time of one line ("some" or "full") of
// a pressure file: "some avg10=0.00 avg60=0.00 avg300=0.00 total=1234"
// (microseconds).
func psiTotal(path, line string) (time.Duration, bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, false
	}
	for l := range strings.Lines(string(b)) {
		f := strings.Fields(l)
		if len(f) == 0 || f[0] != line {
			continue
		}
		for _, kv := range f[1:] {
			if v, ok := strings.CutPrefix(kv, "total="); ok {
				us, err := strconv.ParseInt(v, 10, 64)
				return time.Duration(us) * time.Microsecond, err == nil
			}
		}
	}
	return 0, false
}

func readInt(path string) (int64, bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, false
	}
	n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	return n, err == nil
}

// cgroupOf finds a container's cgroup directories once, as its stall
// figures are first asked for.
type cgroupOf struct {
	once     sync.Once
	psi, mem string
	v2       bool
}

// Stall reads the container's pressure stall figures and memory use from
// its cgroup (see cgroupDirs), with its memory limit.
func (c *containerRun) Stall() (sandbox.Stall, bool) {
	c.cg.once.Do(func() { c.cg.psi, c.cg.mem, c.cg.v2 = cgroupDirs(c.id) })
	if c.cg.psi == "" || c.cg.mem == "" {
		return sandbox.Stall{}, false
	}
	s, ok := readStall(c.cg.psi, c.cg.mem, c.cg.v2)
	s.LimitBytes = c.memory
	return s, ok
}
