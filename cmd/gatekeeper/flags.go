package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/gatekeeper-ai/gatekeeper/internal/sockdir"
)

type envLookup func(string) (string, bool)

// newFlags makes a FlagSet whose --help prints the command's synopsis.
func newFlags(name, synopsis string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: gatekeeper %s\n\n", synopsis)
		fs.VisitAll(func(f *flag.Flag) {
			fmt.Fprintf(stderr, "  --%s (env %s)\n      %s", f.Name, envName(f.Name), f.Usage)
			if f.DefValue != "" && f.DefValue != "false" {
				fmt.Fprintf(stderr, " (default %q)", f.DefValue)
			}
			fmt.Fprintln(stderr)
		})
	}
	return fs
}

// envName is the environment variable standing for a flag.
func envName(flagName string) string {
	return "GATEKEEPER_" + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

// parse applies environment variables first, then the command line, so a
// flag given on the command line wins over the environment.
func parse(fs *flag.FlagSet, args []string, env envLookup) error {
	var err error
	fs.VisitAll(func(f *flag.Flag) {
		if v, ok := env(envName(f.Name)); ok && err == nil {
			if e := fs.Set(f.Name, v); e != nil {
				err = fmt.Errorf("%s=%q: %w", envName(f.Name), v, e)
			}
		}
	})
	if err != nil {
		return err
	}
	return fs.Parse(args)
}

// listFlag is a repeatable, comma-separated string flag.
type listFlag []string

func (l *listFlag) String() string { return strings.Join(*l, ",") }

func (l *listFlag) Set(v string) error {
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			*l = append(*l, s)
		}
	}
	return nil
}

// Default locations, following the XDG base directories.
func defaultSocket() string {
	if d := os.Getenv("XDG_RUNTIME_DIR"); d != "" {
		return "unix://" + filepath.Join(d, "gatekeeper.sock")
	}
	return "unix://" + filepath.Join(sockdir.TmpDefault(), "gatekeeper.sock")
}

// defaultLockDir holds the sidecars' instance locks: the user's runtime
// directory, where the default socket is too.
func defaultLockDir() string {
	if d := os.Getenv("XDG_RUNTIME_DIR"); d != "" {
		return filepath.Join(d, "gatekeeper", "instances")
	}
	return filepath.Join(sockdir.TmpDefault(), "instances")
}

func xdgDir(envVar, fallback string) string {
	if d := os.Getenv(envVar); d != "" {
		return filepath.Join(d, "gatekeeper")
	}
	home, err := os.UserHomeDir()
	if err != nil {
		home = os.TempDir()
	}
	return filepath.Join(home, fallback, "gatekeeper")
}

func defaultTokenFile() string { return filepath.Join(xdgDir("XDG_CONFIG_HOME", ".config"), "token") }

func defaultStateDir() string { return xdgDir("XDG_STATE_HOME", ".local/state") }

func defaultAuditLog() string {
	return filepath.Join(xdgDir("XDG_STATE_HOME", ".local/state"), "audit.jsonl")
}

// repeatedFlag is a repeatable string flag whose every value is kept
// whole (a path may hold a comma).
type repeatedFlag []string

func (r *repeatedFlag) String() string { return strings.Join(*r, " ") }

func (r *repeatedFlag) Set(v string) error {
	*r = append(*r, v)
	return nil
}

// flagSet reports whether the flag name was set, on the command line or
// from the environment.
func flagSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}
