// Package profile declares gatekeeper's sandbox image profiles (minimal,
// python, python-data, node): what each holds, the recipe it is built
// from, and the tag that recipe's hash gives it. It also resolves a
// policy's sandbox.fs.image (a profile name or an image reference) to the
// image a run uses: Resolve is the one place that happens.
//
// Profiles are layered: each but the base adds Debian packages and files
// to its parent (python-data and node add to python, python to minimal),
// and runner/image builds and caches them layer by layer. The package has
// no dependencies on the engine, so the gate can resolve names without one.
package profile

import (
	"fmt"
	"runtime"
	"slices"
	"strings"

	"github.com/distribution/reference"
	"github.com/gatekeeper-ai/gatekeeper/internal/digest"
)

// Repository is the repository part of every profile's tag.
const Repository = "gatekeeper-sandbox"

// Default is the profile of a policy that names none.
const Default = "python"

// Suite is the Debian release every profile is made of.
const Suite = "bookworm"

// version changes whenever the builder (runner/image) changes what it
// makes from the same recipe; it is part of every hash.
const version = "4"

// Env is the environment the images declare; the runner sets the same
// (HOME is /workspace at run time). Tools are configured through files in
// the image, never through more variables.
var Env = []string{
	"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
	"LANG=C.UTF-8",
}

// User is the image's default user (the runner sets the policy's).
const User = "65534:65534"

// WorkDir is the image's working directory, the workspace tmpfs at run time.
const WorkDir = "/workspace"

// Profile is the recipe of one image. A Profile is plain data; Lookup and
// All return copies.
type Profile struct {
	// Name is what sandbox.fs.image says: lower-case letters, digits, '-'.
	Name string
	// About says in one line what the profile is for.
	About string
	// Parent is the profile this one adds to; empty for the base, which
	// debootstrap makes.
	Parent string
	// Packages are the Debian packages installed (without recommends); for
	// the base, what debootstrap --variant=minbase includes.
	Packages []string
	// Purge are packages Debian's dependencies drag in that nothing in the
	// profile uses at run time (compilers, headers, Tk); they are purged
	// with dpkg --force-depends after the install. (node computes its
	// list in Setup instead.)
	Purge []string
	// Setup is shell (sh -eu) run as root in the image's root after the
	// packages are in: the files that configure the tools.
	Setup string

	// Languages are the run languages (runner.Languages) the image has an
	// interpreter for; the run tool's description of a query whose image
	// is the profile names only these. Not part of the image's hash.
	Languages []string

	// What a warm sandbox of the profile does before its run arrives
	// (runner/launch.Warm); none of it is part of the image or its hash.
	//
	// Interpreters are the run languages whose interpreter a warm sandbox
	// starts ahead, the first being the one started before any run asked
	// for another; the image must hold each.
	Interpreters []string
	// Preload are the Python modules a warm Python interpreter imports
	// while it waits: the heavy ones runs of the profile import.
	Preload []string
	// PreloadReads are paths below /workspace the preloaded modules read
	// when imported: a run whose workspace holds one gets a fresh
	// interpreter instead.
	PreloadReads []string
	// Stdlib says the image's Python has the whole standard library
	// (python3, not python3-minimal): its warm Python interpreters also
	// preload the modules code mode's wrappers import
	// (runner/toolwrap.PythonImports), json among them.
	Stdlib bool
}

// All returns the profiles, each after its parent.
func All() []Profile {
	return []Profile{
		{
			Name:         "minimal",
			About:        "sh, coreutils and python3-minimal (no json, no urllib: the core interpreter only); the base of the others and the benchmarks' baseline",
			Packages:     []string{"python3-minimal"},
			Setup:        baseSetup,
			Languages:    []string{"python", "sh"},
			Interpreters: []string{"python"},
		},
		{
			Name:   "python",
			About:  "the full Python 3.11 standard library, pip and venv (installs go to the user site in /workspace/.local), python as well as python3, git (clone over HTTPS); the default",
			Parent: "minimal",
			// python-is-python3: models write "python script.py" in their
			// shell commands at least as often as "python3". git: a
			// private repository cloned over HTTPS with a token the egress
			// proxy swaps in (Basic auth) is everyday use of a networked
			// run; without recommends it brings no ssh, less or patch.
			Packages:     []string{"python3", "python-is-python3", "python3-pip", "python3-venv", "ca-certificates", "tzdata", "git"},
			Setup:        pythonSetup,
			Languages:    []string{"python", "sh"},
			Interpreters: []string{"python"},
			Stdlib:       true,
		},
		{
			Name:   "python-data",
			About:  "python plus Debian's numpy, pandas, matplotlib (Agg, font cache prebuilt), scipy, requests, pytest, jinja2, markdown and PyYAML",
			Parent: "python",
			Packages: []string{
				"python3-numpy", "python3-pandas", "python3-matplotlib", "python3-scipy", "python3-requests",
				"python3-pytest", "python3-jinja2", "python3-markdown", "python3-yaml",
				// One BLAS thread: the sandbox's CPU quota, not the host's
				// core count, bounds it, and every thread counts against
				// the pids limit.
				"libopenblas0-serial",
			},
			Purge:        dataPurge,
			Setup:        dataSetup,
			Languages:    []string{"python", "sh"},
			Interpreters: []string{"python"},
			Preload:      []string{"numpy", "pandas", "matplotlib", "matplotlib.pyplot"},
			Stdlib:       true,
			// matplotlib reads its matplotlibrc from the working directory
			// or $HOME/.config/matplotlib, and uses $HOME/.cache/matplotlib
			// when the program made it (see dataSetup); HOME is /workspace.
			PreloadReads: []string{"matplotlibrc", ".config/matplotlib", ".cache/matplotlib"},
		},
		{
			Name:         "node",
			About:        "python plus Debian's Node.js 18 and npm (cache in /tmp, no update notifier, audit or fund)",
			Parent:       "python",
			Packages:     []string{"nodejs", "npm"},
			Setup:        nodeSetup,
			Languages:    []string{"python", "sh", "node"},
			Interpreters: []string{"node", "python"},
			Stdlib:       true,
		},
	}
}

