// Package cli implements tiered's command line: flag parsing, help text,
// exit codes and the commands built on the local tier (topic, produce,
// consume, inspect). cmd/tiered only turns os.Args and signals into a call
// of Run, so tests drive every command in-process.
//
// Exit codes: 0 ok, 1 runtime or data error (unknown topic, corrupt
// segment, refused config), 2 usage error (unknown command or flag, missing
// or malformed flag value). Every failure is one line on stderr.
package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"runtime"
	"runtime/debug"
	"strings"
	"time"

	"github.com/tiered/tiered/fetchcache/httpapi"
	"github.com/tiered/tiered/internal/app/config"
	"github.com/tiered/tiered/internal/x/kafkaerr"
)

// Exit codes.
const (
	ExitOK    = 0
	ExitError = 1
	ExitUsage = 2
)

// Version is the release version, set at link time with
// -ldflags "-X github.com/tiered/tiered/internal/app/cli.Version=v1.2.3".
var Version = ""

// DefaultDataDir is the data directory when --data-dir is not given: the
// configuration's data_dir default.
const DefaultDataDir = config.DefaultDataDir

// Runner holds what commands read and write. The zero value of each
// optional field picks the default.
type Runner struct {
	Stdin  io.Reader
	Stdout io.Writer
	Stderr io.Writer
	// Now is the clock (default time.Now): missing produce timestamps and
	// log append times.
	Now func() time.Time
	// PollInterval is how often consume --follow looks for new records
	// (default 500ms).
	PollInterval time.Duration
	// LockWait is how long a command waits for another process to release
	// the data dir before giving up (default 2s).
	LockWait time.Duration
	// MemoryLimit makes serve and fetch set the process's soft memory limit
	// from their budgets (daemon.ApplyMemoryLimit). Run, the binary's entry,
	// sets it; tests running daemons in their own process leave it off.
	MemoryLimit bool
}

// Run runs the command line args (without the program name) and returns
// the exit code. Cancelling ctx (SIGINT/SIGTERM in main) ends consume
// --follow with exit 0.
func Run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	r := &Runner{Stdin: stdin, Stdout: stdout, Stderr: stderr, MemoryLimit: true}
	return r.Run(ctx, args)
}

// usageError is a bad command line: exit 2.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error {
	return &usageError{msg: fmt.Sprintf(format, args...)}
}

// errHelp asks for the command's help on stdout and exit 0.
var errHelp = errors.New("help requested")

type command struct {
	name    string // "produce", "topic create"
	summary string
	help    string // synopsis, flags and notes
	run     func(r *Runner, ctx context.Context, args []string) error
}

// allCommands is set in init: help refers to the list, and the list to help.
var allCommands []*command

func init() {
	allCommands = []*command{
		topicCreateCmd, topicAlterCmd, topicDescribeCmd,
		produceCmd, consumeCmd, compactCmd, retentionCmd,
		inspectSegmentCmd, inspectIndexCmd, inspectManifestCmd,
		bucketVerifyCmd, bucketDeleteRecordsCmd,
		replayCmd,
		uploadCmd, sidecarCmd, sidecarPlanCmd,
		serveCmd, fetchCmd, demoCmd,
		configPrintCmd,
		groupsListCmd, groupsDescribeCmd, groupsResetCmd, groupsDeleteCmd,
		versionCmd, helpCmd,
	}
}

func commands() []*command { return allCommands }

// groups are words that need a subcommand.
var groups = map[string]string{
	"topic":   "create|alter|describe",
	"inspect": "segment|index|manifest",
	"bucket":  "verify|delete-records",
	"config":  "print",
	"groups":  "list|describe|reset-offsets|delete",
}

// groupNotes are printed after a group's subcommands by 'tiered help <group>'.
var groupNotes = map[string]string{"groups": groupsNotes}

func findCommand(name string) *command {
	for _, c := range commands() {
		if c.name == name {
			return c
		}
	}
	return nil
}

