package cli

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/tiered/tiered/fetchcache"
	"github.com/tiered/tiered/fetchcache/groupadmin"
	groupstore "github.com/tiered/tiered/fetchcache/groups"
	"github.com/tiered/tiered/fetchcache/httpapi"
)

// groupsNotes is the part of every `tiered groups` help, and of `tiered help groups`.
const groupsNotes = `Consumer groups are coordinated by the fetch service (tiered fetch, or tiered serve):
membership lives in the coordinator's memory, committed offsets in the bucket, one object
per group under groups/ (docs/format/groups.md). These commands read and change them:

  --fetch URL    through a fetch service's HTTP API (/v1/groups...). Describe, reset and
                 delete go to the group's coordinator: a replica of a fleet that is not it
                 answers NOT_COORDINATOR with the coordinator's address and the request is
                 repeated there. Members come from the coordinator's memory. $TIERED_TOKEN is
                 the bearer token: list and describe need read (describe also the group in
                 the principal's groups patterns), reset-offsets and delete need admin.
  --bucket URL   on the bucket directly, with no fetch service. Members are not known
                 there: a group whose coordinator last wrote it with members (state Stable)
                 is refused, as a group with members is. While a fetch service coordinates
                 the group, prefer --fetch: it changes the offsets the coordinator serves.

--topic T narrows every command to one topic: list shows the groups with a committed
offset on T (or, through --fetch, a live member assigned one of T's partitions), describe
shows T's partitions only, delete deletes only T's committed offsets.

reset-offsets is a dry run that prints the plan unless --execute is given, as Kafka's
kafka-consumer-groups.sh is, and is refused while the group has members (stop the
application first). Exactly one method:
  --to-datetime TIME   the first offset whose timestamp is >= TIME (RFC 3339 or epoch ms;
                       ListOffsets' rule); the log end where every record is older
  --to-earliest        the log start          --to-latest   the log end
  --to-offset N        offset N               --shift-by N  the committed offset + N
                                                            (the log start when none)
Every new offset is clamped into [log start, log end], as kafka-consumer-groups does.

--json prints the answer as one JSON document instead of a table.
`

var groupsListCmd = &command{
	name:    "groups list",
	summary: "list the consumer groups",
	help: `usage: tiered groups list (--fetch URL | --bucket URL) [--topic T] [--json]

Lists the consumer groups: state, members, partitions with a committed offset. With
--topic T, only the groups with a committed offset on T or a live member assigned one of
its partitions (members are known only through --fetch; Kafka does not keep the
subscriptions of a group without members), and PARTITIONS counts T's partitions.

` + groupsNotes,
	run: func(r *Runner, ctx context.Context, args []string) error { return runGroups(r, ctx, "list", args) },
}

var groupsDescribeCmd = &command{
	name:    "groups describe",
	summary: "a group's members, committed offsets and lag",
	help: `usage: tiered groups describe (--fetch URL | --bucket URL) --group G [--topic T] [--json]

Prints the group's state, members and assignment, and for each partition the committed
offset, the log end in the tier and the lag (log end - committed). With --topic T, only
T's partitions (the members are all shown, with their whole assignment).

` + groupsNotes,
	run: func(r *Runner, ctx context.Context, args []string) error { return runGroups(r, ctx, "describe", args) },
}

var groupsResetCmd = &command{
	name:    "groups reset-offsets",
	summary: "move a group's committed offsets (dry run unless --execute)",
	help: `usage: tiered groups reset-offsets (--fetch URL | --bucket URL) --group G --topic T
             (--to-datetime TIME | --to-earliest | --to-latest | --to-offset N | --shift-by N)
             [--execute] [--json]

Example (replay an application's input from 09:00 UTC):
  tiered groups reset-offsets --fetch http://fetch:8080 --group billing --topic orders \
      --to-datetime 2026-05-01T09:00:00Z --execute

` + groupsNotes,
	run: func(r *Runner, ctx context.Context, args []string) error {
		return runGroups(r, ctx, "reset-offsets", args)
	},
}

