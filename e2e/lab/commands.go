package lab

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

// Commands returns a folder holding kilofed's commands (kg, kgctl, kilofed,
// kilofed-controller): $KILOFED_BIN when it holds every one of want (make
// sets it), else a temporary folder they are built into, which cleanup
// removes. Test packages call it from TestMain.
func Commands(want ...string) (dir string, cleanup func(), err error) {
	if dir = os.Getenv("KILOFED_BIN"); dir != "" && allExecutable(dir, want) {
		return dir, func() {}, nil
	}
	root, err := RepoRoot()
	if err != nil {
		return "", nil, err
	}
	dir, err = os.MkdirTemp("", "kilofed-e2e-bin-")
	if err != nil {
		return "", nil, err
	}
	cleanup = func() { os.RemoveAll(dir) }
	cmd := exec.Command("go", "build", "-o", dir+"/", "./cmd/...")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		cleanup()
		return "", nil, fmt.Errorf("build kilofed's commands: %v\n%s", err, out)
	}
	return dir, cleanup, nil
}

func allExecutable(dir string, names []string) bool {
	for _, n := range names {
		fi, err := os.Stat(filepath.Join(dir, n))
		if err != nil || fi.Mode()&0o111 == 0 {
			return false
		}
	}
	return true
}
