package objstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"path"
	"slices"
	"strconv"
	"strings"
)

// Location is a parsed bucket URL.
type Location struct {
	Scheme string // "file", "mem" or "s3"
	Dir    string // file: the directory
	Name   string // mem: the registry name
	Prefix string // mem, s3: key prefix without surrounding '/'
	S3     S3Config
}

const urlForms = "file:///dir, mem://name[/prefix] or s3://bucket[/prefix]?endpoint=...&region=...&path_style=true"

var s3Params = []string{"endpoint", "region", "path_style", "part_size", "part_concurrency"}

// ParseURL parses a bucket URL without touching the network. Every problem
// is reported, on one line.
func ParseURL(raw string) (Location, error) {
	shown := raw
	if strings.Contains(raw, "@") || strings.Contains(strings.ToLower(raw), "%40") {
		// May hold credentials (the endpoint parameter's '@' comes
		// query-encoded as %40); never echo it.
		shown = "(redacted)"
	}
	fail := func(problems ...string) (Location, error) {
		return Location{}, fmt.Errorf("bucket URL %s: %s", shown, strings.Join(problems, "; "))
	}
	if strings.TrimSpace(raw) == "" {
		return fail("empty (want " + urlForms + ")")
	}
	u, err := url.Parse(raw)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return fail("malformed: " + err.Error())
	}
	if u.User != nil {
		return fail("credentials in the URL are not accepted (use the AWS credential chain)")
	}
	if u.Fragment != "" {
		return fail("fragment not allowed")
	}
	if u.Opaque != "" {
		return fail("malformed (want " + urlForms + ")")
	}
	var problems []string
	loc := Location{Scheme: u.Scheme}
	switch u.Scheme {
	case "file":
		if u.Host != "" && u.Host != "localhost" {
			problems = append(problems, fmt.Sprintf("file URL has host %q; write file:///absolute/dir", u.Host))
		}
		if u.Path == "" || !path.IsAbs(u.Path) {
			problems = append(problems, "file URL needs an absolute directory (file:///dir)")
		}
		if u.RawQuery != "" {
			problems = append(problems, "file URL takes no query parameters")
		}
		loc.Dir = u.Path
	case "mem":
		if u.Host == "" {
			problems = append(problems, "mem URL needs a name (mem://name)")
		}
		if u.RawQuery != "" {
			problems = append(problems, "mem URL takes no query parameters")
		}
		loc.Name = u.Host
		loc.Prefix = strings.Trim(u.Path, "/")
	case "s3":
		loc.Prefix = strings.Trim(u.Path, "/")
		loc.S3.Bucket = u.Hostname()
		if loc.S3.Bucket == "" {
			problems = append(problems, "missing bucket name (s3://bucket/prefix)")
		}
		if strings.Contains(u.Host, ":") {
			problems = append(problems, "the bucket name cannot have a port; put the endpoint in ?endpoint=")
		}
		q, err := url.ParseQuery(u.RawQuery)
		if err != nil {
			problems = append(problems, "malformed query: "+err.Error())
		}
		for k, vs := range q {
			if !slices.Contains(s3Params, k) {
				problems = append(problems, fmt.Sprintf("unknown parameter %q (known: %s)", k, strings.Join(s3Params, ", ")))
				continue
			}
			if len(vs) != 1 {
				problems = append(problems, fmt.Sprintf("parameter %q given %d times", k, len(vs)))
			}
		}
		if ep := q.Get("endpoint"); ep != "" {
			eu, err := url.Parse(ep)
			if err != nil || (eu.Scheme != "http" && eu.Scheme != "https") || eu.Host == "" {
				problems = append(problems, fmt.Sprintf("endpoint %q is not an http(s)://host[:port] URL", ep))
			} else if eu.User != nil {
				problems = append(problems, "credentials in the endpoint are not accepted")
			}
			loc.S3.Endpoint = ep
		}
		loc.S3.Region = q.Get("region")
		if v := q.Get("path_style"); v != "" {
			b, err := strconv.ParseBool(v)
			if err != nil {
				problems = append(problems, fmt.Sprintf("path_style=%q is not a boolean", v))
			}
			loc.S3.PathStyle = b
		}
		if v := q.Get("part_size"); v != "" {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil || n < MinPartSize {
				problems = append(problems, fmt.Sprintf("part_size=%q must be an integer of at least %d bytes", v, MinPartSize))
			}
			loc.S3.PartSize = n
		}
		if v := q.Get("part_concurrency"); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 || n > 64 {
				problems = append(problems, fmt.Sprintf("part_concurrency=%q must be an integer from 1 to 64", v))
			}
			loc.S3.PartConcurrency = n
		}
	case "":
		problems = append(problems, "missing scheme (want "+urlForms+")")
	default:
		problems = append(problems, fmt.Sprintf("unknown scheme %q (want %s)", u.Scheme, urlForms))
	}
	if loc.Prefix != "" {
		if err := validateKey(loc.Prefix); err != nil {
			problems = append(problems, "bad prefix: "+err.Error())
		}
	}
	if len(problems) > 0 {
		slices.Sort(problems) // map iteration made the order random
		return fail(problems...)
	}
	return loc, nil
}