// Run runs args; see the package function Run.
func (r *Runner) Run(ctx context.Context, args []string) int {
	if r.Stdin == nil {
		r.Stdin = strings.NewReader("")
	}
	if r.Stdout == nil {
		r.Stdout = io.Discard
	}
	if r.Stderr == nil {
		r.Stderr = io.Discard
	}
	if len(args) == 0 {
		fmt.Fprintln(r.Stderr, "usage: tiered <command> [flags] (run 'tiered help' for the list of commands)")
		return ExitUsage
	}
	name := args[0]
	rest := args[1:]
	switch name {
	case "-h", "-help", "--help":
		name, rest = "help", nil
	case "-version", "--version":
		name = "version"
	}
	if sub, ok := groups[name]; ok {
		if len(rest) == 0 || strings.HasPrefix(rest[0], "-") {
			if len(rest) > 0 && isHelpFlag(rest[0]) {
				fmt.Fprint(r.Stdout, groupHelp(name))
				return ExitOK
			}
			fmt.Fprintf(r.Stderr, "tiered %s: missing subcommand: usage: tiered %s %s ... (run 'tiered help %s')\n", name, name, sub, name)
			return ExitUsage
		}
		if findCommand(name+" "+rest[0]) == nil {
			fmt.Fprintf(r.Stderr, "tiered %s: unknown subcommand %q: usage: tiered %s %s ... (run 'tiered help %s')\n", name, rest[0], name, sub, name)
			return ExitUsage
		}
		name, rest = name+" "+rest[0], rest[1:]
	}
	if len(rest) > 0 && !strings.HasPrefix(rest[0], "-") && findCommand(name+" "+rest[0]) != nil {
		name, rest = name+" "+rest[0], rest[1:] // a command with subcommands of its own: sidecar plan
	}
	cmd := findCommand(name)
	if cmd == nil {
		fmt.Fprintf(r.Stderr, "tiered: unknown command %q (run 'tiered help' for the list of commands)\n", name)
		return ExitUsage
	}
	err := cmd.run(r, ctx, rest)
	var ue *usageError
	switch {
	case err == nil:
		return ExitOK
	case errors.Is(err, errHelp):
		fmt.Fprint(r.Stdout, cmd.help)
		return ExitOK
	case errors.As(err, &ue):
		fmt.Fprintf(r.Stderr, "tiered %s: %s (run 'tiered help %s')\n", cmd.name, oneLine(ue.msg), cmd.name)
		return ExitUsage
	default:
		fmt.Fprintf(r.Stderr, "tiered %s: %s%s\n", cmd.name, oneLine(err.Error()), errorHint(cmd.name, err))
		return ExitError
	}
}

// errorHints is the CLI's answer to each Kafka error, in the order they are
// tried: every one exits ExitError, with what to do next after the message.
var errorHints = []struct {
	err  error
	hint string
}{
	{kafkaerr.ErrUnknownTopicOrPartition, "list topics with 'tiered topic describe' or GET /v1/topics"},
	{kafkaerr.ErrOffsetOutOfRange, "read from the log start (omit --from-offset) or check the range with 'tiered inspect manifest'"},
	{kafkaerr.ErrCorrupt, "stored data failed its checks: see 'tiered inspect segment FILE' or 'tiered bucket verify'"},
	{kafkaerr.ErrTopicAlreadyExists, "change its configs with 'tiered topic alter'"},
	{kafkaerr.ErrInvalidConfig, "topic configs use Kafka's names and ranges; 'tiered topic describe' lists them"},
	{kafkaerr.ErrInvalidTimestamp, "omit \"timestamp\" to stamp records now, or widen message.timestamp.before.max.ms / message.timestamp.after.max.ms with 'tiered topic alter'"},
}

// errorHint is the hint of the Kafka error err matches (errorHints), in
// parentheses, or "" when it matches none or the hint names the command
// that failed (inspect segment on a corrupt file).
func errorHint(command string, err error) string {
	if ae := (*httpapi.APIError)(nil); errors.As(err, &ae) && ae.Status == http.StatusUnauthorized {
		return " (" + tokenHint + ")"
	}
	for _, e := range errorHints {
		if errors.Is(err, e.err) {
			if strings.Contains(e.hint, "'tiered "+command) {
				return ""
			}
			return " (" + e.hint + ")"
		}
	}
	return ""
}

func isHelpFlag(s string) bool {
	return s == "-h" || s == "-help" || s == "--help"
}

// oneLine joins a multi-line message (errors.Join) into one line.
func oneLine(s string) string {
	s = strings.TrimSpace(s)
	return strings.ReplaceAll(s, "\n", "; ")
}

func (r *Runner) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

// newFlags returns a FlagSet that reports nothing itself.
func newFlags(name string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	return fs
}

// parseFlags parses args, allowing flags after positional arguments
// ("inspect segment FILE --json"); "--" ends flag parsing. It returns the
// positional arguments.
func parseFlags(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, errHelp
			}
			return nil, &usageError{msg: flagErrText(fs, err)}
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return pos, nil
		}
		if consumed := len(args) - len(rest); consumed > 0 && args[consumed-1] == "--" {
			return append(pos, rest...), nil
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}

