package kubelet

import (
	"fmt"
	"os"
	"testing"

	"github.com/kilofed/kilofed/e2e/workload"
)

// workloadEnv, set to 1, makes the test binary run workload.Main with its
// arguments instead of the tests: the privileged test uses the test binary
// itself as WorkloadCommand, so no separate workload binary is built.
const workloadEnv = "KFL_KUBELET_TEST_WORKLOAD"

func TestMain(m *testing.M) {
	if os.Getenv(workloadEnv) == "1" {
		if err := workload.Main(os.Args[1:]); err != nil {
			fmt.Fprintln(os.Stderr, "workload:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}
