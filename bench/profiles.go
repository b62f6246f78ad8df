package bench

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/gatekeeper-ai/gatekeeper/runner/image/profile"
)

// ProfileRun is row 5 for one image profile: a hello world through a warm
// sidecar (its pool on) and a cold one (--pool-size 0), under runc.
type ProfileRun struct {
	Profile    string  `json:"profile"`
	Tag        string  `json:"tag"`
	ImageBytes int64   `json:"image_bytes"`
	Language   string  `json:"language"`
	Warm       Summary `json:"warm"`
	Cold       Summary `json:"cold"`
	// WarmProgram and ColdProgram are the runner's own duration_ms.
	WarmProgram Summary `json:"warm_program"`
	ColdProgram Summary `json:"cold_program"`
}

// profileBaseline is the profile the others are compared with: minimal is
// the default image before the profiles (debootstrap minbase and
// python3-minimal).
const profileBaseline = "minimal"

var imageLineRE = regexp.MustCompile(`(?m)^(\s+image:\s*)\S+`)

// policyWithImage rewrites a policy written by WritePolicy to name image.
func policyWithImage(path, name, image string) (string, error) {
	p, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	if len(imageLineRE.FindAll(p, -1)) != 1 {
		return "", fmt.Errorf("%s: expected one `image:` line", path)
	}
	out := strings.TrimSuffix(path, ".policy.yaml") + "-" + name + ".policy.yaml"
	return out, os.WriteFile(out, imageLineRE.ReplaceAll(p, []byte("${1}"+image)), 0o644)
}

// cpusLineRE is the sandbox's cpus line of a policy (the first; the
// ceilings' comes after it).
var cpusLineRE = regexp.MustCompile(`(?m)^(\s*cpus:\s*)\S+`)

// policyWithCPUs writes a copy of the policy at path whose sandbox has
// cpus CPUs, named after name, and returns its path.
func policyWithCPUs(path, name, cpus string) (string, error) {
	p, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	loc := cpusLineRE.FindSubmatchIndex(p)
	if loc == nil {
		return "", fmt.Errorf("%s: no `cpus:` line", path)
	}
	out := strings.TrimSuffix(path, ".policy.yaml") + "-" + name + ".policy.yaml"
	q := append(append(append([]byte{}, p[:loc[3]]...), cpus...), p[loc[1]:]...)
	return out, os.WriteFile(out, q, 0o644)
}

// helloFor is the hello world of a profile: JavaScript for node, Python
// for the others.
func helloFor(name string) (language, code string) {
	if name == "node" {
		return "node", `console.log("hello, world")`
	}
	return "python", helloCode
}

// profiles measures row 5: for every profile, warm and cold hello-world
// runs through sidecars serving the shipped policy with that profile as
// its image. First the warm series of all profiles, interleaved (each run
// finding its sidecar's pool full), then the cold ones, interleaved, on
// sidecars without a pool: the ratios between profiles come from the same
// moments of the machine, and no warm pool refills during a cold run.
func (e *env) profiles(ctx context.Context) error {
	policies := map[string]string{}
	for _, name := range profile.Names() {
		p, _ := profile.Lookup(name)
		pol, err := policyWithImage(e.policy["runc"], name, name)
		if err != nil {
			return err
		}
		policies[name] = pol
		size, err := imageSize(ctx, e.cfg.Docker, p.Tag())
		if err != nil {
			return fmt.Errorf("profile %s: %w (build it: gatekeeper image build %s)", name, err, name)
		}
		lang, _ := helloFor(name)
		e.res.Profiles = append(e.res.Profiles, ProfileRun{Profile: name, Tag: p.Tag(), ImageBytes: size, Language: lang})
	}
	for _, kind := range []string{"warm", "cold"} {
		if err := e.profileSeries(ctx, kind, policies); err != nil {
			return err
		}
	}
	for _, pr := range e.res.Profiles {
		e.cfg.Log.Info("bench: profile", "profile", pr.Profile, "warm_p50_ms", pr.Warm.P50, "cold_p50_ms", pr.Cold.P50, "image_mib", mib(pr.ImageBytes))
	}
	return nil
}

