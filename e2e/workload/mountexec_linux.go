//go:build linux

package workload

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"

	"golang.org/x/sys/unix"
)

// runMountExec bind-mounts each --bind source on its target in the
// current mount namespace, which must be private to this process (the
// kubelet stand-in starts it under `ip netns exec`, which unshares one),
// then replaces itself with the command. A missing target is created: a
// directory for a directory source, an empty file otherwise.
func runMountExec(args []string) error {
	binds, argv, err := parseMountExec(args)
	if err != nil {
		return err
	}
	for _, b := range binds {
		if err := bind(b); err != nil {
			return err
		}
	}
	path, err := exec.LookPath(argv[0])
	if err != nil {
		return fmt.Errorf("mount-exec: %w", err)
	}
	return fmt.Errorf("mount-exec: exec %s: %w", path, syscall.Exec(path, argv, os.Environ()))
}

// bind mounts b.Src on b.Dst (read-only if asked).
func bind(b bindMount) error {
	st, err := os.Stat(b.Src)
	if err != nil {
		return fmt.Errorf("mount-exec: source: %w", err)
	}
	if st.IsDir() {
		err = os.MkdirAll(b.Dst, 0o755)
	} else if _, serr := os.Stat(b.Dst); errors.Is(serr, os.ErrNotExist) {
		if err = os.MkdirAll(filepath.Dir(b.Dst), 0o755); err == nil {
			var f *os.File
			if f, err = os.OpenFile(b.Dst, os.O_CREATE|os.O_WRONLY, 0o644); err == nil {
				err = f.Close()
			}
		}
	}
	if err != nil {
		return fmt.Errorf("mount-exec: target %s: %w", b.Dst, err)
	}
	if err := unix.Mount(b.Src, b.Dst, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
		return fmt.Errorf("mount-exec: bind %s on %s: %w", b.Src, b.Dst, err)
	}
	if b.ReadOnly {
		if err := unix.Mount("", b.Dst, "", unix.MS_BIND|unix.MS_REMOUNT|unix.MS_RDONLY, ""); err != nil {
			return fmt.Errorf("mount-exec: read-only %s: %w", b.Dst, err)
		}
	}
	return nil
}
