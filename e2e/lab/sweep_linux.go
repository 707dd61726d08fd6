//go:build linux

package lab

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// netnsDir is where `ip netns` keeps named namespaces.
const netnsDir = "/run/netns"

// sweepAll removes everything named kfl-* (see Sweep) and returns what it
// removed. The caller holds the live lock exclusively.
func sweepAll(ctx context.Context) ([]string, error) {
	var swept []string
	var errs []error
	names, inodes := labNetns(func(string) bool { return true })
	tmpPrefix := filepath.Join(os.TempDir(), Prefix)
	killed, err := killProcesses(func(pi procInfo) bool {
		return inodes[pi.netnsInode] || pi.mentions(tmpPrefix)
	})
	for _, pid := range killed {
		swept = append(swept, "process "+strconv.Itoa(pid))
	}
	if err != nil {
		errs = append(errs, err)
	}
	for _, name := range names {
		if err := delNetns(name); err != nil {
			errs = append(errs, err)
			continue
		}
		swept = append(swept, "netns "+name)
	}
	if host, err := openNS(""); err == nil {
		links, _ := host.h.LinkList()
		for _, link := range links {
			if name := link.Attrs().Name; strings.HasPrefix(name, Prefix) {
				if err := host.h.LinkDel(link); err != nil && !errors.Is(err, syscall.ENODEV) {
					errs = append(errs, fmt.Errorf("delete link %s: %w", name, err))
					continue
				}
				swept = append(swept, "link "+name)
			}
		}
		host.Close()
	} else {
		errs = append(errs, err)
	}
	for _, pattern := range []string{filepath.Join("/etc/netns", Prefix+"*"), tmpPrefix + "*"} {
		matches, _ := filepath.Glob(pattern)
		for _, m := range matches {
			if err := os.RemoveAll(m); err != nil {
				errs = append(errs, err)
				continue
			}
			swept = append(swept, "dir "+m)
		}
	}
	return swept, errors.Join(errs...)
}

// labNetns returns the names of kfl- namespaces that keep says to take, and
// the set of their inode numbers.
func labNetns(keep func(name string) bool) ([]string, map[uint64]bool) {
	entries, _ := os.ReadDir(netnsDir)
	var names []string
	inodes := map[uint64]bool{}
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), Prefix) || !keep(e.Name()) {
			continue
		}
		names = append(names, e.Name())
		var st syscall.Stat_t
		if syscall.Stat(filepath.Join(netnsDir, e.Name()), &st) == nil {
			inodes[st.Ino] = true
		}
	}
	return names, inodes
}

// procInfo is what the sweeper knows of a process.
type procInfo struct {
	pid        int
	netnsInode uint64
	cmdline    string
	cwd        string
}

// mentions reports whether the process runs from, or names, a path under
// prefix.
func (pi procInfo) mentions(prefix string) bool {
	return strings.HasPrefix(pi.cwd, prefix) || strings.Contains(pi.cmdline, prefix)
}

// killProcesses sends SIGKILL to every process (other than this one and its
// parent) that match selects, by pid, and waits up to 5 s for them to go.
func killProcesses(match func(procInfo) bool) ([]int, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, fmt.Errorf("read /proc: %w", err)
	}
	self, parent := os.Getpid(), os.Getppid()
	var killed []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self || pid == parent || pid == 1 {
			continue
		}
		pi := procInfo{pid: pid}
		if link, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/net", pid)); err == nil {
			// "net:[4026532281]"
			s := strings.TrimSuffix(strings.TrimPrefix(link, "net:["), "]")
			pi.netnsInode, _ = strconv.ParseUint(s, 10, 64)
		}
		if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid)); err == nil {
			pi.cmdline = strings.ReplaceAll(string(b), "\x00", " ")
		}
		pi.cwd, _ = os.Readlink(fmt.Sprintf("/proc/%d/cwd", pid))
		if !match(pi) {
			continue
		}
		if err := syscall.Kill(pid, syscall.SIGKILL); err == nil {
			killed = append(killed, pid)
		}
	}
	deadline := time.Now().Add(stopGrace)
	var alive []int
	for _, pid := range killed {
		for processAlive(pid) && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
		if processAlive(pid) {
			alive = append(alive, pid)
		}
	}
	if len(alive) > 0 {
		return killed, fmt.Errorf("processes %v survived SIGKILL", alive)
	}
	return killed, nil
}

// processAlive reports whether pid exists and is not a zombie.
func processAlive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// pid (comm) S ...: the state follows the last ')'.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] != 'Z'
}
