package lab

import (
	"bytes"
	"io"
	"log/slog"
	"os"
	"strings"
)

// Process is a long-running process that the lab started in its own process
// group, its standard output and error going to LogPath.
type Process struct {
	// Name names the process in logs and errors.
	Name string
	// Netns is the namespace it runs in; empty for the host namespace.
	Netns string
	// LogPath is the file that receives its standard output and error.
	LogPath string

	pid    int
	tier   int // Close stops low tiers first: see procSpec.tier
	logger *slog.Logger
	done   chan struct{}
	err    error // exit error, set before done is closed
}

// Pid returns the process id (also its process group id).
func (p *Process) Pid() int { return p.pid }

// Done returns a channel closed once the process has exited and was reaped.
func (p *Process) Done() <-chan struct{} { return p.done }

// Exited reports whether the process has exited.
func (p *Process) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Err returns how the process exited (nil for status 0); only meaningful
// once Done is closed.
func (p *Process) Err() error {
	select {
	case <-p.done:
		return p.err
	default:
		return nil
	}
}

// Tail returns the last n lines of the process's log.
func (p *Process) Tail(n int) string { return tailFile(p.LogPath, n) }

// tailLines is how many log lines errors show.
const tailLines = 40

// tailFile returns the last n lines of a file (reading at most its last
// 64 KiB), or a note saying why it cannot.
func tailFile(path string, n int) string {
	f, err := os.Open(path)
	if err != nil {
		return "(no log: " + err.Error() + ")"
	}
	defer f.Close()
	const max = 64 << 10
	if st, err := f.Stat(); err == nil && st.Size() > max {
		_, _ = f.Seek(st.Size()-max, io.SeekStart)
	}
	b, _ := io.ReadAll(f)
	b = bytes.TrimRight(b, "\n")
	lines := strings.Split(string(b), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// logTail formats the tail of a process's log for an error message.
func (p *Process) logTail() string {
	return "\n--- last lines of " + p.LogPath + " ---\n" + p.Tail(tailLines) + "\n---"
}

// sanitizeFileName keeps [A-Za-z0-9._-] and replaces the rest with '_'.
func sanitizeFileName(s string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '.', r == '-', r == '_':
			return r
		}
		return '_'
	}, s)
}
