package cli

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/tiered/tiered/localtier"
	"github.com/tiered/tiered/localtier/record"
)

// TestUsageErrors: every bad command line exits 2 with one line naming
// the problem and pointing at help, never a flag dump.
func TestUsageErrors(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"no_args", nil, "usage: tiered <command>"},
		{"unknown_command", []string{"frobnicate"}, `unknown command "frobnicate"`},
		{"serve_extra_arg", []string{"serve", "extra"}, `unexpected argument "extra"`},
		{"fetch_unknown_flag", []string{"fetch", "--kafka-log-dir", "x"}, "unknown flag --kafka-log-dir"},
		{"demo_extra_arg", []string{"demo", "now"}, `unexpected argument "now"`},
		{"topic_without_sub", []string{"topic"}, "missing subcommand"},
		{"topic_bad_sub", []string{"topic", "delete"}, `unknown subcommand "delete"`},
		{"inspect_bad_sub", []string{"inspect", "frobnicate"}, `unknown subcommand "frobnicate"`},
		{"unknown_flag", []string{"produce", "--topic", "t", "--bogus", "x"}, "unknown flag --bogus"},
		{"produce_server_and_data_dir", []string{"produce", "--topic", "t", "--server", "http://x"}, "--data-dir and --server cannot be used together"},
		{"topic_server_and_data_dir", []string{"topic", "describe", "--server", "http://x"}, "--data-dir and --server cannot be used together"},
		{"consume_bucket_and_data_dir", []string{"consume", "--bucket", "file:///x", "--topic", "t", "--partition", "0"}, "give only one of --data-dir, --bucket and --fetch"},
		{"consume_fetch_and_data_dir", []string{"consume", "--fetch", "http://x", "--topic", "t", "--partition", "0"}, "give only one of --data-dir, --bucket and --fetch"},
		{"flag_needs_value", []string{"produce", "--topic"}, "flag --topic needs a value"},
		{"bad_int", []string{"consume", "--topic", "t", "--partition", "zero"}, `invalid value "zero" for --partition: not a valid number`},
		{"produce_no_topic", []string{"produce"}, "missing required flag --topic"},
		{"produce_negative_partition", []string{"produce", "--topic", "t", "--partition", "-2"}, "--partition -2 is out of range"},
		{"produce_extra_arg", []string{"produce", "--topic", "t", "extra"}, `unexpected argument "extra"`},
		{"consume_no_partition", []string{"consume", "--topic", "t"}, "missing required flag --partition"},
		{"consume_both_starts", []string{"consume", "--topic", "t", "--partition", "0", "--from-offset", "1", "--from-time", "2024-01-01T00:00:00Z"}, "cannot be used together"},
		{"consume_bad_time", []string{"consume", "--topic", "t", "--partition", "0", "--from-time", "yesterday"}, "not an RFC 3339 time"},
		{"consume_zero_max", []string{"consume", "--topic", "t", "--partition", "0", "--max-records", "0"}, "--max-records must be at least 1"},
		{"consume_negative_offset", []string{"consume", "--topic", "t", "--partition", "0", "--from-offset", "-1"}, "--from-offset -1 is negative"},
		{"create_no_topic", []string{"topic", "create"}, "missing required flag --topic"},
		{"create_zero_partitions", []string{"topic", "create", "--topic", "t", "--partitions", "0"}, "--partitions 0 is out of range"},
		{"create_bad_config", []string{"topic", "create", "--topic", "t", "--config", "retention.ms"}, `invalid --config "retention.ms": want name=value`},
		{"create_dup_config", []string{"topic", "create", "--topic", "t", "--config", "a=1", "--config", "a=2"}, "given more than once"},
		{"alter_nothing", []string{"topic", "alter", "--topic", "t"}, "nothing to alter"},
		{"alter_partitions", []string{"topic", "alter", "--topic", "t", "--partitions", "3"}, "--partitions cannot be changed"},
		{"inspect_no_file", []string{"inspect", "segment"}, "missing FILE argument"},
		{"inspect_two_files", []string{"inspect", "segment", "a", "b"}, `unexpected argument "b"`},
		{"inspect_index_bad_name", []string{"inspect", "index", "foo.idx"}, "cannot tell the index type"},
		{"help_unknown", []string{"help", "nope"}, `unknown command "nope"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := tt.args
			// Keep stray data dirs out of the working directory.
			if len(args) > 1 && (args[0] == "produce" || args[0] == "consume") {
				args = append([]string{args[0], "--data-dir", t.TempDir()}, args[1:]...)
			}
			if len(args) > 1 && args[0] == "topic" {
				args = append([]string{args[0], args[1], "--data-dir", t.TempDir()}, args[2:]...)
			}
			res := run(t, "", args...)
			if res.code != ExitUsage {
				t.Fatalf("exit %d, want 2; stderr %q", res.code, res.stderr)
			}
			if len(lines(res.stderr)) != 1 || !strings.Contains(res.stderr, tt.want) {
				t.Fatalf("stderr %q: want one line containing %q", res.stderr, tt.want)
			}
			if res.stdout != "" {
				t.Fatalf("stdout %q, want nothing", res.stdout)
			}
		})
	}
}

func TestHelpAndVersion(t *testing.T) {
	res := mustRun(t, "", "help")
	for _, c := range []string{"topic create", "produce", "consume", "inspect segment", "inspect index", "version"} {
		if !strings.Contains(res.stdout, c) {
			t.Errorf("help does not list %q", c)
		}
	}
	for _, args := range [][]string{{"help", "produce"}, {"produce", "--help"}, {"produce", "-h"}, {"help", "topic", "create"}, {"topic", "--help"}, {"help", "inspect"}} {
		res := mustRun(t, "", args...)
		if !strings.Contains(res.stdout, "usage: tiered") {
			t.Errorf("%v: stdout %q has no usage", args, res.stdout)
		}
	}
	if res := mustRun(t, "", "help", "produce"); !strings.Contains(res.stdout, "nothing is appended") || !strings.Contains(res.stdout, "round-robin") {
		t.Errorf("produce help does not explain validation and keyless partitioning")
	}
	if res := mustRun(t, "", "help", "consume"); !strings.Contains(res.stdout, "READ_UNCOMMITTED") {
		t.Errorf("consume help does not say how aborted transactions are read")
	}
	if res := mustRun(t, "", "version"); !strings.HasPrefix(res.stdout, "tiered ") {
		t.Errorf("version printed %q", res.stdout)
	}
}

func TestOneLineErrors(t *testing.T) {
	if got := oneLine("a\nb\n"); got != "a; b" {
		t.Fatalf("oneLine = %q", got)
	}
}

// TestErrorHints: each Kafka error a command ends in gets its hint after the
// message, wrapped or not, and other errors none.
func TestErrorHints(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want string
	}{
		{fmt.Errorf("consume: %w", &localtier.UnknownTopicOrPartitionError{Topic: "t", Partition: 1}), "tiered topic describe"},
		{&localtier.OffsetOutOfRangeError{Offset: 9, LogStartOffset: 0, LogEndOffset: 3}, "omit --from-offset"},
		{fmt.Errorf("read: %w", &record.CorruptError{File: "x.log", Pos: 7, Reason: "crc"}), "tiered bucket verify"},
		{&localtier.TopicExistsError{Topic: "t"}, "tiered topic alter"},
		{errors.New("disk full"), ""},
	} {
		got := errorHint("consume", tc.err)
		if tc.want == "" && got != "" || !strings.Contains(got, tc.want) {
			t.Errorf("errorHint(%v) = %q, want one naming %q", tc.err, got, tc.want)
		}
	}
	if got := errorHint("inspect segment", &record.CorruptError{File: "x.log"}); got != "" {
		t.Errorf("inspect segment on a corrupt file is told to run itself: %q", got)
	}
}

// TestFlagValueErrorsSayWhatIsExpected: a malformed duration or boolean
// flag value is refused naming the flag, the value and what it wants, never
// "not a valid number" (a duration needs a unit: 3600 is refused too) nor
// the flag package's raw "-follow: parse error".
func TestFlagValueErrorsSayWhatIsExpected(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"duration", []string{"retention", "--data-dir", dir, "--gc-grace", "10mins"}, `invalid value "10mins" for --gc-grace: not a duration (want e.g. 30m, 1h, 90s)`},
		{"duration_no_unit", []string{"retention", "--data-dir", dir, "--gc-grace", "3600"}, `invalid value "3600" for --gc-grace: not a duration`},
		{"bool", []string{"consume", "--data-dir", dir, "--topic", "t", "--partition", "0", "--follow=yes"}, `invalid value "yes" for --follow: not true or false`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := run(t, "", tt.args...)
			if res.code != ExitUsage || len(lines(res.stderr)) != 1 || !strings.Contains(res.stderr, tt.want) {
				t.Fatalf("exit %d stderr %q: want 2 and one line containing %q", res.code, res.stderr, tt.want)
			}
		})
	}
}