// Names returns the profile names in build order.
func Names() []string {
	var out []string
	for _, p := range All() {
		out = append(out, p.Name)
	}
	return out
}

// Lookup returns the profile called name.
func Lookup(name string) (Profile, bool) {
	for _, p := range All() {
		if p.Name == name {
			return p, true
		}
	}
	return Profile{}, false
}

// ByTag returns the profile whose current tag is ref.
func ByTag(ref string) (Profile, bool) {
	for _, p := range All() {
		if p.Tag() == ref {
			return p, true
		}
	}
	return Profile{}, false
}

// Languages returns the run languages the image a policy's
// sandbox.fs.image names has: a profile's (by name or by its current
// tag), or nil for any other image, whose contents are not known.
func Languages(image string) []string {
	p, ok := Lookup(image)
	if !ok {
		p, ok = ByTag(image)
	}
	if !ok {
		return nil
	}
	return slices.Clone(p.Languages)
}

// Chain returns p's layers from the base up to p itself.
func (p Profile) Chain() []Profile {
	chain := []Profile{p}
	for q := p; q.Parent != ""; {
		parent, ok := Lookup(q.Parent)
		if !ok {
			panic(fmt.Sprintf("profile %s: unknown parent %s", q.Name, q.Parent)) // All is a constant table; a test pins its parents
		}
		chain = append(chain, parent)
		q = parent
	}
	slices.Reverse(chain)
	return chain
}

// layerRecipe is the text of p's own layer.
func (p Profile) layerRecipe() string {
	var b strings.Builder
	fmt.Fprintf(&b, "layer %s\n", p.Name)
	if p.Parent == "" {
		fmt.Fprintf(&b, "debootstrap --variant=minbase --include=%s\n", strings.Join(p.Packages, ","))
		fmt.Fprintf(&b, "script:\n%s\n%s\n", p.Setup, Finish)
		return b.String()
	}
	fmt.Fprintf(&b, "script:\n%s\n", p.Script())
	return b.String()
}

// Script is the shell a layer above the base runs as root in its root
// file system: install the packages, purge what they dragged in, set up,
// then Finish.
func (p Profile) Script() string {
	var b strings.Builder
	b.WriteString("apt-get update -q\n")
	fmt.Fprintf(&b, "apt-get install -y -q --no-install-recommends %s\n", strings.Join(p.Packages, " "))
	if len(p.Purge) > 0 {
		fmt.Fprintf(&b, "dpkg --purge --force-depends %s\n", strings.Join(p.Purge, " "))
	}
	b.WriteString(p.Setup)
	b.WriteString("\n")
	b.WriteString(Finish)
	return b.String()
}

// Recipe is the text whose hash names the profile: the builder's version,
// the suite, the architecture, the image config and every layer from the
// base up. The mirror is not part of it (every mirror serves the same
// packages), nor are package versions: to pick up updated packages,
// remove the image and the layer cache and build again.
func (p Profile) Recipe() string {
	var b strings.Builder
	fmt.Fprintf(&b, "gatekeeper sandbox image %s\nsuite %s\narch %s\n", version, Suite, runtime.GOARCH)
	fmt.Fprintf(&b, "user %s\nworkdir %s\nenv %s\n", User, WorkDir, strings.Join(Env, " "))
	for _, l := range p.Chain() {
		b.WriteString(l.layerRecipe())
	}
	return b.String()
}

// Hash is the first 12 hex digits of the recipe's SHA-256.
func (p Profile) Hash() string {
	return digest.SHA256([]byte(p.Recipe()))[:12]
}

// Tag is the image tag of p: gatekeeper-sandbox:<name>-<hash>.
func (p Profile) Tag() string { return Repository + ":" + p.Name + "-" + p.Hash() }

// Resolve returns the image reference a policy's sandbox.fs.image names:
// for a profile name, the profile's tag; for an image reference with a tag
// or a digest (registry/name:tag, name@sha256:…), the reference itself.
// Anything else is an error naming the profiles: a bare word is always
// taken for a profile name, so a misspelt profile is never mistaken for an
// image, and an image is never used at an implicit :latest.
func Resolve(image string) (string, error) {
	if p, ok := Lookup(image); ok {
		return p.Tag(), nil
	}
	if !strings.ContainsAny(image, ":@") {
		return "", fmt.Errorf("unknown image profile %q (profiles: %s; another image needs a reference with a tag or digest, e.g. registry.example/sandbox:1.0)", image, strings.Join(Names(), ", "))
	}
	ref, err := reference.ParseNormalizedNamed(image)
	if err != nil {
		return "", fmt.Errorf("image %q is not a valid image reference: %w", image, err)
	}
	if reference.IsNameOnly(ref) {
		return "", fmt.Errorf("image %q needs a tag or a digest", image)
	}
	return image, nil
}

// BuildHint says how an operator makes image ref exist: the
// `gatekeeper image build` command for a profile's current tag, else that
// the image must be loaded into the engine (gatekeeper never pulls).
func BuildHint(ref string) string {
	if p, ok := ByTag(ref); ok {
		return "build it with: gatekeeper image build " + p.Name
	}
	if rest, ok := strings.CutPrefix(ref, Repository+":"); ok {
		return "it is not the tag of any profile of this gatekeeper (" + rest + "); build the current ones with: gatekeeper image build --all"
	}
	return "load it into the Docker engine (gatekeeper never pulls images)"
}
