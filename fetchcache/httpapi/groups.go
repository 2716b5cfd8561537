package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/tiered/tiered/fetchcache"
	"github.com/tiered/tiered/fetchcache/auth"
	"github.com/tiered/tiered/fetchcache/groupadmin"
	"github.com/tiered/tiered/fetchcache/groups"
)

// Result codes of the /v1/groups routes (Kafka's names).
const (
	CodeGroupIDNotFound          = "GROUP_ID_NOT_FOUND"
	CodeNonEmptyGroup            = "NON_EMPTY_GROUP"
	CodeGroupAuthorizationFailed = "GROUP_AUTHORIZATION_FAILED"
	CodeNotCoordinator           = "NOT_COORDINATOR"
	CodeCoordinatorNotAvailable  = "COORDINATOR_NOT_AVAILABLE"
	CodeGroupSubscribedToTopic   = "GROUP_SUBSCRIBED_TO_TOPIC"
)

// Audit actions of the group routes.
const (
	AuditGroupReset         = "group.reset_offsets"
	AuditGroupDelete        = "group.delete"
	AuditGroupDeleteOffsets = "group.delete_offsets" // DELETE /v1/groups/{group}?topic=T
)

// Groups is the consumer-group administration the fetch service serves under /v1/groups
// (`tiered groups --fetch`).
type Groups struct {
	// Admin does the work, with the coordinator's membership (Admin.Live).
	Admin *groupadmin.Admin
	// Names lists the groups the coordinator holds in memory (for list).
	Names func(ctx context.Context) []string
	// Route says whether this replica coordinates group; when it does not, the
	// coordinator's Kafka address and HTTP URL ("" when unknown). An error means no
	// replica coordinates it now.
	Route func(group string) (self bool, kafkaAddr, httpURL string, err error)
}

// NotCoordinatorBody is the 421 NOT_COORDINATOR answer of a group route on a replica that
// does not coordinate the group: `tiered groups --fetch` repeats the request at
// CoordinatorHTTP.
type NotCoordinatorBody struct {
	ErrorBody
	Coordinator     string `json:"coordinator"`
	CoordinatorHTTP string `json:"coordinator_http,omitempty"`
}

// GroupListJSON is the answer of GET /v1/groups.
type GroupListJSON struct {
	Groups []groupadmin.Summary `json:"groups"`
}

// GroupDeletedJSON is the answer of DELETE /v1/groups/{group}.
type GroupDeletedJSON struct {
	Group   string `json:"group"`
	Deleted bool   `json:"deleted"`
}

// groupRoutes are the group administration routes, each with its permission:
//
//	GET    /v1/groups[?topic=T]                    list (the groups the principal may use)   read
//	GET    /v1/groups/{group}[?topic=T]            describe: members, offsets, lag           read (and the group)
//	POST   /v1/groups/{group}/reset-offsets        reset (groupadmin.ResetSpec; dry run)     admin
//	DELETE /v1/groups/{group}                      delete the group (its committed offsets)  admin
//	DELETE /v1/groups/{group}?topic=T              delete only T's committed offsets         admin
//
// ?topic=T narrows list to the groups with offsets on T (or live members assigned it),
// describe to T's partitions, and delete to T's offsets (groupadmin.DeleteOffsets, Kafka's
// OffsetDelete: 409 GROUP_SUBSCRIBED_TO_TOPIC while a member subscribes to T).
//
// A route naming a group this replica does not coordinate answers 421 NOT_COORDINATOR with
// the coordinator (describe, reset and delete need its membership).
func (a *httpAPI) groupRoutes(g *Groups) []route {
	return []route{
		{Route{Pattern: "GET /v1/groups", Perm: auth.PermRead}, a.counted(func(w *countingWriter, r *http.Request) { a.listGroups(g, w, r) })},
		{Route{Pattern: "GET /v1/groups/{group}", Perm: auth.PermRead}, a.counted(func(w *countingWriter, r *http.Request) { a.describeGroup(g, w, r) })},
		{Route{Pattern: "POST /v1/groups/{group}/reset-offsets", Perm: auth.PermAdmin, Audit: AuditGroupReset}, a.counted(func(w *countingWriter, r *http.Request) { a.resetGroup(g, w, r) })},
		{Route{Pattern: "DELETE /v1/groups/{group}", Perm: auth.PermAdmin, Audit: AuditGroupDelete}, a.counted(func(w *countingWriter, r *http.Request) { a.deleteGroup(g, w, r) })},
	}
}

