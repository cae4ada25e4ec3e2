package approvalpage_test

import (
	"context"
	"net/url"
	"reflect"
	"strings"
	"testing"

	"github.com/agentgate/agentgate/internal/approvalpage"
	"github.com/agentgate/agentgate/internal/loop"
	"github.com/agentgate/agentgate/internal/runs"
)

func TestParseDecision(t *testing.T) {
	// form builds url.Values from key, value pairs (keys may repeat).
	form := func(kv ...string) url.Values {
		v := url.Values{}
		for i := 0; i+1 < len(kv); i += 2 {
			v.Add(kv[i], kv[i+1])
		}
		return v
	}
	// browser adds the fields a browser always sends with the three-call
	// page: the empty textareas.
	browser := func(kv ...string) url.Values {
		return form(append([]string{"message", "", "reason.toolu_01", "", "reason.toolu_02", ""}, kv...)...)
	}
	long := strings.Repeat("é", approvalpage.MaxReasonLength+1)
	atLimit := strings.Repeat("é", approvalpage.MaxReasonLength)

	tests := []struct {
		name    string
		form    url.Values
		pending []runs.CallSummary
		want    loop.Decision
		wantErr string // substring of the error message; empty: no error
	}{
		{name: "approve", form: browser("digest", digest, "action", "approve"),
			want: loop.Decision{TurnDigest: digest, Action: loop.ActionApprove}},
		{name: "approve keeps a typed note; a radio marked approve agrees", form: form("digest", digest, "action", "approve", "message", "meh", "call.toolu_01", "approve"),
			want: loop.Decision{TurnDigest: digest, Action: loop.ActionApprove, Message: "meh"}},
		{name: "approve all with a call's reason typed", form: form("digest", digest, "action", "approve", "reason.toolu_02", "please no"),
			wantErr: `a reason was typed for call "toolu_02" but the whole turn was sent as approve`},
		{name: "deny all with calls' reasons typed", form: form("digest", digest, "action", "deny", "reason.toolu_01", "bad html", "reason.toolu_02", "keep b"),
			wantErr: `a reason was typed for call "toolu_01" but the whole turn was sent as deny`},
		{name: "approve all with a call marked deny", form: browser("digest", digest, "action", "approve", "call.toolu_01", "deny"),
			wantErr: `call "toolu_01" is marked deny but the whole turn was sent as approve`},
		{name: "deny all with a call marked approve", form: browser("digest", digest, "action", "deny", "call.toolu_02", "approve"),
			wantErr: `call "toolu_02" is marked approve but the whole turn was sent as deny`},
		{name: "deny with reason", form: form("digest", digest, "action", "deny", "message", "  wrong file\r\nuse b.md  ", "reason.toolu_01", "", "reason.toolu_02", ""),
			want: loop.Decision{TurnDigest: digest, Action: loop.ActionDeny, Message: "wrong file\nuse b.md"}},
		{name: "deny without reason", form: form("digest", digest, "action", "deny"),
			want: loop.Decision{TurnDigest: digest, Action: loop.ActionDeny}},
		{name: "deny reason at the limit", form: form("digest", digest, "action", "deny", "message", atLimit),
			want: loop.Decision{TurnDigest: digest, Action: loop.ActionDeny, Message: atLimit}},
		{name: "per call", form: form("digest", digest, "action", "per_call", "call.toolu_01", "approve", "reason.toolu_01", "ignored",
			"call.toolu_02", "deny", "reason.toolu_02", " not now "),
			want: loop.Decision{TurnDigest: digest, Calls: []loop.CallDecision{
				{CallID: "toolu_01", Action: loop.ActionApprove},
				{CallID: "toolu_02", Action: loop.ActionDeny, Message: "not now"},
			}}},
		{name: "per call with a whole-turn reason", form: form("digest", digest, "action", "per_call", "call.toolu_01", "approve", "call.toolu_02", "deny", "message", "not now"),
			wantErr: "with per-call decisions give each denied call its own reason"},
		// The page's buttons are Approve all and Deny all, and the field
		// above them takes a note with Approve all too.
		{name: "per call with a note above the buttons", form: form("digest", digest, "action", "per_call", "call.toolu_01", "approve", "call.toolu_02", "approve", "message", "looks right"),
			wantErr: `goes with "Approve all" (a note) or "Deny all" (the reason)`},
		{name: "per call on a single-call turn", form: form("digest", digest, "action", "per_call", "call.toolu_01", "deny"),
			pending: threeCalls()[:1],
			want:    loop.Decision{TurnDigest: digest, Calls: []loop.CallDecision{{CallID: "toolu_01", Action: loop.ActionDeny}}}},

		{name: "missing digest", form: form("action", "approve"), wantErr: "no turn digest"},
		{name: "empty digest", form: form("digest", "", "action", "approve"), wantErr: "no turn digest"},
		{name: "malformed digest", form: form("digest", "abc", "action", "approve"), wantErr: "turn digest is malformed"},
		{name: "uppercase digest", form: form("digest", strings.ToUpper(digest), "action", "approve"), wantErr: "turn digest is malformed"},
		{name: "missing action", form: form("digest", digest), wantErr: "no action"},
		{name: "bad action", form: form("digest", digest, "action", "yes"), wantErr: `unknown action "yes"`},
		{name: "edit action", form: form("digest", digest, "action", "edit"), wantErr: "edits are only possible through the API"},
		{name: "repeated action", form: form("digest", digest, "action", "approve", "action", "deny"), wantErr: `field "action" was sent more than once`},
		{name: "repeated digest", form: form("digest", digest, "digest", digest, "action", "approve"), wantErr: `field "digest" was sent more than once`},
		{name: "unknown field", form: form("digest", digest, "action", "approve", "input", "{}"), wantErr: `unknown field "input"`},
		{name: "unknown call id", form: form("digest", digest, "action", "per_call", "call.toolu_01", "approve", "call.toolu_02", "approve", "call.toolu_99", "deny"),
			wantErr: `unknown call id "toolu_99"`},
		{name: "unknown reason id", form: form("digest", digest, "action", "deny", "reason.nope", "x"), wantErr: `unknown call id "nope"`},
		// A call that needs no approval may be approved one by one (it
		// changes nothing), as the API takes it, but not denied.
		{name: "per call approving a call needing no approval", form: form("digest", digest, "action", "per_call", "call.toolu_01", "approve", "call.toolu_02", "deny", "call.toolu_03", "approve"),
			want: loop.Decision{TurnDigest: digest, Calls: []loop.CallDecision{
				{CallID: "toolu_01", Action: loop.ActionApprove},
				{CallID: "toolu_02", Action: loop.ActionDeny},
				{CallID: "toolu_03", Action: loop.ActionApprove},
			}}},
		{name: "approve all with a call needing no approval marked approve", form: form("digest", digest, "action", "approve", "call.toolu_03", "approve"),
			want: loop.Decision{TurnDigest: digest, Action: loop.ActionApprove}},
		{name: "per call denying a call needing no approval", form: form("digest", digest, "action", "per_call", "call.toolu_01", "approve", "call.toolu_02", "approve", "call.toolu_03", "deny"),
			wantErr: `call "toolu_03" (read_document) needs no approval (its tool only reads): it runs without one, so it cannot be denied; only calls held for approval are decided one by one`},
		{name: "deny all with a call needing no approval marked deny", form: form("digest", digest, "action", "deny", "call.toolu_03", "deny"),
			wantErr: `call "toolu_03" (read_document) needs no approval (its tool only reads): it runs without one, so it cannot be denied`},
		{name: "a reason for a call needing no approval", form: form("digest", digest, "action", "per_call", "call.toolu_01", "approve", "call.toolu_02", "approve", "reason.toolu_03", "no"),
			wantErr: `call "toolu_03" (read_document) needs no approval (its tool only reads): it runs without one, so it cannot be denied`},
		{name: "per call approving a call a deny rule refused", form: form("digest", digest, "action", "per_call", "call.toolu_01", "approve", "call.toolu_03", "approve"),
			pending: deniedThird(),
			wantErr: `call "toolu_03" (read_document) was denied by policy rule "no-reads": it never runs, so it cannot be decided`},
		{name: "per call approving a call needing no approval, nothing held", form: form("digest", digest, "action", "per_call", "call.toolu_03", "approve"), pending: threeCalls()[2:],
			wantErr: "no call of this turn needs approval"},
		{name: "per call missing a choice", form: form("digest", digest, "action", "per_call", "call.toolu_01", "approve"),
			wantErr: `choose approve or deny for call "toolu_02" (send_email)`},
		{name: "per call bad choice", form: form("digest", digest, "action", "per_call", "call.toolu_01", "maybe", "call.toolu_02", "approve"),
			wantErr: `call "toolu_01": choose approve or deny, not "maybe"`},
		{name: "per call edit", form: form("digest", digest, "action", "per_call", "call.toolu_01", "edit", "call.toolu_02", "approve"),
			wantErr: "edits are only possible through the API"},
		{name: "per call with nothing to approve", form: form("digest", digest, "action", "per_call"), pending: threeCalls()[2:],
			wantErr: "no call of this turn needs approval"},
		{name: "reason too long", form: form("digest", digest, "action", "deny", "message", long),
			wantErr: "the reason has 2001 characters; at most 2000 are allowed"},
		{name: "call reason too long", form: form("digest", digest, "action", "per_call", "call.toolu_01", "deny", "call.toolu_02", "deny", "reason.toolu_01", long),
			wantErr: `the reason for call "toolu_01" has 2001 characters`},
		{name: "reason not UTF-8", form: form("digest", digest, "action", "deny", "message", "\xff\xfe"), wantErr: "not valid UTF-8"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pending := tt.pending
			if pending == nil {
				pending = threeCalls()
			}
			got, err := approvalpage.ParseDecision(tt.form, pending)
			if tt.wantErr != "" {
				if err == nil {
					t.Fatalf("ParseDecision = %+v, nil; want error containing %q", got, tt.wantErr)
				}
				want := runs.EInvalid // a form the page does not send is malformed
				if strings.Contains(tt.wantErr, "more than once") || strings.HasPrefix(tt.wantErr, "unknown field") {
					want = runs.EBadRequest
				}
				if code := runs.ErrorCode(err); code != want {
					t.Errorf("error code = %q, want %q", code, want)
				}
				if msg := runs.ErrorMessage(err); !strings.Contains(msg, tt.wantErr) {
					t.Errorf("error message = %q, want it to contain %q", msg, tt.wantErr)
				}
				if !reflect.DeepEqual(got, loop.Decision{}) {
					t.Errorf("decision = %+v with an error, want the zero decision", got)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseDecision: %v", err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("ParseDecision =\n %+v\nwant\n %+v", got, tt.want)
			}
		})
	}
}

