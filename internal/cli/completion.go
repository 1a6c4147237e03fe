package cli

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"regexp"
	"sort"
	"strings"
)

func init() {
	register(&Command{Name: "completion", Short: "print a shell completion script: rastro completion bash|zsh|fish", Run: runCompletion})
}

func runCompletion(ctx context.Context, env *Env, args []string) error {
	fs := newFlagSet(env, "completion", "bash|zsh|fish\n\n  bash: source <(rastro completion bash)\n  zsh:  source <(rastro completion zsh)\n  fish: rastro completion fish | source")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return fmt.Errorf("%w: give one shell: bash, zsh or fish", errUsage)
	}
	cmds := completionTable(ctx)
	switch fs.Arg(0) {
	case "bash":
		writeBashCompletion(env.Stdout, cmds, false)
	case "zsh":
		writeBashCompletion(env.Stdout, cmds, true)
	case "fish":
		writeFishCompletion(env.Stdout, cmds)
	default:
		return fmt.Errorf("%w: unknown shell %q: give bash, zsh or fish", errUsage, fs.Arg(0))
	}
	return nil
}

// completionCommand is one command's name, line and flags.
type completionCommand struct {
	name, short string
	flags       []string // without dashes
	words       []string // fixed positional words (llm: stats)
}

var helpFlagRE = regexp.MustCompile(`(?m)^\s+-([a-z][a-z0-9-]*)`)

// completionTable reads every command's flags from its own --help, so
// that the scripts follow the commands as they change.
func completionTable(ctx context.Context) []completionCommand {
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	var out []completionCommand
	for _, n := range names {
		var help bytes.Buffer
		env := &Env{Stdout: io.Discard, Stderr: &help, LookupEnv: func(string) (string, bool) { return "", false }}
		commands[n].Run(ctx, env, []string{"--help"})
		c := completionCommand{name: n, short: commands[n].Short}
		for _, m := range helpFlagRE.FindAllStringSubmatch(help.String(), -1) {
			c.flags = append(c.flags, m[1])
		}
		switch n {
		case "llm":
			c.words = []string{"stats"}
		case "completion":
			c.words = []string{"bash", "zsh", "fish"}
		}
		out = append(out, c)
	}
	return out
}

func writeBashCompletion(w io.Writer, cmds []completionCommand, zsh bool) {
	if zsh {
		fmt.Fprintln(w, "#compdef rastro\n# zsh runs the bash completion through bashcompinit.\nautoload -U +X bashcompinit && bashcompinit")
	}
	names := make([]string, len(cmds))
	for i, c := range cmds {
		names[i] = c.name
	}
	fmt.Fprintf(w, `# rastro completion (rastro completion bash)
_rastro() {
  local cur=${COMP_WORDS[COMP_CWORD]}
  if [ "$COMP_CWORD" -eq 1 ]; then
    COMPREPLY=($(compgen -W %q -- "$cur"))
    return
  fi
  local words=""
  case "${COMP_WORDS[1]}" in
`, strings.Join(names, " "))
	for _, c := range cmds {
		var ws []string
		for _, f := range c.flags {
			ws = append(ws, "--"+f)
		}
		ws = append(ws, c.words...)
		fmt.Fprintf(w, "    %s) words=%q ;;\n", c.name, strings.Join(ws, " "))
	}
	fmt.Fprint(w, `  esac
  COMPREPLY=($(compgen -W "$words" -- "$cur"))
}
complete -o default -F _rastro rastro
`)
}

func writeFishCompletion(w io.Writer, cmds []completionCommand) {
	fmt.Fprintln(w, "# rastro completion (rastro completion fish | source)\ncomplete -c rastro -f")
	for _, c := range cmds {
		fmt.Fprintf(w, "complete -c rastro -n __fish_use_subcommand -a %s -d %s\n", c.name, fishQuote(c.short))
		for _, f := range c.flags {
			fmt.Fprintf(w, "complete -c rastro -n '__fish_seen_subcommand_from %s' -l %s\n", c.name, f)
		}
		for _, wd := range c.words {
			fmt.Fprintf(w, "complete -c rastro -n '__fish_seen_subcommand_from %s' -a %s\n", c.name, wd)
		}
	}
}

func fishQuote(s string) string {
	return "'" + strings.ReplaceAll(strings.ReplaceAll(s, `\`, `\\`), "'", `\'`) + "'"
}