// groupStatus maps the group errors to status and code (nil: not a group error).
func groupStatus(err error) (int, string, bool) {
	switch {
	case errors.Is(err, groupadmin.ErrGroupNotFound):
		return http.StatusNotFound, CodeGroupIDNotFound, true
	case errors.Is(err, groupadmin.ErrNotEmpty):
		return http.StatusConflict, CodeNonEmptyGroup, true
	case errors.Is(err, groupadmin.ErrSubscribedToTopic):
		return http.StatusConflict, CodeGroupSubscribedToTopic, true
	case errors.Is(err, groupadmin.ErrInvalidReset):
		return http.StatusBadRequest, fetchcache.CodeInvalidRequest, true
	case errors.Is(err, groups.ErrUnavailable):
		return http.StatusServiceUnavailable, CodeCoordinatorNotAvailable, true
	}
	return 0, "", false
}

func (a *httpAPI) groupErr(w *countingWriter, r *http.Request, err error) {
	if status, code, ok := groupStatus(err); ok {
		w.fail(status, code, err.Error())
		return
	}
	a.failErr(w, r, err)
}

// routed answers the request itself when this replica coordinates group (true), else
// 421 NOT_COORDINATOR naming the coordinator, or 503 when there is none.
func (a *httpAPI) routed(g *Groups, w *countingWriter, group string) bool {
	if g.Route == nil {
		return true
	}
	self, kafkaAddr, httpURL, err := g.Route(group)
	switch {
	case err != nil:
		w.fail(http.StatusServiceUnavailable, CodeCoordinatorNotAvailable, err.Error())
		return false
	case !self:
		w.code = CodeNotCoordinator
		WriteJSON(w, http.StatusMisdirectedRequest, NotCoordinatorBody{
			ErrorBody:   ErrorBody{Code: CodeNotCoordinator, Message: fmt.Sprintf("group %q is coordinated by the fetch replica at %s", group, kafkaAddr)},
			Coordinator: kafkaAddr, CoordinatorHTTP: httpURL})
		return false
	}
	return true
}

// groupAllowed answers 403 GROUP_AUTHORIZATION_FAILED unless the principal may use group
// (its groups patterns) or is an administrator.
func (a *httpAPI) groupAllowed(w *countingWriter, r *http.Request, group string) bool {
	p := auth.PrincipalFromContext(r.Context())
	if a.auth.GroupAllowed(p, group) || a.auth.May(p, auth.PermAdmin, "") {
		return true
	}
	a.auth.LogGroupDenied(a.log, fetchcache.InterfaceHTTP, p, group, r.RemoteAddr)
	w.fail(http.StatusForbidden, CodeGroupAuthorizationFailed, fmt.Sprintf("%s may not use group %q", p, group))
	return false
}

func (a *httpAPI) listGroups(g *Groups, w *countingWriter, r *http.Request) {
	var names []string
	if g.Names != nil {
		names = g.Names(r.Context())
	}
	all, err := g.Admin.List(r.Context(), names, r.URL.Query().Get("topic"))
	if err != nil {
		a.groupErr(w, r, err)
		return
	}
	p := auth.PrincipalFromContext(r.Context())
	admin := a.auth.May(p, auth.PermAdmin, "")
	out := GroupListJSON{Groups: []groupadmin.Summary{}}
	for _, s := range all {
		if admin || a.auth.GroupAllowed(p, s.Group) {
			out.Groups = append(out.Groups, s)
		}
	}
	WriteJSON(w, http.StatusOK, out)
}

