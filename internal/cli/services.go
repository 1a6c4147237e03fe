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
	var win windowFlags
	win.register(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	params := url.Values{}
	win.set(params)
	path, field, header := "/api/v1/services", "services", "SERVICE"
	if fs.NArg() == 1 {
		path, field, header = "/api/v1/services/"+url.PathEscape(fs.Arg(0))+"/operations", "operations", "OPERATION"
	} else if fs.NArg() > 1 {
		return fmt.Errorf("%w: give at most one service", errUsage)
	}
	type nameCount struct {
		Name  string `json:"name"`
		Count int    `json:"count"`
	}
	var resp struct {
		Services   []nameCount `json:"services"`
		Operations []nameCount `json:"operations"`
		listingWindow
	}
	if printed, err := c.fetch(ctx, env, path, params, &resp); err != nil || printed {
		return err
	}
	names := resp.Services
	if field == "operations" {
		names = resp.Operations
	}
	if len(names) == 0 {
		return resp.empty(env.Stdout, field)
	}
	tw := tabwriter.NewWriter(env.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "%s\tSPANS\n", header)
	for _, s := range names {
		fmt.Fprintf(tw, "%s\t%d\n", s.Name, s.Count)
	}
	return tw.Flush()
}