var groupsDeleteCmd = &command{
	name:    "groups delete",
	summary: "delete a group, or its committed offsets of one topic",
	help: `usage: tiered groups delete (--fetch URL | --bucket URL) --group G [--topic T] [--json]

Deletes the group's committed offsets (its object is written Dead, as Kafka's DeleteGroups
does). Refused while the group has members.

With --topic T, deletes only the group's committed offsets of T and keeps the group and
its other offsets, as kafka-consumer-groups --delete-offsets --topic T (Kafka's
OffsetDelete): refused (GROUP_SUBSCRIBED_TO_TOPIC) while a member of the group subscribes
to T; a group with no offset of T is not an error (nothing is deleted, as in Kafka); a
topic that is neither served nor in the group's offsets is UNKNOWN_TOPIC_OR_PARTITION.
Over --bucket, where subscriptions are not known, a group whose coordinator last wrote it
with members is refused, as reset-offsets is.

Example (forget billing's position in a topic it no longer reads):
  tiered groups delete --fetch http://fetch:8080 --group billing --topic old-orders

` + groupsNotes,
	run: func(r *Runner, ctx context.Context, args []string) error { return runGroups(r, ctx, "delete", args) },
}

// groupsBackend is where the group commands run: a fetch service or the bucket.
type groupsBackend interface {
	List(ctx context.Context, topic string) ([]groupadmin.Summary, error)
	Describe(ctx context.Context, group, topic string) (*groupadmin.Description, error)
	Reset(ctx context.Context, group string, spec groupadmin.ResetSpec) (*groupadmin.Plan, error)
	Delete(ctx context.Context, group string) error
	DeleteOffsets(ctx context.Context, group, topic string) (*groupadmin.OffsetsDeleted, error)
}

type fetchGroups struct{ c *httpapi.Client }

func (f fetchGroups) List(ctx context.Context, t string) ([]groupadmin.Summary, error) {
	return f.c.ListGroups(ctx, t)
}
func (f fetchGroups) Describe(ctx context.Context, g, t string) (*groupadmin.Description, error) {
	return f.c.DescribeGroup(ctx, g, t)
}
func (f fetchGroups) Reset(ctx context.Context, g string, s groupadmin.ResetSpec) (*groupadmin.Plan, error) {
	return f.c.ResetGroupOffsets(ctx, g, s)
}
func (f fetchGroups) Delete(ctx context.Context, g string) error { return f.c.DeleteGroup(ctx, g) }
func (f fetchGroups) DeleteOffsets(ctx context.Context, g, t string) (*groupadmin.OffsetsDeleted, error) {
	return f.c.DeleteGroupOffsets(ctx, g, t)
}

type bucketGroups struct{ a *groupadmin.Admin }

func (b bucketGroups) List(ctx context.Context, t string) ([]groupadmin.Summary, error) {
	return b.a.List(ctx, nil, t)
}
func (b bucketGroups) Describe(ctx context.Context, g, t string) (*groupadmin.Description, error) {
	return b.a.Describe(ctx, g, t)
}
func (b bucketGroups) Reset(ctx context.Context, g string, s groupadmin.ResetSpec) (*groupadmin.Plan, error) {
	return b.a.Reset(ctx, g, s)
}
func (b bucketGroups) Delete(ctx context.Context, g string) error { return b.a.Delete(ctx, g) }
func (b bucketGroups) DeleteOffsets(ctx context.Context, g, t string) (*groupadmin.OffsetsDeleted, error) {
	return b.a.DeleteOffsets(ctx, g, t)
}

// optInt64 is an int64 flag that records whether it was given.
type optInt64 struct{ v *int64 }

func (o *optInt64) String() string {
	if o.v == nil {
		return ""
	}
	return strconv.FormatInt(*o.v, 10)
}

func (o *optInt64) Set(s string) error {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return fmt.Errorf("%q is not an integer", s)
	}
	o.v = &n
	return nil
}

var _ flag.Value = (*optInt64)(nil)

