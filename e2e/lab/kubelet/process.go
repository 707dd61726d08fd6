package kubelet

import (
	"runtime"
	"time"
)

// processSpec describes a workload process to start.
type processSpec struct {
	Argv    []string
	Env     []string
	Dir     string // working directory; "" keeps the kubelet's
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

// lockedStarter starts processes from one goroutine locked to its OS thread
// for the whole Run. Linux delivers a child's parent-death signal when the
// thread that forked it ends; the Go runtime ends threads that a goroutine
// left locked (other code does that to discard a thread switched into
// another netns), so forking from arbitrary threads could kill workloads at
// random. This thread ends only when close is called, after every workload
// was stopped.
type lockedStarter struct {
	start func(processSpec) (*process, error)
	reqs  chan startRequest
	done  chan struct{}
}

// startRequest is one start call handed to the locked thread.
type startRequest struct {
	spec  processSpec
	reply chan startResult
}

// startResult is the answer to a startRequest.
type startResult struct {
	p   *process
	err error
}

// newLockedStarter returns a starter running start on its own thread.
func newLockedStarter(start func(processSpec) (*process, error)) *lockedStarter {
	s := &lockedStarter{start: start, reqs: make(chan startRequest), done: make(chan struct{})}
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with this goroutine
		defer close(s.done)
		for req := range s.reqs {
			p, err := s.start(req.spec)
			req.reply <- startResult{p: p, err: err}
		}
	}()
	return s
}

// Start starts spec on the locked thread.
func (s *lockedStarter) Start(spec processSpec) (*process, error) {
	reply := make(chan startResult, 1)
	s.reqs <- startRequest{spec: spec, reply: reply}
	r := <-reply
	return r.p, r.err
}

// Close ends the locked thread; Start must not be called afterwards.
func (s *lockedStarter) Close() {
	close(s.reqs)
	<-s.done
}
