package loop

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"
)

// Remote definitions: a DefinitionChecker tool's definition lives with its
// source and may change while the process runs. The loop asks the source
// when a turn is about to be held (so the held call is checked, previewed
// and hashed on the definition the source has now) and before a held call
// runs (so it runs only on the definition it was held with).

// definitionAnswer is what a DefinitionChecker said about its definition.
type definitionAnswer struct {
	hash string
	err  error
}

type askedAtKey struct{}

// DefinitionsAskedAt returns, in the context of a CurrentDefinition call,
// when the loop began asking the tools of one turn for their definitions.
// A source may answer all its tools from one look at its definitions taken
// at or after that moment (one listing of an MCP server for all of them).
func DefinitionsAskedAt(ctx context.Context) (time.Time, bool) {
	at, ok := ctx.Value(askedAtKey{}).(time.Time)
	return at, ok
}

// askDefinitions asks the named tools (DefinitionCheckers of the toolbox,
// each once) for their current definitions, all at once: tools of one
// source can then share one request to it (DefinitionsAskedAt).
func (r *Runner) askDefinitions(ctx context.Context, names []string) map[string]definitionAnswer {
	ctx = context.WithValue(ctx, askedAtKey{}, time.Now())
	answers := make(map[string]definitionAnswer, len(names))
	var (
		mu sync.Mutex
		wg sync.WaitGroup
	)
	for _, name := range names {
		tool, _ := r.Tools.Lookup(name)
		checker := tool.(DefinitionChecker)
		wg.Add(1)
		go func() {
			defer wg.Done()
			var a definitionAnswer
			def, err := checker.CurrentDefinition(ctx)
			if err == nil {
				a.hash, err = DefinitionHash(def)
			}
			a.err = err
			mu.Lock()
			answers[name] = a
			mu.Unlock()
		}()
	}
	wg.Wait()
	return answers
}

// checkerNames returns the distinct names of the calls' tools that are
// DefinitionCheckers of the toolbox and for which keep holds, in call order.
func (r *Runner) checkerNames(calls []PendingCall, keep func(PendingCall) bool) []string {
	var names []string
	seen := map[string]bool{}
	for _, c := range calls {
		if seen[c.Name] || !keep(c) {
			continue
		}
		if tool, ok := r.Tools.Lookup(c.Name); ok {
			if _, ok := tool.(DefinitionChecker); ok {
				seen[c.Name] = true
				names = append(names, c.Name)
			}
		}
	}
	return names
}

// refreshHeld asks the DefinitionChecker tools of a turn about to be held
// for the definitions they have now, and reports whether one differs from
// the definition the turn was planned with (the tool and the toolbox then
// hold the new one). A source that cannot be reached leaves the definition
// this process has: the call is held on it, unverified names such tools
// with what approvers are told, and the resume asks again.
func (s *segment) refreshHeld(ctx context.Context, calls []PendingCall) (changed bool, unverified map[string]*UnverifiedDefinition) {
	names := s.r.checkerNames(calls, func(c PendingCall) bool { return s.allowed[c.Name] })
	if len(names) == 0 {
		return false, nil
	}
	before := make(map[string]string, len(names))
	for _, name := range names {
		before[name], _ = s.r.Tools.Hash(name)
	}
	answers := s.r.askDefinitions(ctx, names)
	for _, name := range names {
		if now, _ := s.r.Tools.Hash(name); now != before[name] {
			changed = true
		}
		if err := answers[name].err; err != nil {
			if unverified == nil {
				unverified = map[string]*UnverifiedDefinition{}
			}
			unverified[name] = unverifiedBy(err)
		}
	}
	if changed {
		s.specs = s.r.specsOf(s.allowedNames)
	}
	return changed, unverified
}

// MaxUnverifiedReasonBytes caps the reason a held call's unverified
// definition gives (a longer one is cut, ending in "…"). The reason holds
// nothing JSON escapes, so it takes at most this much of the run row's
// summary of the turn (runs.MaxPendingCallsSize) per call.
const MaxUnverifiedReasonBytes = 200

