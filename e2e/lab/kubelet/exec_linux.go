//go:build linux

package kubelet

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"syscall"
	"time"

	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
	"k8s.io/cri-streaming/pkg/streaming/remotecommand"
)

// execOutputWait bounds how long output is still copied after an exec'd
// command exited (children that keep its stdout open are killed then).
const execOutputWait = 2 * time.Second

// runCommand runs spec in its own process group (its own session with a
// controlling terminal when spec.TTY) and returns its exit status (128+N
// when killed by signal N). When ctx ends the group is killed. When the
// command exits, whatever it left running in its group is killed too. No
// parent-death signal is set: it fires when the forking thread ends, and
// the HTTP handlers fork from any thread; the lab kills what runs in its
// namespaces when it closes.
func runCommand(ctx context.Context, spec execSpec) (int, error) {
	cmd := exec.Command(spec.Argv[0], spec.Argv[1:]...)
	cmd.Env, cmd.Dir = spec.Env, "/"
	cmd.WaitDelay = execOutputWait
	var (
		stdinW  *os.File // our end of the stdin pipe
		pty     *os.File // master end of the terminal
		outDone = make(chan struct{})
	)
	if spec.TTY {
		master, slave, err := openPTY()
		if err != nil {
			return 0, err
		}
		defer master.Close()
		defer slave.Close()
		pty = master
		cmd.Stdin, cmd.Stdout, cmd.Stderr = slave, slave, slave
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	} else {
		close(outDone)
		cmd.Stdout, cmd.Stderr = spec.Stdout, spec.Stderr
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if spec.Stdin != nil {
			// Our own pipe, not exec's copier: Wait must not wait for a
			// client that never closes its stdin.
			r, w, err := os.Pipe()
			if err != nil {
				return 0, fmt.Errorf("exec stdin pipe: %w", err)
			}
			defer r.Close()
			defer w.Close()
			cmd.Stdin, stdinW = r, w
		}
	}
	if err := cmd.Start(); err != nil {
		return 0, fmt.Errorf("start %q: %w", spec.Argv, err)
	}
	pgid := cmd.Process.Pid
	if stdinW != nil {
		_ = cmd.Stdin.(*os.File).Close()
		go func() {
			_, _ = io.Copy(stdinW, spec.Stdin)
			_ = stdinW.Close()
		}()
	}
	if pty != nil {
		_ = cmd.Stdin.(*os.File).Close() // the slave: only the child holds it now
		go func() { _, _ = io.Copy(pty, orEmpty(spec.Stdin)) }()
		go resizeTerminal(pty, spec.Resize)
		go func() {
			defer close(outDone)
			// Reading the master fails with EIO once no process holds the
			// slave any more: that is the end of the output.
			_, _ = io.Copy(orDiscard(spec.Stdout), pty)
		}()
	}
	stop := context.AfterFunc(ctx, func() { _ = syscall.Kill(-pgid, syscall.SIGKILL) })
	err := cmd.Wait()
	stop()
	_ = syscall.Kill(-pgid, syscall.SIGKILL) // leftovers of the session
	select {
	case <-outDone:
	case <-time.After(execOutputWait):
	}
	var exitErr *exec.ExitError
	switch {
	case err == nil:
		return 0, nil
	case errors.As(err, &exitErr):
		return int(exitCode(exitErr.ProcessState)), nil
	case errors.Is(err, exec.ErrWaitDelay):
		return int(exitCode(cmd.ProcessState)), nil
	default:
		return 0, fmt.Errorf("wait for %q: %w", spec.Argv, err)
	}
}

// openPTY opens a new pseudo-terminal pair.
func openPTY() (master, slave *os.File, err error) {
	fd, err := unix.Open("/dev/ptmx", unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("open /dev/ptmx: %w", err)
	}
	master = os.NewFile(uintptr(fd), "/dev/ptmx")
	if err := unix.IoctlSetPointerInt(fd, unix.TIOCSPTLCK, 0); err != nil {
		master.Close()
		return nil, nil, fmt.Errorf("unlock pty: %w", err)
	}
	n, err := unix.IoctlGetUint32(fd, unix.TIOCGPTN)
	if err != nil {
		master.Close()
		return nil, nil, fmt.Errorf("pty number: %w", err)
	}
	name := fmt.Sprintf("/dev/pts/%d", n)
	slave, err = os.OpenFile(name, os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		master.Close()
		return nil, nil, fmt.Errorf("open %s: %w", name, err)
	}
	return master, slave, nil
}

// resizeTerminal applies the client's terminal sizes to the pty.
func resizeTerminal(pty *os.File, sizes <-chan remotecommand.TerminalSize) {
	if sizes == nil {
		return
	}
	for s := range sizes {
		ws := &unix.Winsize{Row: s.Height, Col: s.Width}
		if err := unix.IoctlSetWinsize(int(pty.Fd()), unix.TIOCSWINSZ, ws); err != nil {
			return
		}
	}
}

// orEmpty returns r, or an empty reader when r is nil.
func orEmpty(r io.Reader) io.Reader {
	if r == nil {
		return eofReader{}
	}
	return r
}

// eofReader is always at its end.
type eofReader struct{}

func (eofReader) Read([]byte) (int, error) { return 0, io.EOF }

// orDiscard returns w, or io.Discard when w is nil.
func orDiscard(w io.Writer) io.Writer {
	if w == nil {
		return io.Discard
	}
	return w
}

// ListenInNetns opens a TCP listener on addr inside the named network
// namespace (the socket stays in that namespace while the caller's
// goroutines serve it from any namespace). The lab uses it to serve a
// node's kubelet API on the node's management address.
func ListenInNetns(name string, addr netip.AddrPort) (net.Listener, error) {
	ns, err := netns.GetFromName(name)
	if err != nil {
		return nil, fmt.Errorf("open netns %s: %w", name, err)
	}
	defer ns.Close()
	var ln net.Listener
	err = inNetns(ns, func() error {
		var lerr error
		ln, lerr = net.Listen("tcp", addr.String())
		return lerr
	})
	if err != nil {
		return nil, fmt.Errorf("listen on %s in netns %s: %w", addr, name, err)
	}
	return ln, nil
}
