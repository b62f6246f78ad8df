package profile

import (
	"regexp"
	"slices"
	"strings"
	"testing"
)

func TestProfiles(t *testing.T) {
	t.Parallel()
	nameRE := regexp.MustCompile(`^[a-z][a-z0-9-]*$`)
	seen := map[string]bool{}
	for _, p := range All() {
		if !nameRE.MatchString(p.Name) || strings.ContainsAny(p.Name, ":@/") {
			t.Errorf("profile name %q is not lower-case letters, digits and '-'", p.Name)
		}
		if seen[p.Name] {
			t.Errorf("profile %s is declared twice", p.Name)
		}
		if p.Parent != "" && !seen[p.Parent] {
			t.Errorf("profile %s comes before its parent %q (or the parent is unknown)", p.Name, p.Parent)
		}
		if p.About == "" || len(p.Packages) == 0 {
			t.Errorf("profile %s has no About or no packages", p.Name)
		}
		seen[p.Name] = true
	}
	if _, ok := Lookup(Default); !ok {
		t.Errorf("the default profile %q is not a profile", Default)
	}
	roots := 0
	for _, p := range All() {
		if p.Parent == "" {
			roots++
		}
	}
	if roots != 1 {
		t.Errorf("%d profiles without a parent, want one base", roots)
	}
}

func TestChain(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		want []string
	}{
		{"minimal", []string{"minimal"}},
		{"python", []string{"minimal", "python"}},
		{"python-data", []string{"minimal", "python", "python-data"}},
		{"node", []string{"minimal", "python", "node"}},
	}
	for _, tt := range tests {
		t.Run("the chain of "+tt.name+" runs from the base up", func(t *testing.T) {
			t.Parallel()
			p, ok := Lookup(tt.name)
			if !ok {
				t.Fatalf("no profile %s", tt.name)
			}
			var got []string
			for _, l := range p.Chain() {
				got = append(got, l.Name)
			}
			if !slices.Equal(got, tt.want) {
				t.Fatalf("chain %v, want %v", got, tt.want)
			}
		})
	}
}

func TestTag(t *testing.T) {
	t.Parallel()
	tagRE := regexp.MustCompile(`^gatekeeper-sandbox:([a-z][a-z0-9-]*)-([0-9a-f]{12})$`)
	tags := map[string]string{}
	for _, p := range All() {
		tag := p.Tag()
		m := tagRE.FindStringSubmatch(tag)
		if m == nil || m[1] != p.Name {
			t.Fatalf("tag %q of %s does not match %s with the profile's name", tag, p.Name, tagRE)
		}
		if other, ok := tags[m[2]]; ok {
			t.Errorf("profiles %s and %s hash alike", other, p.Name)
		}
		tags[m[2]] = p.Name
		if tag != p.Tag() {
			t.Errorf("the tag of %s changes between calls", p.Name)
		}
	}
	// A child's recipe holds its parent's: changing the base renames them all.
	data, _ := Lookup("python-data")
	python, _ := Lookup("python")
	if !strings.HasPrefix(data.Recipe(), python.Recipe()) {
		t.Error("python-data's recipe does not start with python's")
	}
	for _, want := range []string{"layer minimal", "layer python\n", "layer python-data", "python3-pandas", "debootstrap --variant=minbase", "user 65534:65534", Finish} {
		if !strings.Contains(data.Recipe(), want) {
			t.Errorf("python-data's recipe lacks %q", want)
		}
	}
}

func TestScript(t *testing.T) {
	t.Parallel()
	data, _ := Lookup("python-data")
	s := data.Script()
	install := strings.Index(s, "apt-get install -y -q --no-install-recommends python3-numpy ")
	purge := strings.Index(s, "dpkg --purge --force-depends gcc-12 ")
	setup := strings.Index(s, "backend: Agg")
	finish := strings.Index(s, Finish)
	if install < 0 || purge < install || setup < purge || finish < setup {
		t.Fatalf("script does not install, purge, set up and finish in that order (at %d, %d, %d, %d):\n%s", install, purge, setup, finish, s)
	}
	python, _ := Lookup("python")
	if strings.Contains(python.Script(), "dpkg --purge") {
		t.Error("python's script purges, but python purges nothing")
	}
	for _, p := range All() {
		for _, bad := range []string{"/etc/apt/sources.list", "/etc/resolv.conf", "/var/cache/apt", "/var/lib/apt/lists"} {
			if strings.Contains(p.Setup, bad) || strings.Contains(Finish, bad) {
				t.Errorf("profile %s's setup (or Finish) touches %s, which is the builder's mount", p.Name, bad)
			}
		}
	}
}

