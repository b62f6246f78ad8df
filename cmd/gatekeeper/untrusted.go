package main

import (
	"bytes"
	"encoding/json"
	"io"

	"github.com/gatekeeper-ai/gatekeeper/internal/untrusted"
)

// writeJSON writes v to w as indented JSON, with the characters a model's
// text may carry and JSON leaves raw (DEL, C1, bidirectional controls)
// escaped (untrusted.JSON): the same value, harmless on a terminal.
func writeJSON(w io.Writer, v any) error {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return err
	}
	_, err := w.Write(untrusted.JSON(b.Bytes()))
	return err
}
