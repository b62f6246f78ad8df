// Package deps pins the module's dependencies while the packages that use
// them are written; it is removed once every dependency has a real importer.
package deps

import (
	_ "github.com/docker/docker/client"
	_ "github.com/google/uuid"
	_ "github.com/gorilla/websocket"
	_ "github.com/open-policy-agent/opa/v1/rego"
	_ "github.com/open-policy-agent/opa/v1/tester"
	_ "github.com/prometheus/client_golang/prometheus"
	_ "gopkg.in/yaml.v3"
)