// unverifiedBy is what approvers are told of a definition the source
// could not be asked about: the cause a DefinitionUnavailableError gives,
// never another error's message (it may name the source's address).
func unverifiedBy(err error) *UnverifiedDefinition {
	u := &UnverifiedDefinition{Reason: "its source could not be asked; the agentgate log has the error"}
	var de *DefinitionUnavailableError
	if errors.As(err, &de) {
		if c := plainReason(de.Cause); c != "" {
			u.Reason = c
		}
		if !de.ListedAt.IsZero() {
			u.ListedAt = de.ListedAt.UTC()
		}
	}
	if len(u.Reason) > MaxUnverifiedReasonBytes {
		cut := MaxUnverifiedReasonBytes - len("…")
		for cut > 0 && !utf8.RuneStart(u.Reason[cut]) {
			cut--
		}
		u.Reason = u.Reason[:cut] + "…"
	}
	return u
}

// plainReason is s on one line with every character JSON or HTML would
// escape, or a reader could not see (control and format characters,
// invalid UTF-8), made a space.
func plainReason(s string) string {
	return strings.Join(strings.Fields(strings.Map(func(r rune) rune {
		if r == utf8.RuneError || !unicode.IsPrint(r) || strings.ContainsRune(`<>&"\`, r) {
			return ' '
		}
		return r
	}, s)), " ")
}

// noteUnverified marks the held calls whose tool's definition could not
// be checked (refreshHeld); a call the policy denied asks no approver and
// gets no note.
func noteUnverified(calls []PendingCall, unverified map[string]*UnverifiedDefinition) {
	for i, c := range calls {
		if u := unverified[c.Name]; u != nil && c.Denied == "" {
			note := *u
			calls[i].DefinitionUnverified = &note
		}
	}
}

// runs reports whether a held call is to run under its decision (nil
// actions: a turn that needed no approval, every call runs).
func runs(c PendingCall, actions map[string]CallDecision) bool {
	if c.Denied != "" {
		return false
	}
	if actions == nil {
		return c.Rejected == ""
	}
	act := actions[c.ID]
	return act.Action != ActionDeny && (c.Rejected == "" || act.Action == ActionEdit)
}

// confirmDefinitions asks the DefinitionChecker tools of the calls that are
// to run for their current definitions (refreshing this process's copy). A
// definition that no longer hashes to the one recorded when the call was
// held refuses (ErrToolChanged); one that cannot be confirmed is returned
// by call id with the reason, and that call does not run. asked names the
// tools that were asked: their answer, not this process's copy, decides.
func (r *Runner) confirmDefinitions(ctx context.Context, calls []PendingCall, hashes map[string]string, actions map[string]CallDecision) (unconfirmed map[string]string, asked map[string]bool, err error) {
	names := r.checkerNames(calls, func(c PendingCall) bool { return runs(c, actions) })
	if len(names) == 0 {
		return nil, nil, nil
	}
	answers := r.askDefinitions(ctx, names)
	asked = make(map[string]bool, len(names))
	for _, name := range names {
		asked[name] = true
	}
	for _, c := range calls {
		a, ok := answers[c.Name]
		if !ok || !runs(c, actions) {
			continue
		}
		if a.err != nil {
			if unconfirmed == nil {
				unconfirmed = map[string]string{}
			}
			unconfirmed[c.ID] = a.err.Error()
			continue
		}
		if want, recorded := hashes[c.Name]; recorded && a.hash != want {
			return nil, nil, fmt.Errorf("%w: tool %q (call %s) is not what the approver reviewed: its server's definition of it now differs from the one the call was held with "+
				"(changed after the run was held, or before if the server could not be reached then); nothing of the turn ran",
				ErrToolChanged, c.Name, c.ID)
		}
	}
	return unconfirmed, asked, nil
}
