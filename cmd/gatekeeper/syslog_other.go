//go:build !unix

package main

import (
	"errors"
	"io"
)

func dialSyslog(string, string) (io.Writer, func(), error) {
	return nil, nil, errors.New("syslog is not available on this system")
}
