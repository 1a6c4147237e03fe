package cli

import (
	"context"
	"fmt"
	"net/url"
	"text/tabwriter"
)

func init() {
	register(&Command{Name: "services", Short: "list services (or one service's operations) with span counts", Run: runServices})
}

func runServices(ctx context.Context, env *Env, args []string) error {
	fs := newFlagSet(env, "services", "[flags] [SERVICE]")
	var c clientFlags
	c.register(fs, env)
	since := fs.String("since", "24h", "window start: RFC 3339, Unix time (unit by digit count), or a duration ago")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	params := url.Values{"since": {*since}}
	path, field, header := "/api/v1/services", "services", "SERVICE"
	if fs.NArg() == 1 {
		path, field, header = "/api/v1/services/"+url.PathEscape(fs.Arg(0))+"/operations", "operations", "OPERATION"
	} else if fs.NArg() > 1 {
		return fmt.Errorf("%w: give at most one service", errUsage)
	}
	var resp map[string][]struct {
		Name  string `json:"name"`
		Count int    `json:"count"`
	}
	if printed, err := c.fetch(ctx, env, path, params, &resp); err != nil || printed {
		return err
	}
	tw := tabwriter.NewWriter(env.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "%s\tSPANS\n", header)
	for _, s := range resp[field] {
		fmt.Fprintf(tw, "%s\t%d\n", s.Name, s.Count)
	}
	return tw.Flush()
}