// flagErrText rewrites the flag package's messages with --names, saying
// what a malformed value of fs's flag should look like.
func flagErrText(fs *flag.FlagSet, err error) string {
	msg := err.Error()
	if name, ok := strings.CutPrefix(msg, "flag provided but not defined: "); ok {
		return "unknown flag " + dashes(name)
	}
	if name, ok := strings.CutPrefix(msg, "flag needs an argument: "); ok {
		return "flag " + dashes(name) + " needs a value"
	}
	// invalid value "x" for flag -n: parse error
	// invalid boolean value "x" for -n: parse error
	rest, ok := strings.CutPrefix(msg, "invalid value ")
	if !ok {
		rest, ok = strings.CutPrefix(msg, "invalid boolean value ")
	}
	if !ok {
		return msg
	}
	i := strings.Index(rest, " for ")
	if i < 0 {
		return msg
	}
	value, tail := rest[:i], strings.TrimPrefix(rest[i+len(" for "):], "flag ")
	k := strings.Index(tail, ":")
	if k < 0 {
		return msg
	}
	name, reason := strings.TrimLeft(tail[:k], "-"), strings.TrimSpace(tail[k+1:])
	var kind any
	if f := fs.Lookup(name); f != nil {
		if g, ok := f.Value.(flag.Getter); ok {
			kind = g.Get()
		}
	}
	switch kind.(type) {
	case time.Duration:
		reason = "not a duration (want e.g. 30m, 1h, 90s)"
	case bool:
		reason = "not true or false"
	default:
		switch {
		case strings.Contains(reason, "parse error"), strings.Contains(reason, "invalid syntax"):
			reason = "not a valid number"
		case strings.Contains(reason, "out of range"):
			reason = "out of range"
		}
	}
	return "invalid value " + value + " for " + dashes(name) + ": " + reason
}

func dashes(name string) string {
	return "--" + strings.TrimLeft(name, "-")
}

// setFlags returns the names of the flags given on the command line.
func setFlags(fs *flag.FlagSet) map[string]bool {
	m := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { m[f.Name] = true })
	return m
}

// noArgs refuses positional arguments.
// parseNoArgs parses the flags of a command that takes no positional
// arguments.
func parseNoArgs(fs *flag.FlagSet, args []string) error {
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	return noArgs(pos)
}

func noArgs(pos []string) error {
	if len(pos) > 0 {
		return usagef("unexpected argument %q", pos[0])
	}
	return nil
}

// stringList is a repeatable string flag.
type stringList []string

func (s *stringList) String() string     { return strings.Join(*s, ",") }
func (s *stringList) Set(v string) error { *s = append(*s, v); return nil }

var versionCmd = &command{
	name:    "version",
	summary: "print the version",
	help: `usage: tiered version

Prints the version of tiered and of the Go toolchain that built it.
`,
	run: func(r *Runner, _ context.Context, args []string) error {
		pos, err := parseFlags(newFlags("version"), args)
		if err != nil {
			return err
		}
		if err := noArgs(pos); err != nil {
			return err
		}
		fmt.Fprintf(r.Stdout, "tiered %s (%s %s/%s)\n", versionString(), runtime.Version(), runtime.GOOS, runtime.GOARCH)
		return nil
	},
}

func versionString() string {
	if Version != "" {
		return Version
	}
	v := "devel"
	if bi, ok := debug.ReadBuildInfo(); ok {
		if bi.Main.Version != "" && bi.Main.Version != "(devel)" {
			v = bi.Main.Version
		}
		var rev, dirty string
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value
			case "vcs.modified":
				if s.Value == "true" {
					dirty = "-dirty"
				}
			}
		}
		if rev != "" {
			if len(rev) > 12 {
				rev = rev[:12]
			}
			v += " " + rev + dirty
		}
	}
	return v
}

var helpCmd = &command{
	name:    "help",
	summary: "show help for tiered or one command",
	help: `usage: tiered help [command]

Without a command, lists the commands; with one ("tiered help produce",
"tiered help topic create"), shows its flags and behaviour.
`,
	run: func(r *Runner, _ context.Context, args []string) error {
		pos, err := parseFlags(newFlags("help"), args)
		if err != nil {
			return err
		}
		if len(pos) == 0 {
			fmt.Fprint(r.Stdout, overview())
			return nil
		}
		name := strings.Join(pos, " ")
		if c := findCommand(name); c != nil {
			fmt.Fprint(r.Stdout, c.help)
			return nil
		}
		if _, ok := groups[name]; ok {
			fmt.Fprint(r.Stdout, groupHelp(name))
			return nil
		}
		return usagef("unknown command %q", name)
	},
}

func overview() string {
	var b strings.Builder
	b.WriteString(`tiered: Kafka-format partition logs on local disk, with a cheap second tier in object storage.

usage: tiered <command> [flags]

Commands:
`)
	for _, c := range commands() {
		fmt.Fprintf(&b, "  %-18s %s\n", c.name, c.summary)
	}
	b.WriteString(`
Flags may come before or after arguments. Exit status: 0 ok, 1 error, 2 usage error.
Run 'tiered help <command>' for a command's flags.
`)
	return b.String()
}

func groupHelp(group string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "usage: tiered %s %s [flags]\n\n", group, groups[group])
	for _, c := range commands() {
		if strings.HasPrefix(c.name, group+" ") {
			fmt.Fprintf(&b, "  %-18s %s\n", c.name, c.summary)
		}
	}
	if notes, ok := groupNotes[group]; ok {
		b.WriteString("\n" + notes)
	}
	fmt.Fprintf(&b, "\nRun 'tiered help %s <subcommand>' for its flags.\n", group)
	return b.String()
}
