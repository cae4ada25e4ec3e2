package stack

import (
	"strings"
	"testing"
)

// TestQuorumCheck: QuorumCheck is AGENTGATE_QUORUM_CHECK of the two
// workers, which schedule the checks at a suspension (purge makes the
// checks a run has, whatever it is set to); unset, the variable is left
// out and the workers schedule none (off in this release).
func TestQuorumCheck(t *testing.T) {
	def := defaultTemplate(t)
	on := synth(t, AgentgateStackProps{ModelArns: []string{testModelArn}, QuorumCheck: "on"})
	for _, name := range FunctionNames {
		_, fn := def.functionByName(t, testStackName+"-"+name)
		if v, ok := fn["Environment"].(map[string]any)["Variables"].(map[string]any)["AGENTGATE_QUORUM_CHECK"]; ok {
			t.Errorf("%s: AGENTGATE_QUORUM_CHECK = %v without QuorumCheck, want none", name, v)
		}
		_, fn = on.functionByName(t, testStackName+"-"+name)
		v, ok := fn["Environment"].(map[string]any)["Variables"].(map[string]any)["AGENTGATE_QUORUM_CHECK"]
		switch name {
		case "purge":
			if ok {
				t.Errorf("purge: AGENTGATE_QUORUM_CHECK = %v, want none (it schedules no check)", v)
			}
		default:
			if v != "on" {
				t.Errorf("%s: AGENTGATE_QUORUM_CHECK = %v, want on", name, v)
			}
		}
	}
	for _, bad := range []string{"yes", "1", "true"} {
		if err := (AgentgateStackProps{QuorumCheck: bad}).Validate(); err == nil {
			t.Errorf("Validate(QuorumCheck %q) = nil, want an error", bad)
		}
	}
}

// TestQuorumCheckEvery: QuorumCheckEvery is AGENTGATE_QUORUM_CHECK_EVERY
// of all three functions (the workers schedule a hold's first check by
// it, purge the later ones and the confirmation of a lost call); unset,
// the variable is left out and the functions keep their hour. A value
// outside 1s to 24h, or not a duration, is refused at synth.
func TestQuorumCheckEvery(t *testing.T) {
	def := defaultTemplate(t)
	short := synth(t, AgentgateStackProps{ModelArns: []string{testModelArn}, QuorumCheckEvery: "30s"})
	for _, name := range FunctionNames {
		_, fn := def.functionByName(t, testStackName+"-"+name)
		if v, ok := fn["Environment"].(map[string]any)["Variables"].(map[string]any)["AGENTGATE_QUORUM_CHECK_EVERY"]; ok {
			t.Errorf("%s: AGENTGATE_QUORUM_CHECK_EVERY = %v without QuorumCheckEvery, want none", name, v)
		}
		_, fn = short.functionByName(t, testStackName+"-"+name)
		if v := fn["Environment"].(map[string]any)["Variables"].(map[string]any)["AGENTGATE_QUORUM_CHECK_EVERY"]; v != "30s" {
			t.Errorf("%s: AGENTGATE_QUORUM_CHECK_EVERY = %v, want 30s", name, v)
		}
	}
	for _, bad := range []string{"0s", "999ms", "25h", "hourly", "60"} {
		if err := (AgentgateStackProps{QuorumCheckEvery: bad}).Validate(); err == nil || !strings.Contains(err.Error(), "want a Go duration from 1s to 24h") {
			t.Errorf("Validate(QuorumCheckEvery %q) = %v, want an error giving the range", bad, err)
		}
	}
}
