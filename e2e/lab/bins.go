package lab

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
)

// rootModule is the module path of the repository root.
const rootModule = "github.com/kilofed/kilofed"

// labCmdPackage is the package of the kilofed-lab binary.
const labCmdPackage = rootModule + "/e2e/cmd/kilofed-lab"

// RequiredBinaries are the control-plane binaries the lab runs, found in
// the lab-bins folder (`make lab-bins`).
var RequiredBinaries = []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kube-proxy", "kubectl", "coredns"}

// Preflight reports why the lab cannot run on this machine: not root
// (ErrNotRoot), a control-plane binary missing (ErrBinaryMissing), or a
// command missing (ip, iptables). It returns nil when the lab can run.
func Preflight() error {
	if os.Geteuid() != 0 {
		return ErrNotRoot
	}
	for _, cmd := range []string{"ip", "iptables", "iptables-restore"} {
		if _, err := exec.LookPath(cmd); err != nil {
			return fmt.Errorf("%w: command %s not found: run `make deps` (or apt-get install iproute2 iptables)", ErrBinaryMissing, cmd)
		}
	}
	dir, err := BinsDir()
	if err != nil {
		return err
	}
	return checkBins(dir)
}

// BinsDir returns the folder of the control-plane binaries: $KILOFED_LAB_BINS,
// else what `e2e/labbins/build.sh --print-dir` prints in the repository.
func BinsDir() (string, error) {
	if d := os.Getenv("KILOFED_LAB_BINS"); d != "" {
		return d, nil
	}
	root, err := RepoRoot()
	if err != nil {
		return "", fmt.Errorf("%w: KILOFED_LAB_BINS is not set and the repository is not found (%w): set KILOFED_LAB_BINS to the folder `make lab-bins` printed", ErrBinaryMissing, err)
	}
	out, err := exec.Command(filepath.Join(root, "e2e", "labbins", "build.sh"), "--print-dir").Output()
	if err != nil {
		return "", fmt.Errorf("%w: e2e/labbins/build.sh --print-dir: %w", ErrBinaryMissing, err)
	}
	return strings.TrimSpace(string(out)), nil
}

// checkBins checks that every required binary is in dir.
func checkBins(dir string) error {
	var missing []string
	for _, b := range RequiredBinaries {
		st, err := os.Stat(filepath.Join(dir, b))
		if err != nil || st.IsDir() || st.Mode()&0o111 == 0 {
			missing = append(missing, b)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("%w: %s not in %s: run `make lab-bins` (about 15 minutes the first time)",
			ErrBinaryMissing, strings.Join(missing, ", "), dir)
	}
	return nil
}

// RepoRoot returns the root of the kilofed repository: the folder, above the
// working directory or above this source file, whose go.mod declares module
// github.com/kilofed/kilofed.
func RepoRoot() (string, error) {
	var starts []string
	if wd, err := os.Getwd(); err == nil {
		starts = append(starts, wd)
	}
	if _, file, _, ok := runtime.Caller(0); ok && filepath.IsAbs(file) {
		starts = append(starts, filepath.Dir(file))
	}
	for _, dir := range starts {
		for {
			if modulePath(filepath.Join(dir, "go.mod")) == rootModule {
				return dir, nil
			}
			parent := filepath.Dir(dir)
			if parent == dir {
				break
			}
			dir = parent
		}
	}
	return "", errors.New("no go.mod of module " + rootModule + " above the working directory")
}

// modulePath returns the module line of a go.mod file, or "".
func modulePath(gomod string) string {
	f, err := os.Open(gomod)
	if err != nil {
		return ""
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(s.Text()), "module "); ok {
			return strings.Trim(strings.TrimSpace(rest), `"`)
		}
	}
	return ""
}

var labBinOnce struct {
	sync.Once
	path string
	err  error
}

// labBinary returns a kilofed-lab binary: $KILOFED_BIN/kilofed-lab (or
// $KILOFED_BIN itself when it is that file), else one built once per
// process with go build into the user cache folder.
func labBinary(ctx context.Context) (string, error) {
	if b := os.Getenv("KILOFED_BIN"); b != "" {
		for _, p := range []string{filepath.Join(b, "kilofed-lab"), b} {
			if st, err := os.Stat(p); err == nil && !st.IsDir() {
				return p, nil
			}
		}
	}
	labBinOnce.Do(func() { labBinOnce.path, labBinOnce.err = buildLabBinary(ctx) })
	return labBinOnce.path, labBinOnce.err
}

// buildLabBinary runs go build of the kilofed-lab command, removing the
// binaries earlier processes left behind.
func buildLabBinary(ctx context.Context) (string, error) {
	root, err := RepoRoot()
	if err != nil {
		return "", fmt.Errorf("build kilofed-lab: %w: set KILOFED_BIN to a folder holding kilofed-lab", err)
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		cache = os.TempDir()
	}
	dir := filepath.Join(cache, "kilofed", "lab-tools")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("build kilofed-lab: %w", err)
	}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		pid, err := strconv.Atoi(strings.TrimPrefix(e.Name(), "kilofed-lab-"))
		if err == nil && pid != os.Getpid() {
			if _, err := os.Stat(filepath.Join("/proc", strconv.Itoa(pid))); errors.Is(err, os.ErrNotExist) {
				_ = os.Remove(filepath.Join(dir, e.Name()))
			}
		}
	}
	out := filepath.Join(dir, "kilofed-lab-"+strconv.Itoa(os.Getpid()))
	cmd := exec.CommandContext(ctx, "go", "build", "-o", out, labCmdPackage)
	cmd.Dir = root
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build %s: %w\n%s", labCmdPackage, err, b)
	}
	return out, nil
}

// copyFile copies an executable (hard link when possible).
func copyFile(src, dst string) error {
	if err := os.Link(src, dst); err == nil {
		return nil
	}
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o755)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