func TestResolve(t *testing.T) {
	t.Parallel()
	python, _ := Lookup("python")
	tests := []struct {
		name    string
		image   string
		want    string
		wantErr string
	}{
		{"a profile name gives the profile's tag", "python", python.Tag(), ""},
		{"a reference with a tag stays as it is", "registry.example/team/sandbox:1.2", "registry.example/team/sandbox:1.2", ""},
		{"a short reference with a tag stays as it is", "py:3.12", "py:3.12", ""},
		{"a reference with a digest stays as it is", "sandbox@sha256:" + strings.Repeat("a", 64), "sandbox@sha256:" + strings.Repeat("a", 64), ""},
		{"a profile's tag is a reference like any other", python.Tag(), python.Tag(), ""},
		{"a misspelt profile is not taken for an image", "pyhton", "", `unknown image profile "pyhton" (profiles: minimal, python, python-data, node;`},
		{"a bare image name is not taken for an image at :latest", "ubuntu", "", `unknown image profile "ubuntu"`},
		{"a name with a registry but no tag needs one", "registry.example/sandbox", "", `unknown image profile "registry.example/sandbox"`},
		{"empty is no profile", "", "", `unknown image profile ""`},
		{"a malformed reference is refused", "Sandbox:1", "", `image "Sandbox:1" is not a valid image reference`},
		{"a reference with a port but no tag needs a tag", "registry.example:5000/sandbox", "", `image "registry.example:5000/sandbox" needs a tag or a digest`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := Resolve(tt.image)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Resolve(%q) = %q, %v; want an error containing %q", tt.image, got, err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("Resolve(%q) = %q, %v; want %q", tt.image, got, err, tt.want)
			}
		})
	}
}

func TestBuildHint(t *testing.T) {
	t.Parallel()
	data, _ := Lookup("python-data")
	tests := []struct {
		name, ref, want string
	}{
		{"a profile's tag names its build command", data.Tag(), "build it with: gatekeeper image build python-data"},
		{"a stale profile tag says to build the current ones", "gatekeeper-sandbox:python-000000000000", "gatekeeper image build --all"},
		{"another image must be loaded", "registry.example/sandbox:1", "load it into the Docker engine"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := BuildHint(tt.ref); !strings.Contains(got, tt.want) {
				t.Fatalf("BuildHint(%q) = %q, want it to contain %q", tt.ref, got, tt.want)
			}
		})
	}
}

// TestWarmStartIsNotPartOfTheImage: what a warm sandbox starts ahead
// (Interpreters, Preload, PreloadReads) changes no image: its tag stays.
func TestWarmStartIsNotPartOfTheImage(t *testing.T) {
	t.Parallel()
	for _, p := range All() {
		changed := p
		changed.Interpreters = append([]string{"sh"}, p.Interpreters...)
		changed.Preload = append([]string{"json"}, p.Preload...)
		changed.PreloadReads = append([]string{"x"}, p.PreloadReads...)
		if changed.Tag() != p.Tag() {
			t.Errorf("%s: the warm start changed the tag %s to %s", p.Name, p.Tag(), changed.Tag())
		}
		if got, ok := ByTag(p.Tag()); !ok || got.Name != p.Name {
			t.Errorf("ByTag(%s) = %s, %v; want %s", p.Tag(), got.Name, ok, p.Name)
		}
	}
	if _, ok := ByTag(Repository + ":nothing-000000000000"); ok {
		t.Error("ByTag found a profile for a tag of none")
	}
}

// TestLanguagesFollowTheRecipe pins each profile's Languages to what its
// recipe installs: Python and sh in every image (the base's
// python3-minimal and dash), Node exactly where a layer installs nodejs,
// every warm interpreter among them; and Languages reads them by name or
// tag, nil for an image that is no profile.
func TestLanguagesFollowTheRecipe(t *testing.T) {
	t.Parallel()
	for _, p := range All() {
		hasNode := false
		for _, layer := range p.Chain() {
			hasNode = hasNode || slices.Contains(layer.Packages, "nodejs")
		}
		want := []string{"python", "sh"}
		if hasNode {
			want = append(want, "node")
		}
		if !slices.Equal(p.Languages, want) {
			t.Errorf("profile %s: Languages %v, want %v from its recipe", p.Name, p.Languages, want)
		}
		for _, l := range p.Interpreters {
			if !slices.Contains(p.Languages, l) {
				t.Errorf("profile %s warms %s, which is not one of its Languages %v", p.Name, l, p.Languages)
			}
		}
		if got := Languages(p.Name); !slices.Equal(got, want) {
			t.Errorf("Languages(%q) = %v, want %v", p.Name, got, want)
		}
		if got := Languages(p.Tag()); !slices.Equal(got, want) {
			t.Errorf("Languages(%q) = %v, want %v", p.Tag(), got, want)
		}
	}
	if got := Languages("registry.example/custom:1"); got != nil {
		t.Errorf("Languages of an image that is no profile = %v, want nil (unknown)", got)
	}
}

// TestGitFromPythonUp pins git to the python profile and every profile
// built on it (git clone over HTTPS through the egress proxy is a test of
// the engine), and keeps it out of the minimal base, the benchmarks'
// baseline; no other layer installs it again.
func TestGitFromPythonUp(t *testing.T) {
	t.Parallel()
	for _, p := range All() {
		var layers []string
		for _, layer := range p.Chain() {
			if slices.Contains(layer.Packages, "git") {
				layers = append(layers, layer.Name)
			}
		}
		want := []string{"python"}
		if p.Name == "minimal" {
			want = nil
		}
		if !slices.Equal(layers, want) {
			t.Errorf("profile %s: git installed by layers %v, want %v", p.Name, layers, want)
		}
	}
}
