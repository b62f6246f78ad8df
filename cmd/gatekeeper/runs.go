package main

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/gatekeeper-ai/gatekeeper/gate/artifacts"
	"github.com/gatekeeper-ai/gatekeeper/internal/untrusted"
)

// artifactsDirFlag is the --artifacts-dir flag of serve and runs.
const artifactsDirUsage = "directory of run artifacts (code, input digests, result), one JSON file per run named by time and hash; empty keeps none"

func cmdRunsList(args []string, env envLookup, stdout, stderr io.Writer) error {
	fs := newFlags("runs list", "runs list --artifacts-dir DIR\n\nLists the runs a sidecar recorded in DIR (serve --artifacts-dir), oldest first.", stderr)
	dir := fs.String("artifacts-dir", "", artifactsDirUsage)
	if err := parse(fs, args, env); err != nil {
		return err
	}
	if *dir == "" || fs.NArg() != 0 {
		fs.Usage()
		return exitError(2)
	}
	d, err := artifacts.Open(*dir)
	if err != nil {
		return err
	}
	all, err := d.List()
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "TIME\tRUN\tQUERY\tLANGUAGE\tREASON\tEXIT\tMS\tFILES IN/OUT\tCODE\tWORKSPACE")
	for _, e := range all {
		code := "digest only"
		if e.Code != "" || e.CodeSHA256 == artifacts.Digest(nil) {
			code = "kept"
		}
		if !e.Intact {
			code += " (ALTERED: content does not match the hash in its name)"
		}
		ws := e.Result.Workspace
		if ws == "" {
			ws = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\t%d\t%d/%d\t%s\t%s\n", e.Time.Format(time.RFC3339Nano), untrusted.Terminal(e.RunID), untrusted.Terminal(e.QueryID), untrusted.Terminal(e.Language),
			e.Result.Reason, e.Result.ExitCode, e.Result.DurationMS, len(e.Files), len(e.Result.Files), code, ws)
	}
	return tw.Flush()
}

func cmdRunsShow(args []string, env envLookup, stdout, stderr io.Writer) error {
	fs := newFlags("runs show", "runs show --artifacts-dir DIR RUN_ID\n\nPrints the artifact of one run (RUN_ID or a prefix of it naming one run).\nExit status 1 when its content does not match the hash in its name.", stderr)
	dir := fs.String("artifacts-dir", "", artifactsDirUsage)
	if err := parse(fs, args, env); err != nil {
		return err
	}
	if *dir == "" || fs.NArg() != 1 {
		fs.Usage()
		return exitError(2)
	}
	d, err := artifacts.Open(*dir)
	if err != nil {
		return err
	}
	e, err := d.Find(fs.Arg(0))
	if err != nil {
		return err
	}
	state := "its content matches the hash in its name"
	if !e.Intact {
		state = "ALTERED: its content does not match the hash in its name"
	}
	fmt.Fprintf(stdout, "artifact %s: %s\n", untrusted.Terminal(e.Name), state)
	if err := writeJSON(stdout, e.Artifact); err != nil {
		return err
	}
	if e.Code != "" {
		// The code is the model's: escape sequences in it are shown as escapes.
		fmt.Fprintf(stdout, "--- code (%s)\n%s", untrusted.Terminal(e.Language), untrusted.TerminalText(e.Code))
		if !strings.HasSuffix(e.Code, "\n") {
			fmt.Fprintln(stdout)
		}
	}
	if !e.Intact {
		return exitError(1)
	}
	return nil
}
