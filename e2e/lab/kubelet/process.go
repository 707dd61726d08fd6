package kubelet

import "time"

// processSpec describes a workload process to start.
type processSpec struct {
	Argv    []string
	Env     []string
	LogPath string // stdout and stderr are appended there
}

// process is a started workload process, leader of its own process group.
type process struct {
	pid        int
	done       chan struct{} // closed once the process has been reaped
	exitCode   int32         // valid after done; 128+N when killed by signal N
	finishedAt time.Time     // valid after done
}

// exitedProcess returns a process that has already exited with code.
func exitedProcess(code int32, at time.Time) *process {
	p := &process{done: make(chan struct{}), exitCode: code, finishedAt: at}
	close(p.done)
	return p
}