// TestConfirmFormRoundTrip posts what the confirm page's fields would send
// and checks that ParseDecision accepts exactly those names.
func TestConfirmFormRoundTrip(t *testing.T) {
	p := confirmPage()
	_, body := approvalpage.Confirm(p)
	for _, name := range []string{"digest", "action", "message", "call.toolu_01", "reason.toolu_01", "call.toolu_02", "reason.toolu_02"} {
		if !strings.Contains(body, `name="`+name+`"`) {
			t.Fatalf("page has no field %q", name)
		}
	}
	form := url.Values{
		"digest": {p.TurnDigest}, "action": {"per_call"}, "message": {""},
		"call.toolu_01": {"deny"}, "reason.toolu_01": {"no"}, "call.toolu_02": {"approve"}, "reason.toolu_02": {""},
	}
	d, err := approvalpage.ParseDecision(form, p.Calls)
	if err != nil {
		t.Fatalf("ParseDecision: %v", err)
	}
	if d.TurnDigest != p.TurnDigest || len(d.Calls) != 2 || d.Calls[0].Message != "no" {
		t.Errorf("decision = %+v", d)
	}
}

// deniedThird is threeCalls with its read refused by a deny rule.
func deniedThird() []runs.CallSummary {
	calls := threeCalls()
	calls[2].Rule, calls[2].Denied = "no-reads", "reads are off"
	return calls
}

