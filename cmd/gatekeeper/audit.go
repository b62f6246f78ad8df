package main

import (
	"errors"
	"fmt"
	"io"
	"log/slog"

	"github.com/gatekeeper-ai/gatekeeper/gate/audit"
)

func cmdAuditVerify(args []string, env envLookup, stdout, stderr io.Writer) error {
	fs := newFlags("audit verify", "audit verify FILE", stderr)
	if err := parse(fs, args, env); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		fs.Usage()
		return exitError(2)
	}
	rep, err := audit.VerifyFile(fs.Arg(0))
	var be *audit.BreakError
	switch {
	case errors.As(err, &be):
		fmt.Fprintf(stdout, "%s: broken at line %d: %s (%d lines before it verify)\n", fs.Arg(0), be.Line, be.Reason, rep.Lines)
		return exitError(1)
	case err != nil:
		return err
	}
	fmt.Fprintf(stdout, "%s: ok, %d lines, chain intact\n", fs.Arg(0), rep.Lines)
	return nil
}

func quietLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }
