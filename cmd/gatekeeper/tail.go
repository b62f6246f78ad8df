package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/gatekeeper-ai/gatekeeper/gate/audit"
	"github.com/gatekeeper-ai/gatekeeper/gate/console"
	"github.com/gatekeeper-ai/gatekeeper/internal/untrusted"
)

func cmdTail(ctx context.Context, args []string, env envLookup, stdout, stderr io.Writer) error {
	fs := newFlags("tail", `tail [--url URL] [--json] [--decision D] [--rule R] [--tool T] [--query Q] [--kind K] [--search S]

Follows the live console's stream of decisions, queries, runs (with the
nested calls of their code indented), sessions' starts and ends, egress
requests and audit log rotations of a sidecar started with serve --ui,
newest last: history first (--backfill), then each record as it is
written. Colour when stdout is a
terminal; --json prints each audit line as written.`, stderr)
	url := fs.String("url", defaultSocket(), "the sidecar: unix:///path.sock, tcp://host:port or ws://host:port")
	tokenFile := fs.String("token-file", defaultTokenFile(), "the sidecar's bearer token file")
	asJSON := fs.Bool("json", false, "print each record as its audit line (JSON), one a line")
	color := fs.String("color", "auto", "auto (when stdout is a terminal and NO_COLOR is unset), always or never")
	backfill := fs.Int("backfill", 20, "past records to print first")
	noFollow := fs.Bool("no-follow", false, "print the history and stop")
	utc := fs.Bool("utc", false, "print times in UTC rather than the local zone")
	var f console.Filter
	fs.Var((*listFlag)(&f.Kinds), "kind", "only these kinds: decision, run, code_call, query, session, egress, rotate (repeatable)")
	fs.Var((*listFlag)(&f.Decisions), "decision", "only these decisions: allow, deny, ask (repeatable)")
	fs.Var((*listFlag)(&f.Rules), "rule", "only these rules; a trailing * matches by prefix (repeatable)")
	fs.Var((*listFlag)(&f.Tools), "tool", "only these tools (repeatable)")
	fs.Var((*listFlag)(&f.Queries), "query", "only these query ids or their prefixes (repeatable)")
	fs.StringVar(&f.Search, "search", "", "only records with this text (case-insensitive) in a field or the tool input")
	if err := parse(fs, args, env); err != nil {
		return err
	}
	data, err := os.ReadFile(*tokenFile)
	if err != nil {
		return fmt.Errorf("token file: %w", err)
	}
	token := strings.TrimSpace(string(data))
	st := console.Style{Color: *color == "always" || *color == "auto" && isTerminal(stdout, env), Location: time.Local}
	if *utc {
		st.Location = time.UTC
	}
	return console.Follow(ctx, console.FollowConfig{URL: *url, Token: token, Filter: f, Backfill: *backfill, Follow: !*noFollow},
		func(raw []byte, rec *audit.Record) error {
			if *asJSON {
				_, err := stdout.Write(append(untrusted.JSON(raw), '\n'))
				return err
			}
			return console.Format(stdout, rec, st)
		})
}

// isTerminal reports whether w is a terminal and NO_COLOR is unset.
func isTerminal(w io.Writer, env envLookup) bool {
	if _, set := env("NO_COLOR"); set {
		return false
	}
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}