func (a *httpAPI) describeGroup(g *Groups, w *countingWriter, r *http.Request) {
	group := r.PathValue("group")
	if !a.groupAllowed(w, r, group) || !a.routed(g, w, group) {
		return
	}
	d, err := g.Admin.Describe(r.Context(), group, r.URL.Query().Get("topic"))
	if err != nil {
		a.groupErr(w, r, err)
		return
	}
	// Only the offsets of topics the principal may describe, as Kafka's
	// OffsetFetch; their log offsets and lag only for those it may read,
	// as the partition route.
	if p := auth.PrincipalFromContext(r.Context()); !a.auth.May(p, auth.PermAdmin, "") {
		kept := d.Offsets[:0]
		for _, o := range d.Offsets {
			if !a.auth.May(p, auth.PermDescribe, o.Topic) {
				continue
			}
			if !a.auth.May(p, auth.PermRead, o.Topic) {
				o.LogStart, o.LogEnd, o.Lag = -1, -1, -1
			}
			kept = append(kept, o)
		}
		d.Offsets = kept
	}
	WriteJSON(w, http.StatusOK, d)
}

func (a *httpAPI) resetGroup(g *Groups, w *countingWriter, r *http.Request) {
	group := r.PathValue("group")
	p := auth.PrincipalFromContext(r.Context())
	var spec groupadmin.ResetSpec
	body, err := io.ReadAll(io.LimitReader(r.Body, maxAdminBodyBytes+1))
	switch {
	case err != nil && isTimeout(err):
		// As every body slower than BodyReadTimeout: 408, connection closed.
		w.code = fetchcache.CodeRequestTimedOut
		a.failWrite(w, r, &bodyTimeoutError{err: err})
		return
	case err != nil:
		w.fail(http.StatusBadRequest, fetchcache.CodeInvalidRequest, "read body: "+err.Error())
		return
	case len(body) > maxAdminBodyBytes:
		w.fail(http.StatusRequestEntityTooLarge, fetchcache.CodeInvalidRequest, fmt.Sprintf("body larger than %d bytes", maxAdminBodyBytes))
		return
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := decodeOne(dec, &spec); err != nil {
		w.fail(http.StatusBadRequest, fetchcache.CodeInvalidRequest, "reset-offsets body: "+err.Error())
		return
	}
	if !a.routed(g, w, group) {
		return
	}
	plan, err := g.Admin.Reset(r.Context(), group, spec)
	if err != nil {
		if spec.Execute {
			auth.Audit(a.log, p, AuditGroupReset, group, resultCode(err))
		}
		a.groupErr(w, r, err)
		return
	}
	if plan.Executed {
		auth.Audit(a.log, p, AuditGroupReset, group, auth.AuditOK)
	}
	WriteJSON(w, http.StatusOK, plan)
}

func (a *httpAPI) deleteGroup(g *Groups, w *countingWriter, r *http.Request) {
	group := r.PathValue("group")
	p := auth.PrincipalFromContext(r.Context())
	if !a.routed(g, w, group) {
		return
	}
	if topic := r.URL.Query().Get("topic"); topic != "" {
		a.deleteGroupOffsets(g, w, r, group, topic)
		return
	}
	if err := g.Admin.Delete(r.Context(), group); err != nil {
		auth.Audit(a.log, p, AuditGroupDelete, group, resultCode(err))
		a.groupErr(w, r, err)
		return
	}
	auth.Audit(a.log, p, AuditGroupDelete, group, auth.AuditOK)
	WriteJSON(w, http.StatusOK, GroupDeletedJSON{Group: group, Deleted: true})
}

// deleteGroupOffsets is DELETE /v1/groups/{group}?topic=T: only T's committed offsets.
// The audit target is "group/topic".
func (a *httpAPI) deleteGroupOffsets(g *Groups, w *countingWriter, r *http.Request, group, topic string) {
	p := auth.PrincipalFromContext(r.Context())
	target := group + "/" + topic
	out, err := g.Admin.DeleteOffsets(r.Context(), group, topic)
	if err != nil {
		auth.Audit(a.log, p, AuditGroupDeleteOffsets, target, resultCode(err))
		a.groupErr(w, r, err)
		return
	}
	auth.Audit(a.log, p, AuditGroupDeleteOffsets, target, auth.AuditOK)
	WriteJSON(w, http.StatusOK, out)
}

// resultCode is the audit result of a failed change: its error code.
func resultCode(err error) string {
	if _, code, ok := groupStatus(err); ok {
		return code
	}
	_, code := ErrorStatus(err)
	return code
}