// profileSeries measures the warm or the cold series of every profile,
// interleaved, each on a sidecar of its own that it stops afterwards.
func (e *env) profileSeries(ctx context.Context, kind string, policies map[string]string) error {
	type series struct {
		profile     string
		sc          *Sidecar
		c           *Client
		q           string
		lang, code  string
		n           int
		took, inner []time.Duration
	}
	var all []*series
	for _, name := range profile.Names() {
		o := SidecarOptions{Name: "profile-" + kind + "-" + name, Policy: policies[name]}
		if kind == "cold" {
			o.Args = []string{"--pool-size", "0"}
		}
		sc, c, q, _, err := e.sidecarQuery(ctx, "runc", o)
		if err != nil {
			return err
		}
		defer sc.Stop()
		defer c.Close()
		lang, code := helloFor(name)
		all = append(all, &series{profile: name, sc: sc, c: c, q: q, lang: lang, code: code})
	}
	run := func(s *series) (time.Duration, time.Duration, error) {
		if kind == "warm" {
			// A warm run finds its sidecar's pool full, as a run that
			// follows another by more than a refill does.
			if err := waitPoolFull(ctx, s.sc, 2); err != nil {
				return 0, 0, fmt.Errorf("%s %s: %w", kind, s.profile, err)
			}
		}
		s.n++
		t0 := time.Now()
		out, err := s.c.DecideAndRun(s.q, fmt.Sprintf("toolu_bench_%s_%s_%d", s.profile, kind, s.n), s.lang, s.code)
		d := time.Since(t0)
		if err != nil {
			return d, 0, fmt.Errorf("%s %s: %w", kind, s.profile, err)
		}
		if r := out.Result; r.ExitCode != 0 || r.Stdout != "hello, world\n" {
			return d, 0, fmt.Errorf("%s %s: exited %d (%s) with stdout %q stderr %q", kind, s.profile, r.ExitCode, r.Reason, r.Stdout, r.Stderr)
		}
		return d, time.Duration(out.Result.DurationMS) * time.Millisecond, nil
	}
	// Two untimed runs each: page cache, the pools' first fill.
	for _, s := range all {
		for range 2 {
			if _, _, err := run(s); err != nil {
				return fmt.Errorf("warm-up: %w", err)
			}
		}
	}
	for i := range e.cfg.ProfileRuns {
		for j := range all {
			s := all[(i+j)%len(all)]
			d, inner, err := run(s)
			if err != nil {
				return err
			}
			s.took, s.inner = append(s.took, d), append(s.inner, inner)
		}
	}
	for _, s := range all {
		e.res.samples["profile/"+s.profile+"/"+kind] = s.took
		pr := e.res.profile(s.profile)
		if kind == "warm" {
			pr.Warm, pr.WarmProgram = Summarize(s.took), Summarize(s.inner)
		} else {
			pr.Cold, pr.ColdProgram = Summarize(s.took), Summarize(s.inner)
		}
	}
	return nil
}

func (r *Results) profile(name string) *ProfileRun {
	for i := range r.Profiles {
		if r.Profiles[i].Profile == name {
			return &r.Profiles[i]
		}
	}
	return nil
}

// waitPoolFull waits until the sidecar's pool holds want warm containers.
func waitPoolFull(ctx context.Context, sc *Sidecar, want int) error {
	deadline := time.Now().Add(time.Minute)
	for {
		n := 0
		for _, l := range poolMetrics(ctx, sc) {
			if strings.HasPrefix(l, "gatekeeper_pool_warm_containers") {
				f := strings.Fields(l)
				v, _ := strconv.ParseFloat(f[len(f)-1], 64)
				n += int(v)
			}
		}
		if n >= want {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the warm pool holds %d containers after a minute, want %d", n, want)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// imageSize is the engine's size of image tag.
func imageSize(ctx context.Context, docker, tag string) (int64, error) {
	out, err := exec.CommandContext(ctx, docker, "image", "inspect", "--format", "{{.Size}}", tag).Output()
	if err != nil {
		return 0, fmt.Errorf("docker image inspect %s: %w", tag, err)
	}
	return strconv.ParseInt(strings.TrimSpace(string(out)), 10, 64)
}

// profileTargetGoal is the bound on what the bigger images may
// cost a warm run.
const profileTargetGoal = "warm python hello world p50 ≤ 1.5× the old default image's (minimal), same run"

// evaluateProfiles adds the profile target.
func (r *Results) evaluateProfiles() {
	py, base := r.profile(profile.Default), r.profile(profileBaseline)
	if py == nil || base == nil || py.Warm.N == 0 || base.Warm.N == 0 {
		r.target("warm_python_vs_minimal", profileTargetGoal, "not measured", nil)
		return
	}
	ratio := Ratio(py.Warm.P50, base.Warm.P50)
	r.target("warm_python_vs_minimal", profileTargetGoal, fmt.Sprintf("%.2f×, %s vs %s", ratio, FormatMS(py.Warm.P50), FormatMS(base.Warm.P50)), ptr(ratio <= 1.5))
}

// profileRows renders row 5.
func (r *Results) profileRows(row func(cells ...string)) {
	pp := func(s Summary) string { return FormatMS(s.P50) + " (p99 " + FormatMS(s.P99) + ")" }
	base := r.profile(profileBaseline)
	for _, pr := range r.Profiles {
		lang := "Python"
		if pr.Language == "node" {
			lang = "JavaScript"
		}
		what := fmt.Sprintf("%s hello world end to end, runc, profile `%s` (%.0f MiB): warm pool vs cold, p50", lang, pr.Profile, mib(pr.ImageBytes))
		if pr.Warm.N == 0 || pr.Cold.N == 0 {
			row("5", what, "not measured", "", "", "", "")
			continue
		}
		row("5", what, pp(pr.Warm), pp(pr.Cold), fmt.Sprintf("%.2f×", Ratio(pr.Warm.P50, pr.Cold.P50)), "—", "")
	}
	if py := r.profile(profile.Default); py != nil && base != nil && py.Warm.N > 0 && base.Warm.N > 0 {
		row("5", "warm hello world p50: profile `python` vs `minimal` (the old default image)", FormatMS(py.Warm.P50), FormatMS(base.Warm.P50),
			fmt.Sprintf("%.2f×", Ratio(py.Warm.P50, base.Warm.P50)), "≤ 1.5×", r.met("warm_python_vs_minimal"))
	}
	if len(r.Profiles) == 0 {
		row("5", "hello world per image profile", "not measured", "", "", "", "")
	}
}
