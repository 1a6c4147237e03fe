package bench

import (
	"os/exec"
	"strconv"
	"strings"
	"testing"
)

// TestClockTickMatchesGetconf checks the tick read from the auxiliary
// vector against getconf, which asks sysconf(_SC_CLK_TCK).
func TestClockTickMatchesGetconf(t *testing.T) {
	out, err := exec.Command("getconf", "CLK_TCK").Output()
	if err != nil {
		t.Skipf("getconf CLK_TCK: %v", err)
	}
	want, err := strconv.ParseUint(strings.TrimSpace(string(out)), 10, 64)
	if err != nil {
		t.Fatalf("getconf CLK_TCK printed %q", out)
	}
	if got := clockTick(); got != want {
		t.Errorf("clock tick %d, getconf CLK_TCK says %d", got, want)
	}
}
