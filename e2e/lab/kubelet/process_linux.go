//go:build linux

package kubelet

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// startProcess starts spec in its own process group. The process gets
// SIGKILL if the thread that started it dies, so a crashed lab leaves no
// workloads behind.
func startProcess(spec processSpec) (*process, error) {
	logf, err := os.OpenFile(spec.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open workload log: %w", err)
	}
	defer logf.Close()
	_, _ = logf.WriteString(runMarker(time.Now(), spec.Argv))
	cmd := exec.Command(spec.Argv[0], spec.Argv[1:]...)
	cmd.Env, cmd.Dir = spec.Env, spec.Dir
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start workload %q: %w", spec.Argv, err)
	}
	p := &process{pid: cmd.Process.Pid, done: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		p.exitCode = exitCode(cmd.ProcessState)
		p.finishedAt = time.Now()
		close(p.done)
	}()
	return p, nil
}

// exitCode returns the shell-style exit status of a finished process.
func exitCode(st *os.ProcessState) int32 {
	if ws, ok := st.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int32(ws.Signal())
	}
	return int32(st.ExitCode())
}

// stop sends SIGTERM to the process group, SIGKILL after grace, and returns
// once the leader is reaped and no process of the group is left.
func (p *process) stop(grace time.Duration) error {
	if p.pid <= 0 {
		return nil // never started: kill(-0) would hit our own group
	}
	select {
	case <-p.done:
	default:
		_ = syscall.Kill(-p.pid, syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(grace):
			_ = syscall.Kill(-p.pid, syscall.SIGKILL)
			select {
			case <-p.done:
			case <-time.After(5 * time.Second):
				return fmt.Errorf("process %d survived SIGKILL for 5s", p.pid)
			}
		}
	}
	// Children that the workload left in its group. Killed orphans stay
	// zombies until init reaps them (slowly on some machines): they count
	// as gone.
	for deadline := time.Now().Add(2 * time.Second); ; {
		err := syscall.Kill(-p.pid, 0)
		if errors.Is(err, syscall.ESRCH) || !groupHasLiveMember(p.pid) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("process group %d still has members after SIGKILL", p.pid)
		}
		_ = syscall.Kill(-p.pid, syscall.SIGKILL)
		time.Sleep(50 * time.Millisecond)
	}
}

// groupHasLiveMember reports whether a process that is not a zombie belongs
// to process group pgid.
func groupHasLiveMember(pgid int) bool {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return true // cannot tell: assume alive
	}
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue // exited meanwhile
		}
		state, pgrp, ok := parseStat(string(b))
		if ok && pgrp == pgid && state != "Z" && state != "X" {
			return true
		}
	}
	return false
}

// parseStat returns the state and process group of a /proc/<pid>/stat line
// ("pid (comm) state ppid pgrp ..."; comm may hold spaces and parentheses).
func parseStat(stat string) (state string, pgrp int, ok bool) {
	i := strings.LastIndexByte(stat, ')')
	if i < 0 {
		return "", 0, false
	}
	f := strings.Fields(stat[i+1:])
	if len(f) < 3 {
		return "", 0, false
	}
	pgrp, err := strconv.Atoi(f[2])
	return f[0], pgrp, err == nil
}
