package cli

import (
	"context"
	"strings"
	"testing"
)

// TestEmptyListingsNameTheirWindow: every listing command, given nothing
// to list, says which window it searched and how to widen it (the
// server's window rule), instead of a bare header.
func TestEmptyListingsNameTheirWindow(t *testing.T) {
	base, _ := startTestServer(t)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"search"}, "no spans in the last 24h; try --since 7d\n"},
		{[]string{"search", "--traces"}, "no traces in the last 24h; try --since 7d\n"},
		{[]string{"search", "--since", "1h", "{ status = error }"}, "no spans in the last 1h; try --since 7d\n"},
		{[]string{"search", "--since", "7d"}, "no spans in the last 7d; try --since 30d\n"},
		{[]string{"search", "--since", "all"}, "no spans in all time\n"},
		{[]string{"services"}, "no services in the last 24h; try --since 7d\n"},
		{[]string{"services", "checkout"}, "no operations in the last 24h; try --since 7d\n"},
		{[]string{"llm", "stats"}, "no spans in the last 24h; try --since 7d\n"},
		{[]string{"sessions"}, "no sessions in the last 24h; try --since 7d\n"},
		{[]string{"red"}, "no spans in the last 24h; try --since 7d\n"},
		{[]string{"errors"}, "no errors in the last 24h; try --since 7d\n"},
	} {
		var out, errb strings.Builder
		args := append(c.args, "--server", base)
		if code := Main(context.Background(), args, &out, &errb); code != 0 || out.String() != c.want {
			t.Errorf("rastro %s: exit %d\nstdout %q\nstderr %q\nwant %q", strings.Join(c.args, " "), code, out.String(), errb.String(), c.want)
		}
	}
}
