package hostpath_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/gatekeeper-ai/gatekeeper/gate/hostpath"
)

func Example() {
	dir, err := os.MkdirTemp("", "hostpath")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(dir)
	// A workspace with a link pointing out of it.
	ws := filepath.Join(dir, "ws")
	os.MkdirAll(filepath.Join(dir, "secrets"), 0o700)
	os.MkdirAll(ws, 0o755)
	os.Symlink("../secrets", filepath.Join(ws, "config"))

	// Resolve the workspace root once, at start.
	root, err := hostpath.Normalize(ws, hostpath.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	opts := hostpath.Options{Home: "/home/dev", Cwd: root.Resolved}
	short := func(p string) string { return strings.TrimPrefix(p, filepath.Dir(root.Resolved)) }

	// A Write of a new file through the link.
	p, err := hostpath.Normalize("config/new.key", opts)
	if err != nil {
		fmt.Println("deny:", err)
		return
	}
	fmt.Println(short(p.Abs), hostpath.Within(p.Abs, root.Resolved))
	fmt.Println(short(p.Resolved), hostpath.Within(p.Resolved, root.Resolved))

	// A Glob pattern that climbs out.
	base, err := hostpath.Normalize(hostpath.GlobBase("../**/*.key"), opts)
	if err != nil {
		fmt.Println("deny:", err)
		return
	}
	fmt.Println(short(base.Resolved), hostpath.Within(base.Resolved, root.Resolved))

	// A deny glob from the policy.
	fmt.Println(hostpath.ExpandHome("~/.ssh/**", opts.Home))
	// Output:
	// /ws/config/new.key true
	// /secrets/new.key false
	//  false
	// /home/dev/.ssh/**
}
