//go:build unix

package main

import (
	"io"
	"log/syslog"
)

// dialSyslog connects to a syslog daemon (the local one when network and
// addr are empty) and tags each checkpoint "gatekeeper".
func dialSyslog(network, addr string) (io.Writer, func(), error) {
	w, err := syslog.Dial(network, addr, syslog.LOG_INFO|syslog.LOG_DAEMON, "gatekeeper")
	if err != nil {
		return nil, nil, err
	}
	return w, func() { w.Close() }, nil
}