// TestParseDecisionAgreesWithAPI checks that the form takes a per-call
// choice on every kind of call exactly when the API takes the same choice
// in a per-call decision (loop.ValidateDecision), and that a refusal says
// the same about the call.
func TestParseDecisionAgreesWithAPI(t *testing.T) {
	kinds := []struct {
		name string
		call runs.CallSummary
	}{
		{"held write", runs.CallSummary{ID: "c", Tool: "write_document", Effect: "write", NeedsApproval: true}},
		{"read", runs.CallSummary{ID: "c", Tool: "read_document", Effect: "read"}},
		{"write an allow rule lets run", runs.CallSummary{ID: "c", Tool: "write_document", Effect: "write", Rule: "drafts"}},
		{"write approved for the run", runs.CallSummary{ID: "c", Tool: "write_document", Effect: "write", Rule: "default", ApprovedBy: "ops@example.com"}},
		{"call a deny rule refused", runs.CallSummary{ID: "c", Tool: "write_document", Effect: "write", Rule: "no-prod", Denied: "not in prod"}},
		{"unknown tool's call", runs.CallSummary{ID: "c", Tool: "no_such_tool", Rejected: `unknown tool "no_such_tool"`}},
		{"held write whose input its schema refuses", runs.CallSummary{ID: "c", Tool: "write_document", Effect: "write", NeedsApproval: true, Rejected: "input: missing path"}},
	}
	held := runs.CallSummary{ID: "h", Tool: "send_email", Effect: "write", NeedsApproval: true}
	for _, k := range kinds {
		for _, action := range []loop.Action{loop.ActionApprove, loop.ActionDeny} {
			t.Run(k.name+"/"+string(action), func(t *testing.T) {
				pending := []runs.CallSummary{held, k.call}
				api := loop.Decision{TurnDigest: digest, Calls: []loop.CallDecision{{CallID: "h", Action: loop.ActionApprove}, {CallID: "c", Action: action}}}
				calls := []loop.PendingCall{held.PendingCall(), k.call.PendingCall()}
				// No edits, so no toolbox and no policy are needed.
				apiErr := loop.ValidateDecision(context.Background(), nil, nil, calls, digest, api)

				got, formErr := approvalpage.ParseDecision(url.Values{
					"digest": {digest}, "action": {"per_call"}, "call.h": {"approve"}, "call.c": {string(action)},
				}, pending)
				switch {
				case (apiErr == nil) != (formErr == nil):
					t.Fatalf("API: %v; form: %v; want both to accept or both to refuse", apiErr, formErr)
				case apiErr == nil:
					if !reflect.DeepEqual(got, api) {
						t.Errorf("form decision = %+v, want the API's %+v", got, api)
					}
				default:
					// The API's message is "calls[1]: <why>; <advice>",
					// the form's "<why>; <advice>" with its own advice.
					why, _, _ := strings.Cut(strings.TrimPrefix(runs.ErrorMessage(runs.FromLoop(apiErr)), "calls[1]: "), ";")
					if msg := runs.ErrorMessage(formErr); !strings.HasPrefix(msg, why) {
						t.Errorf("form refusal %q does not start with the API's reason %q", msg, why)
					}
					if k.call.Rejected != "" && (!strings.Contains(why, "cannot run ("+k.call.Rejected+")") || strings.Contains(why, "runs without")) {
						t.Errorf("refusal %q, want it to say the call cannot run (%s)", why, k.call.Rejected)
					}
					if code := runs.ErrorCode(formErr); code != runs.EInvalid {
						t.Errorf("form refusal code = %q, want %q (422, as the API's)", code, runs.EInvalid)
					}
				}
			})
		}
	}
}

