package mcpservers

import (
	"bytes"
	"log/slog"
)

// maxLogLine bounds one logged line of a server's stderr.
const maxLogLine = 1024

// lineLogger logs a stdio server's stderr line by line at debug level,
// each line cut at maxLogLine. exec.Cmd writes to it from one goroutine.
type lineLogger struct {
	log *slog.Logger
	buf []byte
}

func (l *lineLogger) Write(p []byte) (int, error) {
	n := len(p)
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			room := max(maxLogLine-len(l.buf), 0)
			l.buf = append(l.buf, p[:min(room, len(p))]...)
			break
		}
		room := max(maxLogLine-len(l.buf), 0)
		l.buf = append(l.buf, p[:min(room, i)]...)
		l.log.Debug("mcp server stderr", "line", string(l.buf))
		l.buf = l.buf[:0]
		p = p[i+1:]
	}
	return n, nil
}
