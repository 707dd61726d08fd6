//go:build linux

package lab

// Start launches a long-running process in the host's own network
// namespace, where the tests run and which reaches every cluster's API
// server (a controller running outside the clusters); its output goes to
// Dir/logs/host-<name>.log and Close stops it if it still runs.
func (l *Lab) Start(name string, argv ...string) (*Process, error) {
	return l.startProcess(procSpec{name: "host-" + name, argv: argv})
}