// TestEditRefusalSaysWhy: the page takes no edit; its refusal says the API
// does, except on a turn that needs approvals from more than one person,
// where the API refuses edits too and the message says that instead: no
// turn is told "not under a quorum" when it has none.
func TestEditRefusalSaysWhy(t *testing.T) {
	mine := []string{"toolu_01", "toolu_02"}
	throughAPI := "edits are only possible through the API (POST /runs/{id}/decision, or agentgate runs decide --call ID=edit:@file.json)"
	underQuorum := "this turn needs approvals from more than one person, so no one can edit its calls, here or through the API"
	tests := []struct {
		name        string
		parse       func(url.Values) (loop.Decision, error)
		want, never string
	}{
		{"one decision", func(f url.Values) (loop.Decision, error) { return approvalpage.ParseDecision(f, threeCalls()) }, throughAPI, "quorum"},
		{"votes without a quorum", func(f url.Values) (loop.Decision, error) {
			return approvalpage.ParseVote(f, threeCalls(), mine, false)
		}, throughAPI, "quorum"},
		{"votes under a quorum", func(f url.Values) (loop.Decision, error) {
			return approvalpage.ParseVote(f, threeCalls(), mine, true)
		}, underQuorum, "only possible through the API"},
	}
	for _, tt := range tests {
		for _, f := range []url.Values{
			{"digest": {digest}, "action": {"edit"}},
			{"digest": {digest}, "action": {"per_call"}, "call.toolu_01": {"edit"}, "call.toolu_02": {"approve"}},
		} {
			_, err := tt.parse(f)
			msg := runs.ErrorMessage(err)
			if runs.ErrorCode(err) != runs.EInvalid || !strings.Contains(msg, tt.want) || strings.Contains(msg, tt.never) {
				t.Errorf("%s, %v: %v; want %s containing %q and not %q", tt.name, f, err, runs.EInvalid, tt.want, tt.never)
			}
		}
	}
}
