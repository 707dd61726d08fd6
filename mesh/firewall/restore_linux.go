//go:build linux

package firewall

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// restoreAbove is how many edits of a chain planChain may give before the
// chain is written whole in one iptables-restore instead.
const restoreAbove = 4

// findRestore returns the restore command of the same backend as cmd
// (iptables or ip6tables, as go-iptables finds it in PATH), or "" when
// there is none. A variable, for tests.
var findRestore = func(cmd string) string {
	path, err := exec.LookPath(cmd)
	if err != nil {
		return ""
	}
	out, err := exec.Command(path, "--version").CombinedOutput()
	if err != nil {
		return ""
	}
	return restoreCommand(path, string(out), func(p string) (string, error) {
		return filepath.EvalSymlinks(p)
	})
}

// restoreCommand picks the restore command for the iptables binary at path,
// whose --version printed version: the backend's own restore command
// (iptables-nft-restore, ip6tables-legacy-restore) next to it, else the
// plain one (iptables-restore) if it is the same multi-call binary, or if
// the version names no backend (before iptables 1.8). resolve follows a
// path's symlinks and fails when the file is missing.
func restoreCommand(path, version string, resolve func(string) (string, error)) string {
	dir, base := filepath.Dir(path), filepath.Base(path)
	var mode string
	switch {
	case strings.Contains(version, "nf_tables"):
		mode = "nft"
	case strings.Contains(version, "legacy"):
		mode = "legacy"
	}
	if mode != "" {
		own := filepath.Join(dir, base+"-"+mode+"-restore")
		if _, err := resolve(own); err == nil {
			return own
		}
	}
	plain := filepath.Join(dir, base+"-restore")
	target, err := resolve(plain)
	if err != nil {
		return ""
	}
	if mode == "" {
		return plain
	}
	if self, err := resolve(path); err == nil && self == target {
		return plain
	}
	return ""
}

// restoreInput is the iptables-restore input that replaces c's rules: with
// --noflush, declaring the chain creates or flushes it and leaves every
// other chain alone, and the COMMIT applies it all at once.
func restoreInput(c Chain) string {
	var b strings.Builder
	fmt.Fprintf(&b, "*%s\n:%s - [0:0]\n", c.Table, c.Name)
	for _, l := range c.Lines() {
		b.WriteString(l)
		b.WriteByte('\n')
	}
	b.WriteString("COMMIT\n")
	return b.String()
}

// restoreChain writes c whole with one run of f's restore command.
func restoreChain(ctx context.Context, f family, c Chain) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	// -w 5: wait for the xtables lock as go-iptables' runs do.
	cmd := exec.CommandContext(ctx, f.restore, "--noflush", "-w", "5")
	cmd.Stdin = strings.NewReader(restoreInput(c))
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s --noflush: %w: %s", f.restore, err, strings.TrimSpace(out.String()))
	}
	return nil
}
