//go:build linux

package linktest

import (
	"crypto/rand"
	"encoding/hex"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/kilofed/kilofed/mesh/link"
)

// Require stops the test unless it can create network namespaces and links:
// it fails under CI=true and skips otherwise, saying why.
func Require(t testing.TB) {
	t.Helper()
	reason := ""
	switch {
	case os.Geteuid() != 0:
		reason = "needs root to create network namespaces"
	case !hasBinary("ip"):
		reason = "needs iproute2's ip command"
	}
	if reason == "" {
		return
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("privileged test cannot run: %s", reason)
	}
	t.Skipf("privileged test: %s", reason)
}

// RequireBinary stops the test unless the named command is in PATH, like
// Require.
func RequireBinary(t testing.TB, name string) {
	t.Helper()
	if hasBinary(name) {
		return
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("privileged test cannot run: %s not found in PATH", name)
	}
	t.Skipf("privileged test: %s not found in PATH", name)
}

func hasBinary(name string) bool {
	_, err := exec.LookPath(name)
	return err == nil
}

// Name returns a unique name "kfl" + prefix + random hex of at most 15
// bytes, usable for a link or a namespace.
func Name(t testing.TB, prefix string) string {
	t.Helper()
	n := 15 - len("kfl") - len(prefix)
	if n < 4 {
		t.Fatalf("linktest: prefix %q too long for a link name", prefix)
	}
	b := make([]byte, (n+1)/2)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return "kfl" + prefix + hex.EncodeToString(b)[:n]
}

// NetNS creates a network namespace named kfl<random> with loopback up and
// IPv6 duplicate address detection off, and deletes it at cleanup. It returns the namespace's name.
func NetNS(t testing.TB) string {
	t.Helper()
	name := Name(t, "ns")
	IP(t, "netns", "add", name)
	t.Cleanup(func() {
		if out, err := exec.Command("ip", "netns", "del", name).CombinedOutput(); err != nil {
			t.Errorf("delete network namespace %s: %v: %s", name, err, out)
		}
	})
	IP(t, "-n", name, "link", "set", "lo", "up")
	// Links made later skip IPv6 duplicate address detection, so that
	// their link-local addresses work at once.
	if out, err := Exec(name, "sysctl", "-qw", "net.ipv6.conf.default.accept_dad=0", "net.ipv6.conf.all.accept_dad=0"); err != nil {
		t.Fatalf("turn off DAD in %s: %v: %s", name, err, out)
	}
	return name
}

// Path returns the file of the named namespace, for link.RunInNetNS.
func Path(ns string) string { return "/run/netns/" + ns }

// Veth connects namespace nsA (link nameA, address addrA) to namespace nsB
// (link nameB, address addrB) with a veth pair and brings both ends up.
// Addresses are CIDR strings (IPv6 ones skip duplicate address detection);
// empty ones are not set.
func Veth(t testing.TB, nsA, nameA, addrA, nsB, nameB, addrB string) {
	t.Helper()
	IP(t, "link", "add", nameA, "netns", nsA, "type", "veth", "peer", "name", nameB, "netns", nsB)
	for _, end := range [][3]string{{nsA, nameA, addrA}, {nsB, nameB, addrB}} {
		switch {
		case strings.Contains(end[2], ":"):
			IP(t, "-n", end[0], "addr", "add", end[2], "dev", end[1], "nodad")
		case end[2] != "":
			IP(t, "-n", end[0], "addr", "add", end[2], "dev", end[1])
		}
		IP(t, "-n", end[0], "link", "set", end[1], "up")
	}
}

// IP runs the ip command with args and fails the test on error; it returns
// the combined output.
func IP(t testing.TB, args ...string) string {
	t.Helper()
	out, err := exec.Command("ip", args...).CombinedOutput()
	if err != nil {
		t.Fatalf("ip %s: %v: %s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// Exec runs a command inside namespace ns (ip netns exec) and returns its
// combined output and error.
func Exec(ns string, args ...string) (string, error) {
	out, err := exec.Command("ip", append([]string{"netns", "exec", ns}, args...)...).CombinedOutput()
	return string(out), err
}

// Run runs f inside namespace ns on a dedicated thread and fails the test
// if f returns an error.
func Run(t testing.TB, ns string, f func() error) {
	t.Helper()
	if err := link.RunInNetNS(Path(ns), f); err != nil {
		t.Fatalf("in namespace %s: %v", ns, err)
	}
}
