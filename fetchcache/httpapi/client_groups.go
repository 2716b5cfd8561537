package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/tiered/tiered/fetchcache/groupadmin"
)

// NotCoordinatorError is a group route's 421 NOT_COORDINATOR answer that the client could
// not follow (the coordinator's HTTP URL is unknown or of another scheme, or it answered
// 421 too).
type NotCoordinatorError struct {
	Group, Coordinator, CoordinatorHTTP string
	// Refused says why the client did not follow CoordinatorHTTP ("" when it did).
	Refused string
}

func (e *NotCoordinatorError) Error() string {
	if e.Refused != "" {
		return fmt.Sprintf("group %q is coordinated by the fetch replica at %s (%s), not followed: %s; run the command against that replica's --fetch URL", e.Group, e.Coordinator, e.CoordinatorHTTP, e.Refused)
	}
	if e.CoordinatorHTTP == "" {
		return fmt.Sprintf("group %q is coordinated by the fetch replica at %s, whose HTTP address is unknown: run the command against that replica's --fetch URL", e.Group, e.Coordinator)
	}
	return fmt.Sprintf("group %q is coordinated by the fetch replica at %s (%s), which named another coordinator: the fleet is changing, retry", e.Group, e.Coordinator, e.CoordinatorHTTP)
}

// ListGroups is GET /v1/groups; with a topic ("" = all), only the groups of that topic.
func (c *Client) ListGroups(ctx context.Context, topic string) ([]groupadmin.Summary, error) {
	var out GroupListJSON
	if err := c.groupCall(ctx, http.MethodGet, "", topicQuery(topic), nil, &out); err != nil {
		return nil, err
	}
	return out.Groups, nil
}

// DescribeGroup is GET /v1/groups/{group}, asked of the group's coordinator; with a topic
// ("" = all), only that topic's partitions.
func (c *Client) DescribeGroup(ctx context.Context, group, topic string) (*groupadmin.Description, error) {
	var out groupadmin.Description
	if err := c.groupCall(ctx, http.MethodGet, group, topicQuery(topic), nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// ResetGroupOffsets is POST /v1/groups/{group}/reset-offsets, asked of the coordinator.
func (c *Client) ResetGroupOffsets(ctx context.Context, group string, spec groupadmin.ResetSpec) (*groupadmin.Plan, error) {
	body, err := json.Marshal(spec)
	if err != nil {
		return nil, err
	}
	var out groupadmin.Plan
	if err := c.groupCall(ctx, http.MethodPost, group, "/reset-offsets", body, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// DeleteGroup is DELETE /v1/groups/{group}, asked of the coordinator.
func (c *Client) DeleteGroup(ctx context.Context, group string) error {
	var out GroupDeletedJSON
	return c.groupCall(ctx, http.MethodDelete, group, "", nil, &out)
}

// DeleteGroupOffsets is DELETE /v1/groups/{group}?topic=T, asked of the coordinator: only
// the group's committed offsets of topic.
func (c *Client) DeleteGroupOffsets(ctx context.Context, group, topic string) (*groupadmin.OffsetsDeleted, error) {
	var out groupadmin.OffsetsDeleted
	if err := c.groupCall(ctx, http.MethodDelete, group, topicQuery(topic), nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// topicQuery is the ?topic= suffix of a group route ("" for no topic).
func topicQuery(topic string) string {
	if topic == "" {
		return ""
	}
	return "?" + url.Values{"topic": {topic}}.Encode()
}

// groupCall sends one group request and decodes the answer into v. A 421
// NOT_COORDINATOR answer is followed once, to the coordinator's HTTP URL.
func (c *Client) groupCall(ctx context.Context, method, group, suffix string, body []byte, v any) error {
	base := c.base
	for hop := 0; ; hop++ {
		s := strings.TrimSuffix(base.String(), "/") + "/v1/groups"
		if group != "" {
			s += "/" + url.PathEscape(group)
		}
		s += suffix
		req, err := http.NewRequestWithContext(ctx, method, s, bytes.NewReader(body))
		if err != nil {
			return err
		}
		req.Header.Set("Accept", "application/json")
		if body != nil {
			req.Header.Set("Content-Type", "application/json")
		}
		resp, err := c.hc.Do(req)
		if err != nil {
			return fmt.Errorf("fetch service %s: %w", base.Redacted(), err)
		}
		switch {
		case resp.StatusCode == http.StatusOK:
			defer resp.Body.Close()
			if err := json.NewDecoder(io.LimitReader(resp.Body, maxSmallBody)).Decode(v); err != nil {
				return fmt.Errorf("decode answer of %s %s: %w", method, s, err)
			}
			return nil
		case resp.StatusCode == http.StatusMisdirectedRequest:
			data, _ := io.ReadAll(io.LimitReader(resp.Body, maxSmallBody))
			resp.Body.Close()
			var nc NotCoordinatorBody
			if err := json.Unmarshal(data, &nc); err != nil || nc.Code != CodeNotCoordinator {
				return &APIError{Status: resp.StatusCode, Message: string(data)}
			}
			next, err := url.Parse(nc.CoordinatorHTTP)
			if hop > 0 || nc.CoordinatorHTTP == "" || err != nil || next.Host == "" {
				return &NotCoordinatorError{Group: group, Coordinator: nc.Coordinator, CoordinatorHTTP: nc.CoordinatorHTTP}
			}
			if next.Scheme != c.base.Scheme {
				// The URL comes from a lease in the bucket; the client's
				// credentials go only where its --fetch URL's scheme
				// would take them (never https to http).
				return &NotCoordinatorError{Group: group, Coordinator: nc.Coordinator, CoordinatorHTTP: nc.CoordinatorHTTP,
					Refused: fmt.Sprintf("its scheme is not %s, the one of the URL asked", c.base.Scheme)}
			}
			base = next
		default:
			return readAPIError(resp)
		}
	}
}

// IsGroupCode reports whether err is an API answer with code (CodeNonEmptyGroup, ...).
func IsGroupCode(err error, code string) bool {
	var ae *APIError
	return errors.As(err, &ae) && ae.Code == code
}
