package cli

import (
	"bytes"
	"strings"
	"testing"
)

// TestServeSchedulingFlags: a bad value of the flags that decide how ingest
// yields to queries is a usage error naming the flag and the values it
// takes, before anything is opened.
func TestServeSchedulingFlags(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--sched-idle", "fifo"}, `--sched-idle must be none, background or all, got "fifo"`},
		{[]string{"--ingest-nice", "20"}, "--ingest-nice must be 0-19, got 20"},
		{[]string{"--merge-defer-segments", "-1"}, "--merge-defer-segments must not be negative (0: merges never wait), got -1"},
	} {
		var out, errb bytes.Buffer
		args := append([]string{"serve", "--data-dir", t.TempDir(), "--http-addr", "127.0.0.1:0", "--grpc-addr", ""}, c.args...)
		if code := Main(t.Context(), args, &out, &errb); code != 2 || !strings.Contains(errb.String(), c.want) {
			t.Errorf("%v: exit %d %q, want 2 and %q", c.args, code, errb.String(), c.want)
		}
	}
}
