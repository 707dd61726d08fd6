//go:build linux

package lab

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// stopGrace is how long Stop waits after SIGTERM before SIGKILL.
const stopGrace = 5 * time.Second

// procSpec says how to start a process.
type procSpec struct {
	name  string   // log file name (without .log) and label
	netns string   // run inside this namespace via `ip netns exec`; "" = host
	argv  []string // command and arguments
	env   []string // added to the lab's environment
	// tier orders Close: 0 (node processes) stop first, then 1
	// (controller managers), 2 (API servers) and 3 (etcd), so that no
	// server waits for clients that are about to go.
	tier int
}

// startProcess starts a process in its own process group with its output in
// Dir/logs/<name>.log, and registers it so that Close stops it.
func (l *Lab) startProcess(ps procSpec) (*Process, error) {
	l.mu.Lock()
	closed := l.closed
	l.mu.Unlock()
	if closed {
		return nil, ErrClosed
	}
	if len(ps.argv) == 0 {
		return nil, fmt.Errorf("start %s: empty command", ps.name)
	}
	logDir := filepath.Join(l.Dir, "logs")
	if err := os.MkdirAll(logDir, 0o755); err != nil {
		return nil, fmt.Errorf("start %s: %w", ps.name, err)
	}
	logPath := filepath.Join(logDir, sanitizeFileName(ps.name)+".log")
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("start %s: %w", ps.name, err)
	}
	defer logFile.Close() // the child holds its own copy
	argv := ps.argv
	if ps.netns != "" {
		argv = append([]string{"ip", "netns", "exec", ps.netns}, argv...)
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = l.Dir
	cmd.Env = append(os.Environ(), ps.env...)
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	fmt.Fprintf(logFile, "# %s: %s\n", time.Now().Format(time.RFC3339), strings.Join(argv, " "))
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s (%s): %w", ps.name, argv[0], err)
	}
	p := &Process{Name: ps.name, Netns: ps.netns, LogPath: logPath, pid: cmd.Process.Pid, tier: ps.tier, logger: l.logger, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	l.mu.Lock()
	l.procs = append(l.procs, p)
	l.mu.Unlock()
	l.logger.Debug("started process", "name", ps.name, "pid", p.pid, "netns", ps.netns, "log", logPath)
	return p, nil
}

// Signal sends sig to the process's whole group (members may outlive the
// leader, so this also works once the leader exited).
func (p *Process) Signal(sig syscall.Signal) error {
	if err := syscall.Kill(-p.pid, sig); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("signal %s group %d: %w", p.Name, p.pid, err)
	}
	return nil
}

// Stop ends the process: SIGTERM to its group, up to 5 s of grace, then
// SIGKILL to the group; it returns once the process was reaped (an error if
// it survived SIGKILL). Stopping a process that has exited only sweeps its
// group.
func (p *Process) Stop() error {
	if !p.Exited() {
		if err := p.Signal(syscall.SIGTERM); err != nil {
			return err
		}
		select {
		case <-p.done:
		case <-time.After(stopGrace):
			p.logger.Info("process ignored SIGTERM, killing it", "name", p.Name, "pid", p.pid, "grace", stopGrace)
		}
	}
	return p.Kill()
}

// Kill sends SIGKILL to the process's group at once (a dead node, a crash)
// and waits until the process was reaped.
func (p *Process) Kill() error {
	if err := p.Signal(syscall.SIGKILL); err != nil {
		return err
	}
	select {
	case <-p.done:
		return nil
	case <-time.After(stopGrace):
		return fmt.Errorf("process %s (pid %d) survived SIGKILL for %s", p.Name, p.pid, stopGrace)
	}
}

// Exec runs argv in the namespace and returns its standard output; when it
// fails, the error holds its standard error. Ending ctx kills it.
func (ns *Namespace) Exec(ctx context.Context, argv ...string) ([]byte, error) {
	return execIn(ctx, ns.Name, argv...)
}

// execIn runs argv in netns (host namespace if empty).
func execIn(ctx context.Context, netns string, argv ...string) ([]byte, error) {
	if len(argv) == 0 {
		return nil, errors.New("exec: empty command")
	}
	full := argv
	if netns != "" {
		full = append([]string{"ip", "netns", "exec", netns}, argv...)
	}
	cmd := exec.CommandContext(ctx, full[0], full[1:]...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 2 * time.Second
	var stdout, stderr bytes.Buffer
	cmd.Stdout = &stdout
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		where := ""
		if netns != "" {
			where = " in " + netns
		}
		return stdout.Bytes(), fmt.Errorf("%s%s: %w: %s", strings.Join(argv, " "), where, err, strings.TrimSpace(stderr.String()))
	}
	return stdout.Bytes(), nil
}

func (ns *Namespace) start(name string, argv []string) (*Process, error) {
	return ns.lab.startProcess(procSpec{name: name, netns: ns.Name, argv: argv})
}