// Open parses a bucket URL and opens the bucket. S3 buckets are checked
// (credentials, reachability, existence) within S3Config.OpenTimeout; a
// file:// directory must exist.
func Open(ctx context.Context, raw string) (Bucket, error) {
	loc, err := ParseURL(raw)
	if err != nil {
		return nil, err
	}
	return loc.Open(ctx)
}

// OpenReadOnly is Open for a process that only reads the bucket (fetch,
// consume --bucket, bucket verify, inspect manifest, replay): Put and Delete
// fail with ErrReadOnly before anything is sent, and a file:// bucket is
// opened with NewFilesystemReadOnly, so read permission is all it needs (no
// lock file, no temporary directory, no clean-up).
func OpenReadOnly(ctx context.Context, raw string) (Bucket, error) {
	loc, err := ParseURL(raw)
	if err != nil {
		return nil, err
	}
	return loc.OpenReadOnly(ctx)
}

// Open opens the bucket the location names for reading and writing.
func (loc Location) Open(ctx context.Context) (Bucket, error) { return loc.open(ctx, false) }

// OpenReadOnly opens the bucket the location names for reading only (see
// the package function OpenReadOnly).
func (loc Location) OpenReadOnly(ctx context.Context) (Bucket, error) { return loc.open(ctx, true) }

func (loc Location) open(ctx context.Context, readOnly bool) (Bucket, error) {
	var b Bucket
	switch loc.Scheme {
	case "file":
		open := NewFilesystem
		if readOnly {
			open = NewFilesystemReadOnly
		}
		fb, err := open(loc.Dir)
		if err != nil {
			return nil, err
		}
		return fb, nil
	case "mem":
		b = OpenMemory(loc.Name)
	case "s3":
		sb, err := NewS3(ctx, loc.S3)
		if err != nil {
			return nil, err
		}
		b = sb
	default:
		return nil, fmt.Errorf("open bucket: unknown scheme %q", loc.Scheme)
	}
	if readOnly {
		b = readOnlyBucket{b}
	}
	pb, err := WithPrefix(b, loc.Prefix)
	if err != nil {
		return nil, errors.Join(err, b.Close())
	}
	return pb, nil
}

// readOnlyBucket refuses the writes of a bucket opened read-only.
type readOnlyBucket struct{ Bucket }

func (readOnlyBucket) Put(_ context.Context, key string, _ io.Reader, _ int64, _ Condition) (Attrs, error) {
	return Attrs{}, &opError{op: "put", key: key, kind: ErrReadOnly}
}

func (readOnlyBucket) Delete(_ context.Context, key string) error {
	return &opError{op: "delete", key: key, kind: ErrReadOnly}
}
