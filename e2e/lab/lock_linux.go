//go:build linux

package lab

import (
	"context"
	"errors"
	"fmt"
	"os"
	"syscall"
	"time"
)

// The machine-wide lock files. The rule: every live lab holds a shared
// flock on LiveLockPath for its whole life; whoever sweeps must hold it
// exclusively, so Sweep never touches a live lab. Starting a lab and
// sweeping are serialized by an exclusive flock on SetupLockPath, held only
// while a lab checks for others, sweeps when it is alone, and claims its
// management slot (its kfl-<run>-m bridge and 100.(64+slot).0.0/16).
const (
	// LiveLockPath is shared-locked by every live lab.
	LiveLockPath = "/run/kfl-lab.lock"
	// SetupLockPath serializes lab start-ups and sweeps.
	SetupLockPath = "/run/kfl-lab.setup.lock"
)

// flockFile opens path and takes a flock of kind how (LOCK_SH or LOCK_EX),
// polling until ctx ends. nonBlocking makes it try once.
func flockFile(ctx context.Context, path string, how int, nonBlocking bool) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open lock %s: %w", path, err)
	}
	for {
		err := syscall.Flock(int(f.Fd()), how|syscall.LOCK_NB)
		if err == nil {
			return f, nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			f.Close()
			return nil, fmt.Errorf("lock %s: %w", path, err)
		}
		if nonBlocking {
			f.Close()
			return nil, syscall.EWOULDBLOCK
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, fmt.Errorf("wait for lock %s: %w", path, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// Sweep removes the leftovers of lab runs that crashed or were killed:
// processes running in a kfl- namespace or from a kfl- temp dir (killed by
// pid), network namespaces and host links named kfl-*, /etc/netns/kfl-*
// and temp dirs kfl-*. It refuses (ErrLabRunning) while another lab is
// alive on the machine: it never touches a live lab.
func Sweep(ctx context.Context) error {
	setup, err := flockFile(ctx, SetupLockPath, syscall.LOCK_EX, false)
	if err != nil {
		return err
	}
	defer setup.Close()
	live, err := flockFile(ctx, LiveLockPath, syscall.LOCK_EX, true)
	if errors.Is(err, syscall.EWOULDBLOCK) {
		return fmt.Errorf("%w: stop it first (its lock is %s)", ErrLabRunning, LiveLockPath)
	}
	if err != nil {
		return err
	}
	defer live.Close()
	_, err = sweepAll(ctx)
	return err
}

// joinLabs marks the calling lab live. When it is the only one, it first
// sweeps the leftovers of earlier runs. The caller holds the setup lock.
// It returns the live-lock file (closing it releases the lock) and what was
// swept.
func joinLabs(ctx context.Context) (*os.File, []string, error) {
	live, err := flockFile(ctx, LiveLockPath, syscall.LOCK_EX, true)
	switch {
	case err == nil:
		swept, serr := sweepAll(ctx)
		// Downgrade to shared: nobody can take it exclusively meanwhile,
		// since sweeping and starting hold the setup lock.
		if ferr := syscall.Flock(int(live.Fd()), syscall.LOCK_SH); ferr != nil {
			live.Close()
			return nil, nil, fmt.Errorf("lock %s: %w", LiveLockPath, ferr)
		}
		return live, swept, serr
	case errors.Is(err, syscall.EWOULDBLOCK):
		live, err = flockFile(ctx, LiveLockPath, syscall.LOCK_SH, false)
		return live, nil, err
	default:
		return nil, nil, err
	}
}
