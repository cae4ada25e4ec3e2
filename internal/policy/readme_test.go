package policy_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestREADMEWarnsThatMetadataIsTheInitiatorsWord: the README offers
// run.metadata to policy conditions, and says beside it that the initiator
// sets it, so an allow rule keyed on it lets an initiator authorise their
// own calls (tester helper-112 P3: it offered the field without a word).
func TestREADMEWarnsThatMetadataIsTheInitiatorsWord(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(b), "**The policy** decides per tool call.")
	if !ok {
		t.Fatal("README has no policy section")
	}
	section, _, _ = strings.Cut(section, "**Approver tool gate.**")
	flat := strings.Join(strings.Fields(section), " ")
	for _, want := range []string{
		"`run.metadata`; compiled once",
		"**`run.metadata` is the initiator's word.** Whoever starts a run sets its `metadata`, so an `allow` rule keyed on it",
		"lets an initiator authorise their own calls",
		"key rules on who started the run (`run.initiator_person`, `run.initiator_groups`, from the directory) or on the call's `args`",
	} {
		if !strings.Contains(flat, want) {
			t.Errorf("README's policy section does not say %q", want)
		}
	}
}