func runGroups(r *Runner, ctx context.Context, sub string, args []string) error {
	fs := newFlags("groups " + sub)
	fetchURL := fs.String("fetch", "", "")
	bucketURL := fs.String("bucket", "", "")
	asJSON := fs.Bool("json", false, "")
	topic := fs.String("topic", "", "")
	var group, toDatetime *string
	var toEarliest, toLatest, execute *bool
	var toOffset, shiftBy optInt64
	if sub != "list" {
		group = fs.String("group", "", "")
	}
	if sub == "reset-offsets" {
		toDatetime = fs.String("to-datetime", "", "")
		toEarliest = fs.Bool("to-earliest", false, "")
		toLatest = fs.Bool("to-latest", false, "")
		fs.Var(&toOffset, "to-offset", "")
		fs.Var(&shiftBy, "shift-by", "")
		execute = fs.Bool("execute", false, "")
	}
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if err := noArgs(pos); err != nil {
		return err
	}
	set := setFlags(fs)
	switch n := btoi(set["fetch"]) + btoi(set["bucket"]); {
	case n == 0:
		return usagef("give --fetch URL (a fetch service) or --bucket URL")
	case n > 1:
		return usagef("give only one of --fetch and --bucket")
	}
	if group != nil && !set["group"] {
		return usagef("missing required flag --group")
	}
	if set["topic"] {
		if err := requireTopic(*topic); err != nil {
			return err
		}
	}
	var spec groupadmin.ResetSpec
	if sub == "reset-offsets" {
		if err := requireTopic(*topic); err != nil {
			return err
		}
		spec = groupadmin.ResetSpec{Topic: *topic, ToEarliest: *toEarliest, ToLatest: *toLatest, ToOffset: toOffset.v, ShiftBy: shiftBy.v, Execute: *execute}
		if set["to-datetime"] {
			ms, err := parseTime(*toDatetime)
			if err != nil {
				return usagef("--to-datetime %q is not an RFC 3339 time (e.g. 2024-05-01T12:00:00Z) or epoch milliseconds", *toDatetime)
			}
			tm := time.UnixMilli(ms).UTC()
			spec.ToDatetime = &tm
		}
		n := btoi(set["to-datetime"]) + btoi(*toEarliest) + btoi(*toLatest) + btoi(set["to-offset"]) + btoi(set["shift-by"])
		if n != 1 {
			return usagef("give exactly one of --to-datetime, --to-earliest, --to-latest, --to-offset, --shift-by")
		}
		if toOffset.v != nil && *toOffset.v < 0 {
			return usagef("--to-offset %d is negative", *toOffset.v)
		}
	}

	var be groupsBackend
	if set["fetch"] {
		hc := newHTTPClient()
		defer hc.CloseIdleConnections()
		c, err := httpapi.NewClient(*fetchURL, hc)
		if err != nil {
			return usagef("--fetch: %v", err)
		}
		be = fetchGroups{c}
	} else {
		write := sub == "reset-offsets" || sub == "delete"
		open := openReadBucket
		if write {
			open = openWriteBucket
		}
		b, err := open(ctx, *bucketURL)
		if err != nil {
			return err
		}
		defer b.Close()
		cat, err := fetchcache.NewRemoteCatalog(b, fetchcache.RemoteCatalogOptions{})
		if err != nil {
			return err
		}
		be = bucketGroups{&groupadmin.Admin{Store: groupstore.NewStore(b, groupstore.StoreOptions{ReadOnly: !write}), Catalog: cat, Now: r.now}}
	}

	switch sub {
	case "list":
		gs, err := be.List(ctx, *topic)
		if err != nil {
			return err
		}
		if *asJSON {
			return printJSON(r.Stdout, map[string]any{"groups": gs})
		}
		tw := tabwriter.NewWriter(r.Stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "GROUP\tSTATE\tPROTOCOL-TYPE\tMEMBERS\tPARTITIONS")
		for _, g := range gs {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\n", g.Group, g.State, dash(g.ProtocolType), g.Members, g.Partitions)
		}
		return tw.Flush()
	case "describe":
		d, err := be.Describe(ctx, *group, *topic)
		if err != nil {
			return groupErr(err)
		}
		if *asJSON {
			return printJSON(r.Stdout, d)
		}
		fmt.Fprintf(r.Stdout, "group %s: %s, generation %d, %d members (%s)\n", d.Group, d.State, d.Generation, len(d.Members), d.Source)
		tw := tabwriter.NewWriter(r.Stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "TOPIC\tPARTITION\tCURRENT-OFFSET\tLOG-START-OFFSET\tLOG-END-OFFSET\tLAG\tCONSUMER-ID")
		for _, o := range d.Offsets {
			fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\t%s\n", o.Topic, o.Partition, num(o.Committed), num(o.LogStart), num(o.LogEnd), num(o.Lag), dash(o.Member))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		if len(d.Members) > 0 {
			tw = tabwriter.NewWriter(r.Stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "\nCONSUMER-ID\tINSTANCE-ID\tCLIENT-ID\tHOST\tASSIGNMENT")
			for _, m := range d.Members {
				var as []string
				for _, t := range m.Assignment {
					for _, p := range t.Partitions {
						as = append(as, fmt.Sprintf("%s-%d", t.Topic, p))
					}
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", m.MemberID, dash(m.InstanceID), m.ClientID, m.ClientHost, dash(strings.Join(as, ",")))
			}
			return tw.Flush()
		}
		return nil
	case "reset-offsets":
		plan, err := be.Reset(ctx, *group, spec)
		if err != nil {
			return groupErr(err)
		}
		if *asJSON {
			return printJSON(r.Stdout, plan)
		}
		tw := tabwriter.NewWriter(r.Stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "GROUP\tTOPIC\tPARTITION\tCURRENT-OFFSET\tNEW-OFFSET")
		for _, o := range plan.Offsets {
			fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%d\n", plan.Group, o.Topic, o.Partition, num(o.Committed), *o.New)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		if !plan.Executed {
			fmt.Fprintln(r.Stderr, "dry run: nothing changed (add --execute to set these offsets)")
		}
		return nil
	default: // delete
		if *topic != "" {
			del, err := be.DeleteOffsets(ctx, *group, *topic)
			if err != nil {
				return groupErr(err)
			}
			if *asJSON {
				return printJSON(r.Stdout, del)
			}
			if len(del.Partitions) == 0 {
				fmt.Fprintf(r.Stdout, "group %s has no committed offsets of topic %s: nothing deleted\n", del.Group, del.Topic)
				return nil
			}
			ps := make([]string, len(del.Partitions))
			for i, p := range del.Partitions {
				ps[i] = strconv.Itoa(int(p))
			}
			fmt.Fprintf(r.Stdout, "deleted the committed offsets of topic %s from group %s (partitions %s)\n", del.Topic, del.Group, strings.Join(ps, ","))
			return nil
		}
		if err := be.Delete(ctx, *group); err != nil {
			return groupErr(err)
		}
		if *asJSON {
			return printJSON(r.Stdout, httpapi.GroupDeletedJSON{Group: *group, Deleted: true})
		}
		fmt.Fprintf(r.Stdout, "deleted group %s\n", *group)
		return nil
	}
}

// groupErr adds what to do to the refusals.
func groupErr(err error) error {
	switch {
	case errors.Is(err, groupadmin.ErrNotEmpty), httpapi.IsGroupCode(err, httpapi.CodeNonEmptyGroup):
		return fmt.Errorf("%w (stop the group's consumers, then run this again)", err)
	case errors.Is(err, groupadmin.ErrSubscribedToTopic), httpapi.IsGroupCode(err, httpapi.CodeGroupSubscribedToTopic):
		return fmt.Errorf("%w (stop the consumers subscribed to the topic, or change their subscription, then run this again)", err)
	case errors.Is(err, groupadmin.ErrGroupNotFound), httpapi.IsGroupCode(err, httpapi.CodeGroupIDNotFound):
		return fmt.Errorf("%w (list the groups with 'tiered groups list')", err)
	}
	return err
}

func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func num(n int64) string {
	if n < 0 {
		return "-"
	}
	return strconv.FormatInt(n, 10)
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
