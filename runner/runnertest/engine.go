package runnertest

import "os"

// SkipEngineEnv, set to 1, asks to skip the tests that need a Docker
// engine, for a developer without one. CI (CI=true) never honours it:
// there a missing engine fails those tests.
const SkipEngineEnv = "GATEKEEPER_SKIP_DOCKER_TESTS"

// SkipEngine reports whether SkipEngineEnv asks to skip the engine tests:
// set to 1, and not under CI=true.
func SkipEngine() bool { return os.Getenv(SkipEngineEnv) == "1" && os.Getenv("CI") != "true" }
